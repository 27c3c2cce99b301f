"""The long commands' progress (reliability/progress.py): plain lines, at most one per tenth
of the way, where standard error is no terminal; a bar redrawn in place where it is one."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability.progress import Progress


def test_without_a_terminal_progress_is_a_few_plain_lines() -> None:
    out = io.StringIO()
    with Progress("fuzz: gateway", total=1000, unit="inputs", stream=out, tty=False) as progress:
        for _ in range(1000):
            progress.advance()
    lines = out.getvalue().splitlines()
    assert lines[0] == "fuzz: gateway: started (1,000 inputs)"
    assert "fuzz: gateway: 50%, 500 of 1,000 inputs" in "\n".join(lines)
    assert lines[-1].startswith("fuzz: gateway: done, 1,000 inputs in ")
    assert len(lines) <= 13  # start, at most one per tenth, the end
    assert "\r" not in out.getvalue()


def test_on_a_terminal_progress_is_a_bar_redrawn_in_place() -> None:
    out = io.StringIO()
    with Progress("load", total=4, unit="s", stream=out, tty=True) as progress:
        progress.update(2)
    text = out.getvalue()
    assert "\rload [" + "#" * 15 + "." * 15 + "]  50% 2 s" in text
    assert text.endswith("load: done, 2 s in 0.0 s\n")


def test_a_phase_stopped_by_an_error_says_so() -> None:
    out = io.StringIO()
    with (
        pytest.raises(KeyboardInterrupt),
        Progress("crash", total=3, stream=out, tty=False) as progress,
    ):
        progress.advance()
        raise KeyboardInterrupt
    assert out.getvalue().splitlines()[-1].startswith("crash: stopped, 1 in ")


def test_without_a_total_progress_counts_what_is_done() -> None:
    out = io.StringIO()
    with Progress("bench", stream=out, tty=False) as progress:
        progress.advance(3)
    assert "bench: 3, " in out.getvalue()
