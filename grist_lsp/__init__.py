"""grist-lsp: find and prove NaN/INF bugs in PyTorch programs."""

__version__ = "0.1.0"
