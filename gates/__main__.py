import sys

if sys.argv[1:2] == ["claims"]:  # python -m gates claims ...: the paper's claims over seeds
    from gates.claims_cli import main

    sys.exit(main(sys.argv[2:]))
from gates.cli import main

sys.exit(main())
