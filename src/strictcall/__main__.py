"""`python -m strictcall`: the command line."""

import sys

from strictcall.cli.parser import main

sys.exit(main())
