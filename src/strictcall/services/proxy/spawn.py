"""How a stdio upstream starts: the environment it gets, the sandbox it runs in, its limits.

The environment is built, never inherited: PATH, LANG, a HOME of its own, the variables its
config passes by name (`env_pass`) and its own credentials (`credentials.env`); none of the
gateway's own (its database URL, its passwords, its OAuth client's secret).

The sandbox is bubblewrap's (`bwrap`), when the machine has it and the config does not choose
`none`: the system's directories read-only, the program's own tree read-only (its
`node_modules` root, its virtualenv, its interpreter's prefix), an empty /tmp, its home the only
place it may write besides its `mounts`; new user, PID, IPC, UTS and cgroup namespaces (it sees
no other process, the gateway's included) and, with `network = false`, a network namespace
with nothing in it. Files the gateway holds (the store, the config, the policy) are shown empty
wherever a bound tree would show them. Limits are rlimits set by util-linux `prlimit` before
bwrap runs: address space, processes (counted per user: a gateway run as root runs its
sandboxed upstreams as `nobody`), CPU seconds, open files. `sandbox = "container"` shows the same
view through the container engine instead (`strictcall.services.proxy.container`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import anyio

from strictcall.errors import StrictcallError
from strictcall.services.proxy.container import (
    ENGINE_MANAGED,
    container_words,
    container_works,
    engine_environment,
    new_name,
    remove_container,
)

SANDBOXES: Final = ("none", "bwrap", "container")
"""The sandboxes a stdio upstream may run in, weakest first."""
SANDBOX_ENV: Final = "STRICTCALL_SANDBOX"
"""The gateway's variable naming the sandbox of upstreams whose config names none."""

NOBODY: Final = 65534
"""The user a sandboxed upstream is inside its user namespace (with no capabilities)."""
RELEASE_S: Final = 5.0
"""How long what is left of a stopped upstream's processes has to be gone."""
PIDS_CGROUPS: Final = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")
"""Where a `pids` cgroup may be made: cgroup v1's controller, or v2's root."""

DEFAULT_MEMORY_MIB: Final = 2048
DEFAULT_PROCESSES: Final = 256
DEFAULT_CPU_S: Final = 3600
DEFAULT_FILES: Final = 1024
DEFAULT_LANG: Final = "C.UTF-8"
DEFAULT_PATH: Final = "/usr/local/bin:/usr/bin:/bin"

_SYSTEM: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")
"""Directories the sandbox shows read-only as they are (or as the links they are)."""
_ETC: Final = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "gai.conf",
    "group",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "protocols",
    "resolv.conf",
    "services",
    "ssl",
    "timezone",
)
"""What of /etc the sandbox shows: name resolution, certificates, the loader, users' names
(never the whole of /etc: a gateway's config may be there)."""


@dataclass(frozen=True, slots=True)
class Mount:
    """A path of the machine an upstream is shown (server-filesystem's root, a repository)."""

    path: str
    read_only: bool = True


@dataclass(frozen=True, slots=True)
class SpawnLimits:
    """What a sandboxed upstream may use: address space, processes, CPU seconds, open files."""

    memory_mib: int = DEFAULT_MEMORY_MIB
    processes: int = DEFAULT_PROCESSES
    cpu_s: int = DEFAULT_CPU_S
    files: int = DEFAULT_FILES


@dataclass(frozen=True, slots=True)
class Spawn:
    """How a stdio upstream is started: what of the gateway's environment it is passed by name,
    its sandbox (None: the strongest the machine has), its network, paths and limits."""

    env_pass: tuple[str, ...] = ()
    sandbox: str | None = None
    network: bool = True
    mounts: tuple[Mount, ...] = ()
    limits: SpawnLimits = field(default_factory=SpawnLimits)
    homes: str | None = None
    """Where its home is kept (a directory per upstream, and per identity); None: a private
    temporary directory, removed when the gateway stops."""
    hidden: tuple[str, ...] = ()
    """Files of the gateway's (the store, the config, the policy) it must never read."""


@dataclass(frozen=True, slots=True)
class Launch:
    """A stdio upstream as it is run: its words, its environment, the cgroup that counts its
    processes (removed once it has stopped), and the line the log says about it."""

    command: tuple[str, ...]
    env: Mapping[str, str]
    cgroup: str | None
    described: str
    container: str | None = None
    """The name of its container (`sandbox = "container"`), removed once it has stopped."""


