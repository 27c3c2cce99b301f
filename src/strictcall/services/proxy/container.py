"""The container sandbox of a stdio upstream (`sandbox = "container"`): the container engine the
image is built with (Docker), running the upstream in an empty image with the same view as
bubblewrap's, bound in read-only: the system's directories, the program's own trees, the files
of /etc the sandbox shows; its home the only place it may write besides its `mounts`, a /tmp of
its own, the gateway's files shown empty. It runs as the gateway's own user with every
capability dropped and no way to gain one, in namespaces of its own (PID, IPC, UTS, mount), on
the host's network or on none (`network = false`), its processes counted by the container's
cgroup and its address space, CPU time and open files bounded by rlimits set inside it.

The engine's command line holds no value of the upstream's environment: each variable is named
(`--env NAME`), and the engine reads its value from its own environment.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import anyio

from strictcall.core.ids import mint_call_id

ENGINE: Final = "docker"
"""The container engine's command."""
IMAGE: Final = "strictcall-sandbox:empty"
"""The image an upstream's container starts from: no file at all (everything it sees is bound
in), made locally on first use; no registry is asked."""
PROBE_S: Final = 30.0
"""How long the engine has to answer, and to make the empty image, the first time."""
REMOVE_S: Final = 10.0
"""How long a stopped upstream's container has to be removed."""
ENGINE_ENV: Final = ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH")
"""The gateway's variables the engine's own command is given (never the upstream)."""
NAME_PREFIX: Final = "strictcall-upstream"
ENGINE_MANAGED: Final = frozenset({"hosts", "hostname", "resolv.conf"})
"""Files of /etc the engine writes into every container itself (the host's, on its network)."""


@functools.cache
def container_works() -> str | None:
    """Why the container sandbox cannot run here (None: it can): the engine's command is
    missing or its daemon does not answer, or the empty image could not be made."""
    engine = shutil.which(ENGINE)
    if engine is None:
        return "the container engine (docker) is not installed"
    try:
        answered = subprocess.run(
            [engine, "image", "inspect", IMAGE], capture_output=True, timeout=PROBE_S, check=False
        )
        if answered.returncode == 0:
            return None
        version = subprocess.run(
            [engine, "version"], capture_output=True, timeout=PROBE_S, check=False
        )
        if version.returncode != 0:
            return "the container engine's daemon does not answer"
        made = subprocess.run(
            [engine, "image", "import", "-", IMAGE],
            input=_empty_tar(),
            capture_output=True,
            timeout=PROBE_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "the container engine does not answer"
    if made.returncode != 0:
        return "the container engine could not make the sandbox's empty image"
    return None


def _empty_tar() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w"):
        pass
    return buffer.getvalue()


def new_name() -> str:
    """A name for one run's container, so that it can be removed whatever ended it."""
    return mint_call_id(NAME_PREFIX)


def container_words(
    command: Sequence[str],
    *,
    name: str,
    binds: Iterable[tuple[str, str, bool]],
    env_names: Iterable[str],
    workdir: str,
    network: bool,
    processes: int,
    memory_mib: int,
    rlimits: Sequence[str],
) -> list[str]:
    """The engine's command running `command` in its container: `binds` are (source, target,
    read-only), `rlimits` the words that set its limits before it runs (prlimit's).

    Raises:
        ValueError: a path the engine's mount syntax cannot carry (a comma or a quote).
    """
    engine = shutil.which(ENGINE) or ENGINE
    words = [engine, "run", "--rm", "--interactive", "--name", name, "--log-driver", "none"]
    words += ["--user", f"{os.getuid()}:{os.getgid()}", "--cap-drop", "ALL"]
    words += ["--security-opt", "no-new-privileges", "--read-only"]
    words += ["--network", "host" if network else "none", "--ipc", "private"]
    words += ["--pids-limit", str(processes), "--memory", f"{memory_mib}m"]
    words += ["--tmpfs", "/tmp:rw,nosuid,nodev,mode=1777", "--workdir", workdir]
    for source, target, read_only in binds:
        for path in (source, target):
            if any(c in path for c in ',"\n'):
                raise ValueError("a path with a comma or a quote cannot be shown in a container")
        mount = f"type=bind,source={source},target={target}"
        words += ["--mount", mount + (",readonly" if read_only else "")]
    for variable in env_names:
        words += ["--env", variable]
    return [*words, IMAGE, *rlimits, *command]


def engine_environment(child: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The engine command's environment: the upstream's (each value read by `--env NAME`), and
    the gateway's variables that say where the engine is."""
    return {**child, **{k: environ[k] for k in ENGINE_ENV if k in environ}}


async def remove_container(name: str) -> None:
    """Remove one run's container if it is still there (its process stopped, or the engine's
    command was killed before it could)."""
    engine = shutil.which(ENGINE)
    if engine is None:
        return
    with anyio.move_on_after(REMOVE_S), contextlib.suppress(OSError):
        await anyio.run_process(
            [engine, "rm", "--force", name],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
