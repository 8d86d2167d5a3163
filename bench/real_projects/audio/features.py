"""Log-mel features."""
import torch


def power_spectrogram(wave, n_fft=256, hop=64):
    window = torch.hann_window(n_fft)
    spec = torch.stft(wave, n_fft, hop, window=window, return_complex=True)
    return spec.abs() ** 2


def log_mel(power, mel_fb):
    mel = power.transpose(-1, -2) @ mel_fb
    return torch.log(mel + 1e-6)  # expect: unproven log


def log_mel_unsafe(power, mel_fb):
    mel = power.transpose(-1, -2) @ mel_fb
    return torch.log(mel)  # expect: possible log


def db(power, ref=1.0, amin=1e-10):
    return 10.0 * torch.log10(torch.clamp(power, min=amin) / ref)  # expect: safe log, safe div