class SandboxUnavailable(StrictcallError, OSError):
    """The sandbox an upstream's config names cannot run on this machine."""


@functools.cache
def bwrap_works() -> bool:
    """Whether bubblewrap is installed and can make its namespaces here (tried once)."""
    program = shutil.which("bwrap")
    if program is None:
        return False
    probe = [program, "--ro-bind", "/", "/", "--unshare-all", "--", "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def strongest_sandbox() -> str:
    """The strongest sandbox this machine has."""
    return "bwrap" if bwrap_works() else "none"


def sandbox_of(spawn: Spawn, environ: Mapping[str, str] = os.environ) -> str | None:
    """The sandbox `spawn` runs in: the one it names, else the one `STRICTCALL_SANDBOX` names;
    None: neither names one (the strongest there is).

    Raises:
        SandboxUnavailable: `STRICTCALL_SANDBOX` names no sandbox.
    """
    if spawn.sandbox is not None:
        return spawn.sandbox
    named = environ.get(SANDBOX_ENV)
    if named is None:
        return None
    if named not in SANDBOXES:
        raise SandboxUnavailable(f"${SANDBOX_ENV} is one of {', '.join(SANDBOXES)}")
    return named


def child_environment(
    spawn: Spawn, credentials: Mapping[str, str], home: str, environ: Mapping[str, str]
) -> tuple[dict[str, str], tuple[str, ...]]:
    """An upstream's environment, and the `env_pass` names the gateway's environment lacks
    (a credential's value written `~/...` is a path in its own home)."""
    env = {
        "PATH": environ.get("PATH", DEFAULT_PATH),
        "HOME": home,
        "LANG": environ.get("LANG", DEFAULT_LANG),
        "TMPDIR": "/tmp",
    }
    missing = []
    for name in spawn.env_pass:
        value = environ.get(name)
        if value is None:
            missing.append(name)
        else:
            env[name] = value
    # a value written "~/..." is in the upstream's own home (a per-identity instance's own)
    env.update(
        {
            key: home + value[1:] if value.startswith("~/") else value
            for key, value in credentials.items()
        }
    )
    return env, tuple(missing)


def make_home(base: str, name: str, identity: str | None) -> str:
    """The home of upstream `name` (of one identity's instance), made private if new."""
    parts = [name] if identity is None else [name, _digest(identity)]
    home = Path(base, *parts)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    return str(home)


def temporary_homes() -> str:
    """A private directory for the homes of one gateway's upstreams."""
    return tempfile.mkdtemp(prefix="strictcall-homes-")


def launch(
    command: Sequence[str],
    spawn: Spawn,
    credentials: Mapping[str, str],
    home: str,
    environ: Mapping[str, str] = os.environ,
) -> Launch:
    """How `command` is run: in its sandbox, with its own environment.

    Raises:
        SandboxUnavailable: the sandbox it names cannot run here.
    """
    env, missing = child_environment(spawn, credentials, home, environ)
    unset = f"; not in the gateway's environment: {', '.join(missing)}" if missing else ""
    sandbox = sandbox_of(spawn, environ)
    if sandbox is None and not bwrap_works():
        why = "no sandbox on this machine: install bubblewrap, or choose sandbox none"
        return Launch(tuple(command), env, None, f"sandbox none ({why}){unset}")
    if sandbox == "none":
        return Launch(tuple(command), env, None, f"sandbox none (chosen by name){unset}")
    if sandbox == "container":
        return _in_container(command, spawn, env, home, environ, unset)
    if not bwrap_works():
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed or cannot run here")
    limits = spawn.limits
    cgroup = _pids_cgroup(limits.processes)
    try:
        words = _limits(limits, cgroup) + _bwrap(command, spawn, env, home)
    except BaseException:  # nothing will run in it: no empty cgroup is left behind
        if cgroup is not None:
            with contextlib.suppress(OSError):
                os.rmdir(cgroup)
        raise
    counted = "a pids cgroup" if cgroup is not None else "the rlimit, per user"
    return Launch(tuple(words), env, cgroup, _described("bwrap", spawn, counted) + unset)


async def release(launch: Launch) -> None:
    """Once its process has stopped: remove its container, or kill what is left in its cgroup
    and remove the cgroup."""
    if launch.container is not None:
        await remove_container(launch.container)
    cgroup = launch.cgroup
    if cgroup is None:
        return
    with anyio.move_on_after(RELEASE_S):
        while True:
            try:
                left = Path(cgroup, "cgroup.procs").read_text().split()
            except OSError:
                return  # gone already
            if not left:
                try:
                    os.rmdir(cgroup)
                    return
                except FileNotFoundError:
                    return
                except OSError as failure:
                    # the kernel holds a cgroup busy for a moment after its last process has
                    # left the listing (exiting, or a zombie not yet reaped): try again
                    if failure.errno not in (errno.EBUSY, errno.ENOTEMPTY):
                        return
            for pid in left:
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            await anyio.sleep(0.02)


def _pids_cgroup(processes: int) -> str | None:
    """A new `pids` cgroup allowing `processes`, where the gateway may make one."""
    for root in PIDS_CGROUPS:
        controllers = Path(root, "cgroup.controllers")
        if root.endswith("/cgroup") and not (
            controllers.is_file() and "pids" in controllers.read_text().split()
        ):
            continue
        if not os.access(root, os.W_OK) or not Path(root, "cgroup.procs").exists():
            continue
        try:
            made = tempfile.mkdtemp(prefix="strictcall-", dir=root)
            Path(made, "pids.max").write_text(f"{processes}\n")
        except OSError:
            continue
        return made
    return None


def _in_container(
    command: Sequence[str],
    spawn: Spawn,
    env: Mapping[str, str],
    home: str,
    environ: Mapping[str, str],
    unset: str,
) -> Launch:
    """`command` in a container of its own (`strictcall.services.proxy.container`), shown what
    bubblewrap would show it."""
    why = container_works()
    if why is not None:
        raise SandboxUnavailable(why)
    limits = spawn.limits
    view = _view(command, spawn, env, home)
    binds = [(system, system, True) for system in _SYSTEM if os.path.isdir(system)]
    etc = [name for name in _ETC if name not in ENGINE_MANAGED and os.path.exists(f"/etc/{name}")]
    binds += [(f"/etc/{name}", f"/etc/{name}", True) for name in etc]
    binds += [(tree, tree, True) for tree in view.trees]
    binds += [(os.path.abspath(m.path), os.path.abspath(m.path), m.read_only) for m in spawn.mounts]
    binds += [(home, home, False)]
    binds += [("/dev/null", hidden, True) for hidden in view.hidden]
    name = new_name()
    try:
        words = container_words(
            view.command,
            name=name,
            binds=binds,
            env_names=sorted(env),
            workdir=view.workdir,
            network=spawn.network,
            processes=limits.processes,
            memory_mib=limits.memory_mib,
            rlimits=_limits(limits, cgroup=None, per_user=False),
        )
    except ValueError as exc:
        raise SandboxUnavailable(str(exc)) from None
    described = _described("container", spawn, "its cgroup") + unset
    return Launch(tuple(words), engine_environment(env, environ), None, described, name)


def _described(sandbox: str, spawn: Spawn, counted: str) -> str:
    """The start-up line's words for an upstream in `sandbox`, its processes `counted` so."""
    limits = spawn.limits
    return (
        f"sandbox {sandbox} (network {'on' if spawn.network else 'off'};"
        f" limits: {limits.memory_mib} MiB address space, {limits.cpu_s} s CPU,"
        f" {limits.files} files by rlimits, {limits.processes} processes by {counted})"
    )


def _limits(limits: SpawnLimits, cgroup: str | None, *, per_user: bool = True) -> list[str]:
    program = shutil.which("prlimit")
    if program is None:
        raise SandboxUnavailable("util-linux prlimit is not installed: no limits can be set")
    words = [
        program,
        f"--as={limits.memory_mib * 1024 * 1024}",
        f"--cpu={limits.cpu_s}",
        f"--nofile={limits.files}",
    ]
    if cgroup is None and per_user:
        words.append(f"--nproc={limits.processes}")
    words.append("--")
    if cgroup is not None:  # it joins its cgroup before it runs anything of the upstream's
        procs = os.path.join(cgroup, "cgroup.procs")
        words += ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', procs]
    return words


def _bwrap(command: Sequence[str], spawn: Spawn, env: Mapping[str, str], home: str) -> list[str]:
    words = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session"]
    words += ["--unshare-all", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    if spawn.network:
        words.append("--share-net")
    for system in _SYSTEM:
        if os.path.islink(system):
            words += ["--symlink", os.readlink(system), system]
        elif os.path.isdir(system):
            words += ["--ro-bind", system, system]
    for name in _ETC:
        words += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    words += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    view = _view(command, spawn, env, home)
    for tree in view.trees:
        words += ["--ro-bind", tree, tree]
    for mount in spawn.mounts:
        path = os.path.abspath(mount.path)
        words += ["--ro-bind" if mount.read_only else "--bind", path, path]
    words += ["--bind", home, home, "--chdir", view.workdir]
    for hidden in view.hidden:
        words += ["--ro-bind", "/dev/null", hidden]
    words += ["--remount-ro", "/"]  # the root bwrap made: no write outside home and /tmp
    return [*words, "--", *view.command]


@dataclass(frozen=True, slots=True)
class _View:
    """What a sandbox shows an upstream beside the system: the program's trees, and the
    gateway's files within those trees or the mounts (shown empty); where it starts, and the
    command it runs."""

    trees: tuple[str, ...]
    hidden: tuple[str, ...]
    workdir: str
    """The gateway's directory when a tree or a mount shows it, else the upstream's home."""
    command: tuple[str, ...]
    """The paths the command names made absolute (a relative one is the gateway's, wherever
    the sandbox starts it)."""


def _view(command: Sequence[str], spawn: Spawn, env: Mapping[str, str], home: str) -> _View:
    """What a sandbox shows `command` (`_View`)."""
    trees = sorted(_trees(command, env.get("PATH", DEFAULT_PATH)))
    shown = [*trees, *(os.path.abspath(mount.path) for mount in spawn.mounts)]

    def within(path: str) -> bool:
        return any(path == tree or path.startswith(tree.rstrip("/") + "/") for tree in shown)

    cwd = os.getcwd()
    hidden = tuple(path for path in _hidden_files(spawn.hidden) if within(path))
    named = [
        os.path.abspath(w) if w and not w.startswith("-") and os.path.exists(w) else w
        for w in command[1:]
    ]
    return _View(tuple(trees), hidden, cwd if within(cwd) else home, (command[0], *named))


def _trees(command: Sequence[str], path: str) -> set[str]:
    """The directories the program and the files its words name live in (outside the system's
    own): the root of a `node_modules`, a virtualenv, an interpreter's prefix, or the file's
    own directory."""
    found: set[str] = set()
    first = command[0] if os.sep in command[0] else shutil.which(command[0], path=path)
    for word in [first, *command[1:]]:
        if not word or not os.path.exists(word):
            continue
        for seen in {os.path.abspath(word), os.path.realpath(word)}:
            tree = _tree_of(seen)
            for shown in (tree, _base_interpreter(tree)):
                if shown and not any(shown == s or shown.startswith(s + "/") for s in _SYSTEM):
                    found.add(shown)
    return _outermost(found)


def _base_interpreter(tree: str) -> str | None:
    """The prefix of the Python a virtualenv was made from (its `pyvenv.cfg` `home`), which a
    script of the virtualenv runs on (its `#!` names the virtualenv's `python`, a link to it)."""
    try:
        lines = (Path(tree) / "pyvenv.cfg").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return _tree_of(os.path.realpath(os.path.join(value.strip(), "python3")))
    return None


def _tree_of(path: str) -> str:
    here = Path(path)
    parents = [here, *here.parents] if here.is_dir() else list(here.parents)
    outer = [p for p in parents if p.name == "node_modules"]
    if outer:
        return str(outer[-1].parent)
    for parent in parents:
        if (parent / "pyvenv.cfg").is_file():
            return str(parent)
    start = parents[0]
    if start.name == "bin" and start.parent != start:
        return str(start.parent)
    return str(start)


def _outermost(trees: set[str]) -> set[str]:
    return {t for t in trees if not any(t != o and t.startswith(o + "/") for o in trees)}


def _hidden_files(paths: Sequence[str]) -> list[str]:
    """The gateway's files and their SQLite companions, where they exist."""
    found = []
    for path in paths:
        full = os.path.abspath(path)
        for name in (full, full + "-wal", full + "-shm", full + "-journal"):
            if os.path.isfile(name):
                found.append(name)
    return found


def _digest(identity: str) -> str:
    return hashlib.sha256(identity.encode()).hexdigest()[:24]
