"""Stdio upstreams reach nothing they were not given: a built environment (never the gateway's
variables), and bubblewrap's sandbox and the container engine's, each tried by a hostile
upstream of our own (tests/upstreams/hostile_upstream.py) and by the real npm
server-everything's get-env.

bwrap is Debian's `bubblewrap`, installed by apt-get when missing and we are root (as in CI), and
the engine is Debian's docker.io (`make docker`); where one cannot run, its tests skip, except
under CI=true, where they fail.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_peers import UPSTREAMS, everything_command, proxy_argv
from stdio_peer import StdioPeer
from strictcall.services.proxy.config import ConfigError, federation_config
from strictcall.services.proxy.instances import PerIdentity
from strictcall.services.proxy.spawn import (
    SANDBOX_ENV,
    Mount,
    SandboxUnavailable,
    Spawn,
    SpawnLimits,
    launch,
)
from test_federation import federate_argv, toml_text

HOSTILE = UPSTREAMS / "hostile_upstream.py"
SECRETS = {
    "PGPASSWORD": "pg-password-of-the-gateway",
    "STRICTCALL_DB": "postgresql://gateway:db-secret@127.0.0.1:5432/gateway",
    "STRICTCALL_UPSTREAM_CLIENT_SECRET": "oauth-client-secret-of-the-gateway",
}
OTHER_TOKEN = "token-of-the-other-upstream"
SANDBOXES = ("bwrap", "container")
"""The sandboxes the upstreams are tried in: bubblewrap and the container engine."""


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway's own secrets in its environment, as a deployment has them."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PASSED_ON", "passed-by-name")


def _text(result: dict[str, Any]) -> str:
    assert result.get("isError") is not True, result
    text: str = result["content"][0]["text"]
    if text.startswith('"'):  # a text result served as its JSON string
        text = json.loads(text)
    return text


def _seen(peer: StdioPeer, tool: str, **arguments: Any) -> Any:
    """What a hostile tool got: its {"ok", "detail"} answer."""
    return json.loads(_text(peer.call(tool, arguments)))


# --- item 1: the environment -------------------------------------------------------------------


@pytest.mark.parametrize("sandbox", ["none", *SANDBOXES])
def test_server_everythings_get_env_holds_none_of_the_gateways_secrets_through_federate(
    tmp_path: Path, secrets: None, sandbox: str, request: pytest.FixtureRequest
) -> None:
    if sandbox != "none":
        request.getfixturevalue(sandbox)  # its fixture: it runs here
    config = tmp_path / "federation.toml"
    config.write_text(
        "[upstreams.everything]\n"
        f"command = {toml_text(everything_command())}\n"
        f'sandbox = "{sandbox}"\n'
        'env_pass = ["PASSED_ON", "NOT_SET_ANYWHERE"]\n'
        "credentials.env = { OWN_TOKEN = 'its-own-token' }\n",
        encoding="utf-8",
    )
    stderr = tmp_path / "stderr"
    with stderr.open("wb") as errors:
        peer = StdioPeer(
            federate_argv(config, tmp_path / "db.sqlite3", "--stdio", "--identity", "u1"), errors
        )
        try:
            peer.initialize()
            seen = _text(peer.call("everything_get-env", {}))
        finally:
            assert peer.close() == 0
    env = json.loads(seen)
    for name, value in SECRETS.items():
        assert name not in env and value not in seen
    # its own credential is there (its value redacted on the way out, as every credential is)
    assert "OWN_TOKEN" in env and env["PASSED_ON"] == "passed-by-name"
    # the container engine names every container's host in HOSTNAME (its own, random)
    engines = {"HOSTNAME"} if sandbox == "container" else set()
    assert set(env) - {"PWD", "SHLVL", "_"} == {
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "OWN_TOKEN",
        "PASSED_ON",
        *engines,
    }
    assert Path(env["HOME"]) != Path.home()
    log = stderr.read_text(encoding="utf-8")
    line = next(line for line in log.splitlines() if f"sandbox {sandbox}" in line)
    assert "NOT_SET_ANYWHERE" in line and "PASSED_ON" not in line


def test_server_everythings_get_env_holds_none_of_the_gateways_secrets_through_proxy(
    tmp_path: Path, secrets: None
) -> None:
    argv = proxy_argv(everything_command(), tmp_path / "db.sqlite3", "--env-pass", "PASSED_ON")
    with (tmp_path / "stderr").open("wb") as errors:
        peer = StdioPeer(argv, errors)
        try:
            peer.initialize()
            seen = _text(peer.call("get-env", {}))
        finally:
            assert peer.close() == 0
    env = json.loads(seen)
    for name, value in SECRETS.items():
        assert name not in env and value not in seen
    assert env["PASSED_ON"] == "passed-by-name"


# --- item 2 and 4: the sandbox against a hostile upstream ---------------------------------------


class Hostile:
    """`strictcall federate` on stdio with two hostile upstreams in `sandbox`: `hostile` (no
    network, small limits) and `other` (its own token, network on), the hostile script beside
    the config and the store, so the tree the sandbox shows holds both."""

    def __init__(self, tmp: Path, sandbox: str) -> None:
        self.tmp = tmp
        self.sandbox = sandbox
        script = tmp / "hostile_upstream.py"
        shutil.copy(HOSTILE, script)
        command = toml_text(shlex.join([sys.executable, str(script)]))
        self.config = tmp / "federation.toml"
        self.db = tmp / "federation.sqlite3"
        self.config.write_text(
            f'[federation]\nsandbox = "{sandbox}"\n'
            f"[upstreams.hostile]\ncommand = {command}\nnetwork = false\n"
            "limits = { memory_mib = 512, processes = 32, cpu_s = 60 }\n"
            f"[upstreams.other]\ncommand = {command}\n"
            f"credentials.env = {{ OTHER_TOKEN = '{OTHER_TOKEN}' }}\n",
            encoding="utf-8",
        )
        self.stderr_path = tmp / "stderr"
        self._stderr = self.stderr_path.open("wb")
        argv = federate_argv(self.config, self.db, "--stdio", "--identity", "u1")
        self.peer = StdioPeer(argv, self._stderr)
        self.peer.initialize()

    def seen(self, tool: str, **arguments: Any) -> Any:
        return _seen(self.peer, f"hostile_{tool}", **arguments)

    def close(self) -> None:
        try:
            assert self.peer.close() == 0
        finally:
            self._stderr.close()


@pytest.fixture(scope="module", params=SANDBOXES)
def hostile(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Hostile]:
    request.getfixturevalue(request.param)  # the `bwrap` or `container` fixture: it runs here
    saved = {name: os.environ.get(name) for name in SECRETS}
    os.environ.update(SECRETS)
    try:
        running = Hostile(tmp_path_factory.mktemp("hostile"), request.param)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    yield running
    running.close()


def test_the_start_up_line_names_each_upstreams_sandbox_and_limits(hostile: Hostile) -> None:
    lines = hostile.stderr_path.read_text(encoding="utf-8").splitlines()
    sandboxed = [line for line in lines if f"sandbox {hostile.sandbox}" in line]
    assert len(sandboxed) == 2
    assert any("hostile" in line and "network off" in line for line in sandboxed)


def test_it_cannot_read_the_gateways_environment(hostile: Hostile) -> None:
    env = hostile.seen("environ")["detail"]
    assert not set(SECRETS) & set(env) and "OTHER_TOKEN" not in env


def test_it_cannot_read_the_store_or_the_config_beside_it(hostile: Hostile) -> None:
    assert hostile.config.read_text(encoding="utf-8").count(OTHER_TOKEN) == 1  # it is there
    for path in (hostile.config, hostile.db):
        seen = hostile.seen("read", path=str(path))
        assert not seen["ok"] or seen["detail"] == "", seen  # shown empty at most
    beside = hostile.tmp / "hostile_upstream.py"
    assert hostile.seen("read", path=str(beside))["ok"]  # in the same directory, not hidden


def test_it_cannot_see_another_upstreams_home_or_the_gateways(hostile: Hostile) -> None:
    other = _seen(hostile.peer, "other_environ")["detail"]
    assert "OTHER_TOKEN" in other  # its own (redacted on the way out)
    written = _seen(hostile.peer, "other_write", path=f"{other['HOME']}/secret")
    assert written["ok"]
    assert not hostile.seen("read", path=f"{other['HOME']}/secret")["ok"]
    assert not hostile.seen("list", path=other["HOME"])["ok"]
    # of the gateway's own home it sees at most the path to the interpreter bound in it
    shown = hostile.seen("list", path=str(Path.home()))
    on_the_way = set(Path(os.path.realpath(sys.executable)).parts)
    assert not shown["ok"] or set(shown["detail"]) <= on_the_way, shown


def test_it_may_write_only_in_its_own_home_and_tmp(hostile: Hostile) -> None:
    home = hostile.seen("environ")["detail"]["HOME"]
    assert hostile.seen("write", path=f"{home}/mine")["ok"]
    assert hostile.seen("write", path="/tmp/mine")["ok"]
    assert not (Path("/tmp") / "mine").exists()  # its /tmp is its own
    for outside in (hostile.tmp / "planted", Path("/usr/planted"), Path("/etc/planted")):
        assert not hostile.seen("write", path=str(outside))["ok"]
        assert not outside.exists()


def test_it_opens_no_socket_without_network_while_one_with_network_may(
    hostile: Hostile,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        assert not hostile.seen("connect", host="127.0.0.1", port=port)["ok"]
        # the same call from the upstream with network on connects: the test can fail
        assert _seen(hostile.peer, "other_connect", host="127.0.0.1", port=port)["ok"]


def test_it_sees_no_process_but_its_own(hostile: Hostile) -> None:
    processes = hostile.seen("processes")["detail"]
    assert processes and all("hostile_upstream.py" in line for line in processes), processes


def test_a_fork_bomb_is_stopped_at_its_process_limit(hostile: Hostile) -> None:
    seen = hostile.seen("fork", count=200)
    assert not seen["ok"] and seen["detail"]["forked"] < 32


def test_eating_memory_is_stopped_at_its_memory_limit(hostile: Hostile) -> None:
    seen = hostile.seen("memory", mib=1024)
    assert not seen["ok"] and seen["detail"]["held_mib"] < 512


def test_after_every_attack_the_gateway_serves_on(hostile: Hostile) -> None:
    assert hostile.seen("environ")["ok"] and _seen(hostile.peer, "other_environ")["ok"]
    assert hostile.peer.tool_names() >= {"hostile_read", "other_read"}


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_sandbox_that_cannot_run_answers_upstream_unavailable_and_says_why(
    sandbox: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap and no docker on this PATH
    monkeypatch.delenv(SANDBOX_ENV, raising=False)
    config = tmp_path / "federation.toml"
    config.write_text(
        f"[upstreams.boxed]\ncommand = {toml_text(shlex.join([sys.executable, str(HOSTILE)]))}\n"
        f'sandbox = "{sandbox}"\n'
        f"[upstreams.open]\ncommand = {toml_text(shlex.join([sys.executable, str(HOSTILE)]))}\n"
        'sandbox = "none"\n',
        encoding="utf-8",
    )
    argv = federate_argv(config, tmp_path / "db.sqlite3", "--stdio", "--identity", "u1")
    with (tmp_path / "stderr").open("wb") as errors:
        peer = StdioPeer(argv, errors)
        try:
            peer.initialize()
            assert _seen(peer, "open_environ")["ok"]
            assert "boxed_environ" not in peer.tool_names()
        finally:
            assert peer.close() == 0
    assert "sandbox cannot run" in (tmp_path / "stderr").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", ["/srv/a,type=bind,source=/", '/srv/a"b', "/srv/a\nb"])
def test_a_mount_the_container_engines_syntax_cannot_carry_is_refused_not_rewritten(
    container: None, path: str, tmp_path: Path
) -> None:
    # a comma would add options of its own to the engine's --mount (another source, say)
    spawn = Spawn(sandbox="container", mounts=(Mount(path),))
    with pytest.raises(SandboxUnavailable):
        launch([sys.executable, str(HOSTILE)], spawn, {}, str(tmp_path))


# --- the config's keys -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "upstream",
    [
        {"command": "x", "env_pass": "HOME"},
        {"command": "x", "env_pass": ["A=B"]},
        {"command": "x", "sandbox": "docker"},
        {"command": "x", "network": "no"},
        {"command": "x", "mounts": [{"path": "relative"}]},
        {"command": "x", "mounts": [{"path": "/srv", "writable": True}]},
        {"command": "x", "limits": {"memory": 1}},
        {"command": "x", "limits": {"processes": 0}},
        {"command": "x", "instances": "each"},
        {"command": "x", "max_instances": 0},
        {"command": "x", "idle": 0},
        {"url": "http://h/mcp", "sandbox": "bwrap"},
        {"url": "http://h/mcp", "instances": "per-identity"},
    ],
    ids=lambda upstream: ",".join(f"{k}={v}" for k, v in upstream.items()),
)
def test_each_sandbox_and_instance_key_is_checked(upstream: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        federation_config({"upstreams": {"a": upstream}})


def test_the_keys_given_are_what_the_upstream_runs_with() -> None:
    config = federation_config(
        {
            "federation": {"sandbox": "none", "homes": "/var/lib/homes"},
            "upstreams": {
                "a": {
                    "command": "x",
                    "env_pass": ["HTTPS_PROXY"],
                    "network": False,
                    "mounts": [{"path": "/srv", "read_only": False}],
                    "limits": {"memory_mib": 64},
                    "instances": "per-identity",
                    "max_instances": 3,
                    "idle": 9,
                },
                "b": {"command": "y", "sandbox": "bwrap"},
            },
        }
    )
    a, b = config.upstreams
    assert a.spec.spawn == Spawn(
        env_pass=("HTTPS_PROXY",),
        sandbox="none",
        network=False,
        mounts=(Mount("/srv", read_only=False),),
        limits=SpawnLimits(memory_mib=64),
        homes="/var/lib/homes",
    )
    assert a.per_identity == PerIdentity(max_instances=3, idle_s=9.0)
    assert b.spec.spawn.sandbox == "bwrap" and b.per_identity is None


def test_a_virtualenvs_script_is_shown_the_python_the_virtualenv_was_made_from(
    tmp_path: Path,
) -> None:
    from strictcall.services.proxy.spawn import _trees

    base = tmp_path / "pyenv" / "versions" / "3.11.7"  # a Python outside /usr, as pyenv's
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3").touch()
    venv = tmp_path / "servers"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\nversion = 3.11.7\n")
    script = venv / "bin" / "mcp-server-time"  # its `#!` names venv/bin/python, a link to base
    script.write_text(f"#!{venv / 'bin' / 'python'}\n")
    assert _trees([str(script)], "/usr/bin") == {str(venv), str(base)}
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")  # the system's Python: shown anyway
    assert _trees([str(script)], "/usr/bin") == {str(venv)}
