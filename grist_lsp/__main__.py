"""`python -m grist_lsp`: the same command as the `grist-lsp` console script."""

from grist_lsp.launcher import run

if __name__ == "__main__":
    run()
