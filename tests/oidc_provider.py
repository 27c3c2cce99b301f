"""A real OpenID provider for the tests: `oidc-provider` (npm, the certified Node.js
implementation) run by tests/oidc/provider.mjs on 127.0.0.1, issuing access tokens for the
server's resource by the client-credentials grant (JWTs signed with the keys the test made, or
opaque ones checked by introspection). Key rotation is `restart` with another key set.

Its npm packages are installed with `npm ci` from the committed tests/oidc/package-lock.json
when missing. Without node and npm the tests skip locally with one line and fail in CI
(CI=true), where they must run.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

OIDC_DIR = Path(__file__).resolve().parent / "oidc"
NPM_DEADLINE_S = 300
START_DEADLINE_S = 30.0
SCOPES = ("notes:read", "notes:write")
CLIENT_ID = "agent"
CLIENT_SECRET = "agent-secret-for-tests-only"
RS_CLIENT_ID = "strictcall"
RS_CLIENT_SECRET = "strictcall-secret-for-tests-only"


def free_port() -> int:
    """A port nothing listens on now (the provider's issuer and the server's resource name
    theirs before they start)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@functools.cache
def _install() -> tuple[str | None, str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None, "node and npm on PATH"
    marker = OIDC_DIR / "node_modules" / ".package-lock.json"
    lock = OIDC_DIR / "package-lock.json"
    if not (marker.exists() and marker.stat().st_mtime >= lock.stat().st_mtime):
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=OIDC_DIR,
            capture_output=True,
            text=True,
            timeout=NPM_DEADLINE_S,
            check=False,
        )
        if done.returncode != 0:
            return None, f"`npm ci` in tests/oidc to succeed: {done.stderr.strip()[-500:]}"
    return node, ""


def node_for_provider() -> str:
    """node, with tests/oidc's packages; skips locally (fails in CI) without them."""
    node, missing = _install()
    if node is None:
        message = f"the OAuth tests run a real OpenID provider and need {missing}"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true: not skipped)")
        pytest.skip(message + "; install Node.js 20+ with npm to run them")
    return node


@dataclass
class SigningKey:
    """An EC P-256 key the provider signs with (the test holds it too, to make tokens the
    provider would not: expired, from the future)."""

    kid: str
    private: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )

    def jwk(self) -> dict[str, Any]:
        jwk = ECAlgorithm.to_jwk(self.private, as_dict=True)
        return {**jwk, "kid": self.kid, "alg": "ES256", "use": "sig"}

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        """`claims` signed as the provider signs an access token (RFC 9068's `typ`, unless
        `header` says another)."""
        return jwt.encode(
            claims,
            self.private,
            algorithm="ES256",
            headers={"kid": self.kid, "typ": "at+jwt", **header},
        )


class Provider:
    """One oidc-provider process; `restart` keeps its issuer (its port) and changes its keys."""

    def __init__(self, tmp: Path, resources: dict[str, str], keys: list[SigningKey]) -> None:
        self.node = node_for_provider()
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.resources = resources
        self.keys = keys
        self._tmp = tmp
        self._process: subprocess.Popen[str] | None = None
        self._pumping = threading.Thread()
        self._markers = 0
        self.requests: queue.Queue[str] = queue.Queue()
        """The paths it was asked for, in order (its stdout)."""

    def start(self) -> None:
        config = {
            "port": self.port,
            "keys": {"keys": [key.jwk() for key in self.keys]},
            "resources": self.resources,
            "scopes": " ".join(SCOPES),
            "ttl": 300,
            "alg": "ES256",
            "clients": [
                {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET},
                {"client_id": RS_CLIENT_ID, "client_secret": RS_CLIENT_SECRET},
            ],
        }
        path = self._tmp / f"oidc-{time.monotonic_ns()}.json"
        path.write_text(json.dumps(config))
        self._process = subprocess.Popen(
            [self.node, str(OIDC_DIR / "provider.mjs"), str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._pumping = threading.Thread(target=self._pump, args=(self._process,), daemon=True)
        self._pumping.start()
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise AssertionError("the OpenID provider exited at start")
            try:
                if httpx.get(self.issuer + "/.well-known/openid-configuration").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)  # polling with a deadline, not waiting for readiness blind
        raise AssertionError("the OpenID provider did not start in time")

    def _pump(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("request "):
                self.requests.put(line.split()[2])

    def stop(self) -> None:
        process = self._process
        if process is not None:
            if process.poll() is None:
                process.terminate()
            process.wait(timeout=10)
            self._pumping.join(timeout=10)  # it reads to the end of its output
            assert process.stdout is not None
            process.stdout.close()
        self._process = None

    def restart(self, keys: list[SigningKey]) -> None:
        """Rotate: the same issuer, now signing with `keys[0]` and publishing all of `keys`."""
        self.stop()
        self.keys = keys
        self.start()

    def token(self, resource: str, scope: str = " ".join(SCOPES)) -> str:
        """An access token for `resource` by the client-credentials grant."""
        answer = httpx.post(
            self.issuer + "/token",
            data={
                "grant_type": "client_credentials",
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "resource": resource,
                "scope": scope,
            },
        )
        assert answer.status_code == 200, answer.text
        token = answer.json()["access_token"]
        assert isinstance(token, str)
        return token

    def requests_seen(self) -> list[str]:
        """The paths it was asked for since the last call, every one of them: a marker request
        is sent, and its output read up to the marker (it writes a line per request, in order).
        """
        self._markers += 1
        marker = f"/strictcall-test-marker-{self._markers}"
        httpx.get(self.issuer + marker)  # 404, but its line is written like any other
        seen = []
        while (path := self.requests.get(timeout=START_DEADLINE_S)) != marker:
            seen.append(path)
        return seen

    def jwks_fetches(self) -> int:
        """How many times its JWKS was fetched since the last call."""
        return self.requests_seen().count("/jwks")
