"""`python -m sweeps.dashboard <study.yaml | name> [--port 8080]`: optuna-dashboard on the study's
own storage, on 127.0.0.1 (`sweeps.run.dashboard`)."""

import sys

from sweeps.run.dashboard import main

if __name__ == "__main__":
    sys.exit(main())
