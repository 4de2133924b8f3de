"""`python -m judge` runs the command line."""

import sys

from judge.cli.main import main

sys.exit(main())
