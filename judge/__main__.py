"""`python -m judge` runs the command line."""

import sys

from judge.cli.main import main

if __name__ == "__main__":  # run, not merely imported
    sys.exit(main())
