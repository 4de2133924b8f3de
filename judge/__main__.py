"""`python -m judge` runs the command line."""

import sys

from judge.cli.main import main

if __name__ == "__main__":  # not when a spawned process imports it (judge eval --processes)
    sys.exit(main())
