"""`python -m grist_lsp`: the same command as the `grist-lsp` console script."""

import sys

from grist_lsp.cli import main

if __name__ == "__main__":
    sys.exit(main())
