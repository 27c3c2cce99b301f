"""The container image: `make image` builds it (offline, from a local Debian base made with
debootstrap: tests/container_setup.py) and the tests run it with the host's network on
127.0.0.1 and drive it: `make run`'s two curl lines are answered, SIGTERM (the engine's stop)
finishes the requests in flight, a read-only root with the data volume serves and reports
healthy, the engine's health check follows the database, three containers on one PostgreSQL
keep every acknowledged write once when one is killed mid-burst (tests/drill.py, as for
processes), and docs/DEPLOY.md's commands for three containers run as written.

Where Docker cannot run, the module skips with one line; under CI=true its tests fail instead.
The setup (as `make docker`: Debian's docker.io when root and missing, dockerd started) runs as
the module is collected.
"""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import psycopg
import pytest

import container_setup
import drill
import pg
import strictcall
from servers import create_token
from strictcall import Client
from strictcall.errors import FORBIDDEN_OR_MISSING
from strictcall.storage import open_store

ROOT: Final = Path(__file__).resolve().parent.parent
BUILD_TIMEOUT_S: Final = 900.0
START_DEADLINE_S: Final = 60.0
STOP_TIMEOUT_S: Final = 15
"""What docs/DEPLOY.md tells the engine to allow (the server's own bound is 10 s)."""
DEADLINE_S: Final = 30.0
DATA: Final = "/var/lib/strictcall"
VERSION: Final = str(strictcall.__version__)
_LISTENING: Final = re.compile(r"listening on (http://[0-9.]+:\d+)")


def _why_not() -> str | None:
    """Why the image cannot be built and run here, or None (Docker set up, as `make docker`)."""
    if sys.version_info[:2] != container_setup.BASE_PYTHON:
        return (
            f"the local base's python3 is {container_setup.BASE_PYTHON}, this Python is"
            f" {sys.version_info[:2]}: the wheels made here would not install there"
        )
    return container_setup.setup_docker()


WHY_NOT: Final = _why_not()
IN_CI: Final = os.environ.get("CI") == "true"
if WHY_NOT is not None and not IN_CI:  # one line for the module; in CI each test fails
    pytest.skip(f"container tests skipped: {WHY_NOT}", allow_module_level=True)


def docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run docker to completion; fails the test when it fails."""
    done = container_setup.docker(*args, timeout=timeout)
    assert done.returncode == 0, (args, done.stderr[-2000:])
    return done


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """The image, built by `make image` from the local base; removed after."""
    if WHY_NOT is not None:
        pytest.fail(f"CI requires the container tests: {WHY_NOT}", pytrace=False)
    base = container_setup.base_image()
    tag = "strictcall:test-" + secrets.token_hex(4)
    # -o: the virtualenv running these tests is the one to use, whatever its stamp's age
    make = ["make", "-o", ".venv/.installed", "image", f"BIN={Path(sys.executable).parent}"]
    done = subprocess.run(
        [*make, f"IMAGE={tag}", f"BASE={base}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    try:
        yield tag
    finally:
        container_setup.docker("rmi", "--force", tag)


@dataclass
class Container:
    """A started container: its name, base URL and what it printed."""

    name: str
    base_url: str
    lines: list[str]
    rest: queue.Queue[str | None] = field(repr=False)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal it, wait until it exits; its exit status, -N when signal N ended it (as a
        process's returncode)."""
        container_setup.docker("kill", "--signal", str(int(sig)), self.name)
        status = int(docker("wait", self.name, timeout=DEADLINE_S).stdout.strip())
        return 128 - status if status > 128 else status


