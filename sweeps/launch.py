"""`python -m sweeps.launch studies/<name>.yaml [--set key.path=value ...] [--dry-run]`: the
command users type; the launch itself is `sweeps.run.launch`."""

from sweeps.run.launch import exit_now, main

if __name__ == "__main__":
    exit_now(main())
