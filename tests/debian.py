"""Debian packages the tests need (chromium for the page, prometheus for promtool), installed
with apt-get when missing and we are root (as in CI); never Playwright's or another download."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

INSTALL_TIMEOUT_S: Final = 900


def install_package(package: str, installs: Path) -> str | None:
    """Install Debian's `package`, which provides `installs`, if that is missing and we may;
    None when it is there now, else why it is not."""
    if installs.exists():
        return None
    if os.name != "posix" or os.geteuid() != 0:
        return f"{installs.name} is not installed and this user cannot install it (not root)"
    apt = shutil.which("apt-get")
    if apt is None:
        return f"{installs.name} is not installed and there is no apt-get to install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt, "install", "-y", "--no-install-recommends", package]
    stderr = ""
    for command in (install, [apt, "update"], install):
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=env
        )
        stderr = done.stderr
        if command is install and done.returncode == 0 and installs.exists():
            return None
    return f"apt-get could not install {package}: {stderr.strip()[-300:]}"
