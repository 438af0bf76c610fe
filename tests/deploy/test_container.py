"""Dockerfile and docker-compose.yml agree with deploy/kubernetes: user, probe, entrypoint,
settings, memory limit and grace period. The image is built only where an engine answers."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

import pytest
import yaml
from manifests import DEPLOY, ROOT, env_file

from service.settings import Settings, env_name

KNOWN_ENV = frozenset(env_name(field) for field in Settings.model_fields)
BUILD_DEADLINE_S = 1800
ENGINE_DEADLINE_S = 20
WORKER_ENV = DEPLOY / "kubernetes" / "base" / "worker.env"
MEMORY_UNITS = {"g": 2**30, "m": 2**20, "Gi": 2**30, "Mi": 2**20}


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    joined = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def instruction(name: str) -> str:
    (last,) = [args for word, args in instructions() if word == name][-1:]
    return last


def deployment_pod() -> dict:
    text = (DEPLOY / "kubernetes" / "base" / "deployment.yaml").read_text()
    pod: dict = yaml.safe_load(text)["spec"]["template"]["spec"]
    return pod


def compose() -> dict:
    services: dict = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    return services


def to_bytes(size: str) -> int:
    for unit, factor in MEMORY_UNITS.items():
        if size.endswith(unit):
            return int(size.removesuffix(unit)) * factor
    return int(size)


def test_the_image_runs_as_the_numeric_user_the_pods_run_as():
    """USER is numeric (runAsNonRoot can check it) and equals runAsUser:runAsGroup."""
    security = deployment_pod()["securityContext"]
    expected = f"{security['runAsUser']}:{security['runAsGroup']}"
    assert instruction("USER") == expected
    assert compose()["worker"]["user"] == expected


def test_the_healthcheck_probes_healthz_on_the_metrics_port():
    """The image's HEALTHCHECK asks /healthz on CRAWL_METRICS_PORT, like the liveness probe."""
    port = env_file(WORKER_ENV)["CRAWL_METRICS_PORT"]
    check = instruction("HEALTHCHECK")
    assert f"127.0.0.1:{port}/healthz" in check
    assert instruction("EXPOSE") == port
    liveness = deployment_pod()["containers"][0]["livenessProbe"]["httpGet"]["path"]
    assert liveness == "/healthz"


def test_the_entrypoint_is_tini_then_crawlstream_and_the_pods_run_its_worker_command():
    """tini reaps Chromium's children and passes SIGTERM on; CMD is the Deployment's args."""
    assert json.loads(instruction("ENTRYPOINT")) == ["/usr/bin/tini", "--", "crawlstream"]
    container = deployment_pod()["containers"][0]
    assert json.loads(instruction("CMD")) == container["args"]
    assert "command" not in container  # keep the entrypoint


def test_the_image_and_compose_set_only_known_settings():
    """ENV in the Dockerfile and compose's environment name settings of the settings tree."""
    image_env = set()
    for word, args in instructions():
        if word == "ENV":
            image_env |= {pair.partition("=")[0] for pair in shlex.split(args)}
    crawl = {name for name in image_env if name.startswith(("CRAWL_", "KAFKA_"))}
    assert crawl <= KNOWN_ENV
    for service in ("worker", "topics"):
        assert set(compose()[service]["environment"]) <= KNOWN_ENV


def test_compose_reads_the_kubernetes_settings_and_limits():
    """Both services read worker.env; the worker's memory limit, grace period and read-only
    root are the Deployment's."""
    services, pod = compose(), deployment_pod()
    for service in ("worker", "topics"):
        assert services[service]["env_file"] == str(WORKER_ENV.relative_to(ROOT))
        assert services[service]["read_only"] is True
    worker, container = services["worker"], pod["containers"][0]
    assert to_bytes(worker["mem_limit"]) == to_bytes(container["resources"]["limits"]["memory"])
    assert worker["stop_grace_period"] == f"{pod['terminationGracePeriodSeconds']}s"
    mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
    assert set(worker["volumes"]) == mounts


def _engine() -> str | None:
    for name in ("docker", "podman"):
        path = shutil.which(name)
        if path is None:
            continue
        probe = subprocess.run(
            [path, "info"], capture_output=True, timeout=ENGINE_DEADLINE_S, check=False
        )
        if probe.returncode == 0:
            return path
    return None


def test_the_image_builds_and_runs_as_the_pods_user():
    """With a container engine: the Dockerfile builds and its config has the same user."""
    engine = _engine()
    if engine is None:
        pytest.skip("no container engine answers (docker/podman info failed): image not built")
    tag = "crawlstream:deploy-test"
    build = subprocess.run(
        [engine, "build", "-t", tag, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=BUILD_DEADLINE_S,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    inspect = subprocess.run(
        [engine, "image", "inspect", "--format", "{{json .Config}}", tag],
        capture_output=True,
        text=True,
        timeout=ENGINE_DEADLINE_S,
        check=True,
    )
    image = json.loads(inspect.stdout)
    assert image["User"] == instruction("USER")
    assert "/healthz" in " ".join(image["Healthcheck"]["Test"])