@dataclass
class Engine:
    """The containers and volumes a test made; all removed after it."""

    image: str
    names: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    followers: list[subprocess.Popen[str]] = field(default_factory=list)

    def volume(self) -> str:
        name = "strictcall-test-" + secrets.token_hex(4)
        docker("volume", "create", name)
        self.volumes.append(name)
        return name

    def run(
        self,
        *command: str,
        volume: str | None = None,
        env: dict[str, str] | None = None,
        options: tuple[str, ...] = (),
    ) -> str:
        """`docker run --rm` the image with `command` to completion; its output."""
        mounts = ["--volume", f"{volume}:{DATA}"] if volume is not None else []
        settings = [f"--env={k}={v}" for k, v in (env or {}).items()]
        done = docker(
            "run",
            "--rm",
            "--network",
            "host",
            *mounts,
            *settings,
            *options,
            self.image,
            *command,
        )
        return done.stdout

    def start(
        self,
        *serve: str,
        volume: str | None = None,
        env: dict[str, str] | None = None,
        options: tuple[str, ...] = (),
        curls: int = 0,
    ) -> Container:
        """Start `strictcall serve *serve` on 127.0.0.1 (the host's network) and wait, with a
        deadline, until it listens (and has printed `curls` curl lines)."""
        name = "strictcall-test-" + secrets.token_hex(4)
        self.names.append(name)
        mounts = ["--volume", f"{volume}:{DATA}"] if volume is not None else []
        settings = [f"--env={k}={v}" for k, v in (env or {}).items()]
        docker(
            "run",
            "--detach",
            "--name",
            name,
            "--network",
            "host",
            *mounts,
            *settings,
            *options,
            self.image,
            "serve",
            "--host",
            "127.0.0.1",
            *serve,
        )
        logs = subprocess.Popen(
            ["docker", "logs", "--follow", name],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.followers.append(logs)
        assert logs.stdout is not None
        lines = _lines_of(logs.stdout)
        seen: list[str] = []
        base_url = None
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                break
            if line is None:
                break
            seen.append(line.rstrip("\n"))
            if (match := _LISTENING.search(line)) is not None:
                base_url = match.group(1)
            if base_url is not None and sum("curl" in s for s in seen) >= curls:
                return Container(name, base_url, seen, lines)
        raise AssertionError(f"container did not start: {seen!r}")

    def remove(self) -> None:
        for name in self.names:
            container_setup.docker("rm", "--force", "--volumes", name)
        for volume in self.volumes:
            container_setup.docker("volume", "rm", "--force", volume)
        for follower in self.followers:  # each ends with its container
            follower.wait(timeout=DEADLINE_S)


def _lines_of(stream: Any) -> queue.Queue[str | None]:
    """The stream's lines as they come, from a reader thread; None at the end."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        with stream:
            for line in stream:
                lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


@pytest.fixture
def engine(image: str) -> Iterator[Engine]:
    made = Engine(image)
    try:
        yield made
    finally:
        made.remove()


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_the_image_runs_as_its_own_user_with_labels_a_volume_and_no_secret(
    image: str, engine: Engine
) -> None:
    (config,) = json.loads(docker("image", "inspect", image).stdout)
    settings = config["Config"]
    env = dict(item.split("=", 1) for item in settings["Env"])
    assert settings["User"].split(":")[0] not in ("", "0", "root")
    assert engine.run("-u", options=("--entrypoint", "id")).strip() != "0"
    labels = settings["Labels"]
    assert labels["org.opencontainers.image.version"] == VERSION
    assert (
        labels["org.opencontainers.image.revision"]
        == subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    assert "org.opencontainers.image.source" in labels
    assert settings["StopSignal"] == "SIGTERM"
    assert settings["Healthcheck"]["Test"][0] == "CMD"
    assert env["STRICTCALL_HEALTH_URL"].endswith("/healthz")
    assert DATA in settings["Volumes"]
    assert env["STRICTCALL_DB"].startswith(DATA + "/")  # a file in the volume, never a URL
    assert not [k for k in env if any(s in k for s in ("PASSWORD", "SECRET", "TOKEN", "KEY"))]
    # nothing in the data directory: no store, so no token, comes with the image
    listed = engine.run("-A", DATA, options=("--entrypoint", "ls"))
    assert listed.strip() == ""
    assert engine.run("--version").strip().endswith(VERSION)
    assert config["Size"] < 300_000_000


def test_make_runs_two_curl_lines_are_answered_by_the_container(engine: Engine) -> None:
    server = engine.start("--port", "0", "--demo", volume=engine.volume(), curls=2)
    curls = [line.split("): ", 1)[1] for line in server.lines if line.startswith("try (")]
    assert len(curls) == 2
    answers = [
        json.loads(
            subprocess.run(
                ["sh", "-c", curl], capture_output=True, text=True, timeout=60, check=True
            ).stdout
        )
        for curl in curls
    ]
    mine, theirs = answers
    assert isinstance(mine["result"]["text"], str)
    assert theirs["error"]["data"]["code"] == FORBIDDEN_OR_MISSING.code
    assert server.stop() == 0


def test_a_read_only_root_with_the_volume_serves_reports_healthy_and_keeps_the_data(
    engine: Engine,
) -> None:
    volume = engine.volume()
    read_only = ("--read-only",)
    token = engine.run("tokens", "create", "--identity", "u1", volume=volume, options=read_only)
    token = token.strip().splitlines()[-1]
    port = free_port()
    server = engine.start(
        "--port",
        str(port),
        volume=volume,
        env={"STRICTCALL_HEALTH_URL": f"http://127.0.0.1:{port}/healthz"},
        options=(*read_only, "--health-interval", "1s", "--health-start-period", "1s"),
    )
    with Client(server.base_url, token) as client:
        note = client.call("create_note", {"text": "kept"})
    assert httpx.get(server.base_url + "/healthz", timeout=DEADLINE_S).status_code == 200

    wait_until(lambda: health(server) == "healthy", "the engine's health check passes")
    assert server.stop() == 0
    again = engine.start("--port", "0", volume=volume, options=read_only)
    with Client(again.base_url, token) as client:
        assert client.call("read_note", {"note_id": note["note_id"]})["text"] == "kept"
    assert again.stop() == 0


def health(container: Container) -> str:
    """The engine's health status of `container` (its HEALTHCHECK's verdict)."""
    inspected = docker("inspect", "--format", "{{.State.Health.Status}}", container.name)
    return inspected.stdout.strip()


def test_the_engines_health_check_follows_the_database(engine: Engine, pg_url: str) -> None:
    port = free_port()
    server = engine.start(
        "--port",
        str(port),
        env={"STRICTCALL_DB": pg_url, "STRICTCALL_HEALTH_URL": f"http://127.0.0.1:{port}/healthz"},
        options=("--health-interval", "1s", "--health-retries", "2"),
    )
    wait_until(lambda: health(server) == "healthy", "healthy while the database answers")
    pg.allow_connections(pg_url, False)  # the database is down, as far as the server can tell
    try:
        pg.terminate_backends(pg_url)
        wait_until(lambda: health(server) == "unhealthy", "unhealthy while it does not (503)")
    finally:
        pg.allow_connections(pg_url, True)
    wait_until(lambda: health(server) == "healthy", "healthy again once it answers")
    assert server.stop() == 0


def test_the_engines_stop_finishes_the_requests_in_flight(engine: Engine, pg_url: str) -> None:
    token = create_token(pg_url, "u1")
    server = engine.start("--port", "0", env={"STRICTCALL_DB": pg_url})
    answers: list[object] = []
    with psycopg.connect(pg_url) as holder:
        # the call's key is held by a transaction here: the server's write waits for it
        holder.execute("INSERT INTO idempotency VALUES ('u1', '\"held\"', 'fp', 'n-x', 0)")

        def call() -> None:
            with Client(server.base_url, token) as client:
                answers.append(client.call("create_note", {"text": "late"}, call_id="held"))

        caller = threading.Thread(target=call)
        caller.start()
        with psycopg.connect(pg_url, autocommit=True) as watcher:

            def waiting() -> bool:
                row = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                ).fetchone()
                return row is not None and row[0] > 0

            wait_until(waiting, "the write waits on the held key")
        started = time.monotonic()
        stop = subprocess.Popen(
            ["docker", "stop", "--time", str(STOP_TIMEOUT_S), server.name],
            stdout=subprocess.DEVNULL,
        )

        def refusing() -> bool:  # the server has stopped accepting: it got the engine's signal
            try:
                httpx.get(server.base_url + "/healthz", timeout=1)
            except httpx.TransportError:
                return True
            return False

        wait_until(refusing, "the server stops accepting")
        holder.rollback()  # the key is free: the write in flight goes on
    caller.join(DEADLINE_S)
    assert stop.wait(timeout=STOP_TIMEOUT_S + DEADLINE_S) == 0
    assert time.monotonic() - started < STOP_TIMEOUT_S  # stopped, not killed at the end
    status = docker("inspect", "--format", "{{.State.ExitCode}}", server.name).stdout
    assert status.strip() == "0"
    assert len(answers) == 1
    store = open_store(pg_url)
    try:
        assert store.list_notes("u1") == [(answers[0]["note_id"], "late")]  # type: ignore[index]
    finally:
        store.close()


def test_three_containers_on_one_postgresql_one_killed_mid_burst_keep_every_write_once(
    engine: Engine, pg_url: str
) -> None:
    token = create_token(pg_url, "u1")
    servers = [engine.start("--port", "0", env={"STRICTCALL_DB": pg_url}) for _ in range(3)]
    assert len({s.base_url for s in servers}) == 3  # distinct ports on the host's network
    drill.drive_kill_and_check(pg_url, token, servers)


def json_values(text: str) -> list[Any]:
    """The JSON objects in `text`, in order (curl's answers, printed one after another)."""
    decoder = json.JSONDecoder()
    found, at = [], 0
    while (at := text.find("{", at)) != -1:
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at += 1
            continue
        found.append(value)
        at = end
    return found


def test_deploy_md_runs_three_containers_on_one_postgresql_as_written(
    image: str, postgres: None
) -> None:
    text = (ROOT / "docs" / "DEPLOY.md").read_text()
    match = re.search(
        r"<!-- deploy-test: containers on one PostgreSQL -->\n```sh\n(.*?)```", text, re.DOTALL
    )
    assert match is not None
    script = match.group(1).replace("strictcall:0.1.0", image)  # this run's image
    assert "strictcall:" + VERSION in text  # the tag make image gives, as the page shows it
    database = "strictcall_test_" + secrets.token_hex(6)  # ours alone, as the drill's
    script = script.replace("strictcall_demo", database)
    ports = [free_port() for _ in range(3)]
    for shown, port in zip(("8801", "8802", "8803"), ports, strict=True):
        script = script.replace(shown, str(port))
    names = [f"strictcall-{port}" for port in ports]
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
    finally:
        for name in names:  # gone already, unless the script failed midway
            container_setup.docker("rm", "--force", name)
        subprocess.run(
            ["dropdb", "--if-exists", "--force", "-h", "127.0.0.1", "-U", "postgres", database],
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    values = json_values(done.stdout)
    created, listed = [v["result"] for v in values if "result" in v]
    assert created["text"] == "hello"
    assert listed == [created]  # written through the first container, listed by the third
    assert sum(v == {"status": "ok"} for v in values) == 3
