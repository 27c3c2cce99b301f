"""A real `promtool` for the metrics' and alert rules' tests: Debian's `prometheus` package,
installed with apt-get when it is missing and we are root (as in CI; `make promtool`). Where
none can be had, the tests skip with one line, except under CI=true, where they fail."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

import pytest

PROMTOOL: Final = Path("/usr/bin/promtool")
INSTALL_TIMEOUT_S: Final = 900


def install_promtool() -> str | None:
    """Install Debian's prometheus (for its promtool) if it is missing and we may; None when
    it is there now, else why it is not."""
    if PROMTOOL.exists() or shutil.which("promtool") is not None:
        return None
    if os.name != "posix" or os.geteuid() != 0:
        return "promtool is not installed and this user cannot install it (not root)"
    apt = shutil.which("apt-get")
    if apt is None:
        return "promtool is not installed and there is no apt-get to install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = None
    for command in (
        [apt, "install", "-y", "--no-install-recommends", "prometheus"],
        [apt, "update"],
        [apt, "install", "-y", "--no-install-recommends", "prometheus"],
    ):
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=env
        )
        if command[1] == "install" and done.returncode == 0 and PROMTOOL.exists():
            return None
    tail = "" if done is None else done.stderr.strip()[-300:]
    return f"apt-get could not install prometheus (promtool): {tail}"


def need_promtool() -> str:
    """promtool's path; skips the test (fails it under CI=true) when none can be had."""
    why = install_promtool()
    if why is None:
        return str(PROMTOOL) if PROMTOOL.exists() else str(shutil.which("promtool"))
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs promtool for the metrics' tests: {why}")
    pytest.skip(f"no promtool: {why}")


if __name__ == "__main__":  # `make promtool`
    reason = install_promtool()
    print(f"promtool: {PROMTOOL}" if reason is None else f"promtool: none ({reason})")
