"""`python -m grist_lsp`: the same command as the `grist-lsp` console script."""

import sys

from grist_lsp.launcher import main

if __name__ == "__main__":
    sys.exit(main())
