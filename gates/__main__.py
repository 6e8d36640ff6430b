import sys

from gates.cli import main

sys.exit(main())
