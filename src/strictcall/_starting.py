"""The command line's first moments: a Ctrl-C while it is still loading (before its commands
handle one) ends it at once with status 130 and no traceback. Imported first by the package,
it acts only for the command line (`strictcall ...`, `python -m strictcall ...`): a SIGINT the
parent ignored stays ignored, and a program importing strictcall as a library is left alone."""

import contextlib
import os
import signal
import sys

INTERRUPTED_EXIT = 130
"""The exit status of a command ended by Ctrl-C, as a shell reports it (128 + SIGINT)."""


def _interrupted_while_loading(signum: int, frame: object) -> None:
    raise SystemExit(INTERRUPTED_EXIT)


def quiet_ctrl_c_while_loading() -> None:
    """Set the quiet handler, for the command line only (see the module's docstring)."""
    command = os.path.basename(sys.argv[0]) == "strictcall" or sys.orig_argv[1:3] == [
        "-m",
        "strictcall",
    ]
    if command and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        with contextlib.suppress(ValueError):  # not the main thread: no handler to set
            signal.signal(signal.SIGINT, _interrupted_while_loading)


def loaded() -> None:
    """The command line has loaded: Ctrl-C is Python's KeyboardInterrupt again, which each
    command answers (its own line, its own exit status)."""
    if signal.getsignal(signal.SIGINT) is _interrupted_while_loading:
        signal.signal(signal.SIGINT, signal.default_int_handler)


quiet_ctrl_c_while_loading()
