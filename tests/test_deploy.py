"""What deploys strictcall, read without Docker or a cluster: `make image`'s recipe (offline,
on the slim Python of the virtualenv's version), and the Kubernetes manifests in
deploy/kubernetes: valid against the API's own schemas, offline (kubernetes-validate, with the
schemas it bundles; strict: a member the API does not know is an error), and saying what
docs/DEPLOY.md says they do: probes on /healthz, the database URL from the Secret only, the
image's user, memory asked for as measured, time to stop gracefully. tests/test_container.py
builds and runs the image."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import kubernetes_validate
import pytest
import yaml

import strictcall
from strictcall.server.app import GRACEFUL_SHUTDOWN_S

ROOT: Final = Path(__file__).resolve().parent.parent
MANIFESTS: Final = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
VERSIONS: Final = ("1.30.0", kubernetes_validate.latest_version())
"""The oldest Kubernetes checked, and the newest the validator knows."""


def documents() -> list[dict[str, Any]]:
    return [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]


def of_kind(kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in documents() if doc["kind"] == kind]
    return found


def container() -> dict[str, Any]:
    (only,) = of_kind("Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(only)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_each_manifest_is_valid_against_the_kubernetes_schemas(path: Path, version: str) -> None:
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_refuses_a_member_the_api_does_not_know() -> None:
    wrong = copy.deepcopy(of_kind("Deployment"))
    wrong["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, VERSIONS[-1], strict=True)


def test_readiness_and_liveness_ask_healthz_on_the_served_port() -> None:
    main = container()
    (port,) = main["ports"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert main[probe]["httpGet"]["path"] == "/healthz"
        assert main[probe]["httpGet"]["port"] in (port["name"], port["containerPort"])
    assert main["args"][main["args"].index("--port") + 1] == str(port["containerPort"])
    (service_port,) = of_kind("Service")["spec"]["ports"]
    assert service_port["targetPort"] in (port["name"], port["containerPort"])
    selector = of_kind("Service")["spec"]["selector"]
    labels = of_kind("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()


def test_the_database_url_comes_from_the_secret_and_nothing_else() -> None:
    secret = of_kind("Secret")
    (env,) = container()["env"]
    assert env["name"] == "STRICTCALL_DB"
    ref = env["valueFrom"]["secretKeyRef"]
    assert ref["name"] == secret["metadata"]["name"]
    assert ref["key"] in secret["stringData"]
    text = "\n".join(path.read_text() for path in MANIFESTS if path.name != "secret.yaml")
    assert "postgresql://" not in text


def test_the_pod_runs_as_the_images_user_on_a_read_only_root() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    match = re.search(r"^USER (\d+):(\d+)$", dockerfile, re.MULTILINE)
    assert match is not None
    pod = of_kind("Deployment")["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsNonRoot"] is True
    assert (str(pod["runAsUser"]), str(pod["runAsGroup"])) == match.groups()
    assert container()["securityContext"]["readOnlyRootFilesystem"] is True
    assert container()["image"] == "strictcall:" + str(strictcall.__version__)


def test_memory_asked_for_covers_the_measured_peak_and_the_stop_has_time() -> None:
    measured = json.loads((ROOT / "bench" / "memory-results.json").read_text())
    peak_mib = max(
        t["peak_mib"] for t in measured["targets"] if t["target"].startswith("strictcall")
    )
    resources = container()["resources"]
    request = int(resources["requests"]["memory"].removesuffix("Mi"))
    limit = int(resources["limits"]["memory"].removesuffix("Mi"))
    assert peak_mib < request < limit
    pod = of_kind("Deployment")["spec"]["template"]["spec"]
    pause = int(container()["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pause + GRACEFUL_SHUTDOWN_S < pod["terminationGracePeriodSeconds"]


def test_make_image_builds_offline_from_wheels_on_the_slim_python_of_the_venv() -> None:
    shown = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "image", f"BIN={Path(sys.executable).parent}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    build = shown[shown.index("docker build") :]
    assert "pip wheel" in shown[: shown.index("docker build")]  # the wheels first
    assert "--network none" in build
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"--build-arg BASE=python:{python}-slim" in build
    assert f"--tag strictcall:{strictcall.__version__}" in build
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE=python:3\.\d+-slim$", dockerfile, re.MULTILINE)
