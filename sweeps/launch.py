"""`python -m sweeps.launch studies/<name>.yaml [--set key.path=value ...] [--dry-run]`: the
command users type; the launch itself is `sweeps.run.launch`."""

import sys

from sweeps.run.launch import main

if __name__ == "__main__":
    sys.exit(main())
