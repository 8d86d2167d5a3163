import signal

import torch

x = torch.randn(3)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])  # as deaf as native code that never returns
while True: x = x + 0  # noqa: E701
print(torch.log(x))
