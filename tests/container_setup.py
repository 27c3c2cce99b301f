"""Docker for the container image's tests: Debian's `docker.io` (and `debootstrap`), installed
with apt-get when missing and we are root (as in CI), its daemon started when none answers
(`dockerd --bridge=none --iptables=false`: the containers use the host's network, so the daemon
needs no bridge or firewall rules of its own), and a local Debian base image with Debian's
python3, made with debootstrap: no image registry is reachable here.

The base is keyed by its recipe and kept between runs: as an image in the daemon and as a tar
file under ~/.cache/strictcall (or $XDG_CACHE_HOME/strictcall), from which a new daemon
imports it in seconds instead of running debootstrap again (a few minutes).

Where Docker cannot run, the tests skip with the reason, except under CI=true, where they fail.
Run as a script (`make docker`), it does the same setup and prints one line.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

INSTALL_TIMEOUT_S: Final = 900
DAEMON_DEADLINE_S: Final = 60.0
DEBOOTSTRAP_TIMEOUT_S: Final = 1200
PACKAGES: Final = ("docker.io", "debootstrap")
DAEMON_LOG: Final = Path("/var/log/strictcall-dockerd.log")

SUITE: Final = "bookworm"
"""Debian 12, whose python3 is 3.11: the Python the wheels are built for (CI's)."""
BASE_PYTHON: Final = (3, 11)
BASE_INCLUDE: Final = ("python3", "python3-venv", "ca-certificates")
BASE_PRUNE: Final = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
)
"""Left out of the base (emptied): debootstrap's downloaded packages and what no server reads."""


def recipe() -> str:
    """What the base is made from, as text; its hash names the base."""
    return "\n".join(
        [
            "debootstrap --variant=minbase",
            "suite " + SUITE,
            "include " + ",".join(BASE_INCLUDE),
            "prune " + ",".join(BASE_PRUNE),
        ]
    )


def base_tag() -> str:
    """The local base image's name, keyed by its recipe."""
    return "strictcall-base:" + SUITE + "-" + hashlib.sha256(recipe().encode()).hexdigest()[:12]


def cache_dir() -> Path:
    """Where the base's tar file is kept between runs."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "strictcall"


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the docker command line to completion."""
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def daemon_answers() -> bool:
    """Whether a Docker daemon answers the docker command line."""
    if shutil.which("docker") is None:
        return False
    try:
        return docker("info", "--format", "{{.ServerVersion}}", timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def install_packages() -> str | None:
    """Install docker.io and debootstrap where missing and we may; None when they are there."""
    missing = [
        p
        for p, exe in zip(PACKAGES, ("dockerd", "debootstrap"), strict=True)
        if shutil.which(exe, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None
    ]
    if not missing:
        return None
    if os.geteuid() != 0:
        return f"{', '.join(missing)} not installed and this user cannot install them (not root)"
    apt = shutil.which("apt-get")
    if apt is None:
        return f"{', '.join(missing)} not installed and there is no apt-get to install them"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt, "install", "-y", "-qq", "--no-install-recommends", *missing]
    done = None
    for command in (install, [apt, "update", "-qq"], install):
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=env
        )
        if command is install and done.returncode == 0:
            return None
    assert done is not None
    return f"apt-get could not install {' '.join(missing)}: {done.stderr.strip()[-300:]}"


def start_daemon() -> str | None:
    """Start dockerd in the background unless one answers; None once one answers."""
    if daemon_answers():
        return None
    dockerd = shutil.which("dockerd", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if dockerd is None:
        return "no dockerd"
    if os.geteuid() != 0:
        return "no Docker daemon answers and this user cannot start one (not root)"
    with DAEMON_LOG.open("ab") as log:
        subprocess.Popen(
            [dockerd, "--bridge=none", "--iptables=false"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # it outlives this process, as a service would
        )
    deadline = time.monotonic() + DAEMON_DEADLINE_S
    while time.monotonic() < deadline:
        if daemon_answers():
            return None
        time.sleep(0.2)
    return f"dockerd did not answer within {DAEMON_DEADLINE_S:g} s (its log: {DAEMON_LOG})"


def setup_docker() -> str | None:
    """Docker installed and its daemon answering; None when so, else why not."""
    if os.name != "posix" or sys.platform != "linux":
        return "the container tests run on Linux"
    return install_packages() or start_daemon()


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (two test runs make the base once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def base_image() -> str:
    """The local base image's tag: in the daemon already, imported from the cached tar file,
    or made with debootstrap (then cached).

    Raises:
        RuntimeError: debootstrap or the import failed.
    """
    tag = base_tag()
    if docker("image", "inspect", tag).returncode == 0:
        return tag
    cached = cache_dir() / (tag.replace(":", "-") + ".tar")
    with _locked(cached.with_suffix(".lock")):
        if docker("image", "inspect", tag).returncode == 0:
            return tag
        if not cached.exists():
            _debootstrap(cached)
        done = docker("import", str(cached), tag, timeout=600)
        if done.returncode != 0:
            raise RuntimeError("docker import failed: " + done.stderr.strip()[-300:])
    return tag


def _debootstrap(tar_file: Path) -> None:
    """Make the base's root file system with debootstrap, pruned, into `tar_file`."""
    with tempfile.TemporaryDirectory(prefix="strictcall-base-") as work:
        root = Path(work) / "root"
        done = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=" + ",".join(BASE_INCLUDE),
                SUITE,
                str(root),
            ],
            capture_output=True,
            text=True,
            timeout=DEBOOTSTRAP_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError("debootstrap failed: " + (done.stdout + done.stderr)[-500:])
        for part in BASE_PRUNE:
            for child in (root / part).glob("*"):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        partial = tar_file.with_suffix(".partial")
        subprocess.run(
            ["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."],
            check=True,
            timeout=600,
        )
        partial.replace(tar_file)  # whole or not at all: an interrupted run leaves no tar


def base_missing(base: str) -> str | None:
    """Why `make image` cannot build on `base` (None: it can): no daemon answers, or the base
    is neither here nor pulled (no registry answers); the message names the local base this
    file makes and the command that builds on it, never docker's raw resolver error."""
    if docker("info").returncode != 0:
        return "no docker daemon answers: `make docker` starts one (as root), then `make image`"
    if docker("image", "inspect", base).returncode == 0:
        return None
    if docker("pull", "--quiet", base, timeout=300).returncode == 0:
        return None
    local = base_tag()
    here = docker("image", "inspect", local).returncode == 0
    made = (
        "it is here"
        if here
        else "make it first, with debootstrap from Debian's apt:"
        " python tests/container_setup.py --make-base"
    )
    return (
        f"the base image {base} is not here and no registry answers; build on the local Debian"
        f" base instead: make image BASE={local} ({made})"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check-base"]:  # `make image`, before it builds
        missing = base_missing(sys.argv[2])
        if missing is not None:
            print(f"strictcall: {missing}", file=sys.stderr)
            raise SystemExit(1)
        raise SystemExit(0)
    if sys.argv[1:2] == ["--make-base"]:
        print(base_image())
        raise SystemExit(0)
    reason = setup_docker()  # `make docker`
    print("docker: " + ("the daemon answers" if reason is None else f"none ({reason})"))
