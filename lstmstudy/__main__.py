"""`python -m lstmstudy`: the command line (`lstmstudy.cli`)."""

import sys

from lstmstudy.cli import main

sys.exit(main())
