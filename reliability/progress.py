"""What a long command is doing and how far along it is, on standard error: a bar redrawn in
place on a terminal, plain lines otherwise (a log, CI), at most one every `LINE_EVERY_S` or
every tenth of the way. Shared by `make fuzz`, `make load`, `make bench` and the crash harness.

    with Progress("fuzz: gateway", total=20000, unit="inputs") as progress:
        for ...:
            progress.advance()
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Final, TextIO

BAR_WIDTH: Final = 30
REDRAW_EVERY_S: Final = 0.1
LINE_EVERY_S: Final = 5.0


class Progress:
    """One phase of a long command, `total` steps long (None: not known in advance)."""

    def __init__(
        self,
        what: str,
        total: float | None = None,
        *,
        unit: str = "",
        stream: TextIO | None = None,
        tty: bool | None = None,
    ) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.done = 0.0
        self._stream = stream if stream is not None else sys.stderr
        self._tty = self._stream.isatty() if tty is None else tty
        self._began = time.monotonic()
        self._drawn_at = 0.0
        self._tenth = -1
        self._finished = False

    def __enter__(self) -> Progress:
        self._line(
            f"{self.what}: started" + (f" ({self._amount(self.total)})" if self.total else "")
        )
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.finish("stopped" if kind is not None else "done")

    def advance(self, steps: float = 1) -> None:
        """`steps` more are done."""
        self.update(self.done + steps)

    def update(self, done: float) -> None:
        """`done` steps are done in all (e.g. seconds elapsed of a timed run)."""
        self.done = done
        now = time.monotonic()
        if self._tty:
            if now - self._drawn_at >= REDRAW_EVERY_S:
                self._drawn_at = now
                self._stream.write("\r" + self._status(now) + "\033[K")
                self._stream.flush()
            return
        tenth = int(10 * done / self.total) if self.total else -1
        if tenth > self._tenth or now - self._drawn_at >= LINE_EVERY_S:
            self._tenth = max(tenth, self._tenth)
            self._drawn_at = now
            self._line(self._status(now))

    def finish(self, how: str = "done") -> None:
        """The phase ended; says so once, with how long it took."""
        if self._finished:
            return
        self._finished = True
        took = time.monotonic() - self._began
        if self._tty:
            self._stream.write("\r\033[K")
        self._line(f"{self.what}: {how}, {self._amount(self.done)} in {took:.1f} s")

    def _status(self, now: float) -> str:
        elapsed = now - self._began
        if not self.total:
            return f"{self.what}: {self._amount(self.done)}, {elapsed:.0f} s"
        share = min(self.done / self.total, 1.0)
        left = elapsed * (1 - share) / share if share > 0 else None
        eta = "" if left is None else f", about {left:.0f} s left"
        if self._tty:
            filled = round(BAR_WIDTH * share)
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            return f"{self.what} [{bar}] {share:4.0%} {self._amount(self.done)}{eta}"
        of = f"{self._number(self.done)} of {self._amount(self.total)}"
        return f"{self.what}: {share:.0%}, {of}{eta}"

    def _amount(self, value: float) -> str:
        return f"{self._number(value)} {self.unit}".rstrip()

    @staticmethod
    def _number(value: float) -> str:
        return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"

    def _line(self, text: str) -> None:
        self._stream.write(text + "\n")
        self._stream.flush()
