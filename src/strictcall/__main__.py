"""`python -m strictcall`: the command line."""

import sys

from strictcall.cli import main

sys.exit(main())
