"""A real `promtool` for the metrics' and alert rules' tests: Debian's `prometheus` package,
installed with apt-get when it is missing and we are root (as in CI; `make promtool`). Where
none can be had, the tests skip with one line, except under CI=true, where they fail."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import pytest

from debian import install_package

PROMTOOL: Final = Path("/usr/bin/promtool")


def install_promtool() -> str | None:
    """Install Debian's prometheus (for its promtool) if it is missing and we may; None when
    it is there now, else why it is not."""
    return install_package("prometheus", PROMTOOL)


def need_promtool() -> str:
    """promtool's path; skips the test (fails it under CI=true) when none can be had."""
    why = install_promtool()
    if why is None:
        return str(PROMTOOL)
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs promtool for the metrics' tests: {why}")
    pytest.skip(f"no promtool: {why}")


if __name__ == "__main__":  # `make promtool`
    reason = install_promtool()
    print(f"promtool: {PROMTOOL}" if reason is None else f"promtool: none ({reason})")
