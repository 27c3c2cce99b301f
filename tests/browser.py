"""A real headless Chromium for the page's tests: Debian's `chromium` package, installed with
apt-get when it is missing and we are root (as in CI), driven by Playwright for Python with
that executable (Playwright's own browser download is never used). Where none can be had, the
tests skip with the reason, except under CI=true, where they fail."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import pytest

from debian import install_package

CHROMIUM: Final = Path("/usr/bin/chromium")
LAUNCH_ARGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
ARTIFACTS: Final = Path(__file__).resolve().parent / "artifacts"
"""Screenshots the tests keep (ignored by git)."""


def install_chromium() -> str | None:
    """Install Debian's chromium if it is missing and we may; None when it is there now, else
    why it is not."""
    return install_package("chromium", CHROMIUM)


def need_chromium() -> Path:
    """Chromium's path; skips the test (fails it under CI=true) when none can be had."""
    why = install_chromium()
    if why is None:
        return CHROMIUM
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs a browser for the page's tests: {why}")
    pytest.skip(f"no browser for the page's tests: {why}")


if __name__ == "__main__":  # `make browser`
    reason = install_chromium()
    print(f"chromium: {CHROMIUM}" if reason is None else f"chromium: none ({reason})")
