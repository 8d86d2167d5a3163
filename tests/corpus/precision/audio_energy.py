"""Frame energies of a float16 waveform, for a loudness loss on a speech enhancer's output."""

import numpy as np
import torch

t = np.linspace(0.0, 1.0, 16 * 1024, dtype=np.float32)
wave = torch.from_numpy(0.5 * np.sin(2 * np.pi * 220.0 * t)).half()
frames = wave.reshape(16, 1024)
energy = frames.pow(2).sum(-1)  # expect: confirmed overflow
loudness = 10.0 * torch.log10(energy.float() + 1e-6)
print("loudness", loudness.mean().item())
