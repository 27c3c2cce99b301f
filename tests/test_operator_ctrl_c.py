"""Ctrl-C while the command line is still loading (the first tenth of a second of a start, and
while a server's stack loads): the command ends with 130 and no traceback, as it does once
running. The SIGINT is sent by the process to itself at the moment a given module is imported,
so the test does not depend on timing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from servers import ctrl_c_as_at_a_terminal

DEADLINE_S = 60.0

CHILD = """
import importlib.abc, os, runpy, signal, sys

class CtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == MODULE:
            os.kill(os.getpid(), signal.SIGINT)  # handled at the next instruction, mid-import
        return None

MODULE = os.environ["CTRL_C_AT"]
sys.meta_path.insert(0, CtrlC())
sys.argv = [os.path.join(os.path.dirname(sys.executable), "strictcall"), *sys.argv[1:]]
runpy.run_module("strictcall", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    "module",
    ["strictcall.core.gateway", "strictcall.cli.arguments", "uvicorn"],
    ids=["the-package", "the-command-line", "the-server-stack"],
)
def test_ctrl_c_while_loading_exits_130_without_a_traceback(tmp_path: Path, module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "serve", "--port", "0", "--db", str(tmp_path / "s.sqlite3")],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
        env={**os.environ, "CTRL_C_AT": module},
        preexec_fn=ctrl_c_as_at_a_terminal,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130
    assert "listening" not in done.stdout


def test_a_library_importing_strictcall_keeps_pythons_own_ctrl_c() -> None:
    code = (
        "import signal, strictcall\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
        preexec_fn=ctrl_c_as_at_a_terminal,
    )
    assert done.returncode == 0, done.stderr


def test_a_ctrl_c_ignored_by_the_parent_stays_ignored() -> None:
    code = (
        "import signal, sys\n"
        "sys.argv[0] = 'strictcall'\n"
        "import strictcall\n"
        "assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert done.returncode == 0, done.stderr
