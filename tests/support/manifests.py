"""What `deploy/` holds, read the way the tests need it: rendered manifests, the dashboard's
and the alerts' PromQL, the KEDA and prometheus-operator CRD schemas."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUSTOMIZATIONS = ("kubernetes", "kubernetes/base", "kubernetes/overlays/keda-pages")
"""Every directory a user applies with `kubectl apply -k`, relative to deploy/."""

CRD_FILES = {
    ("keda.sh/v1alpha1", "ScaledObject"): "keda/keda.sh_scaledobjects.yaml",
    ("keda.sh/v1alpha1", "TriggerAuthentication"): "keda/keda.sh_triggerauthentications.yaml",
    ("monitoring.coreos.com/v1", "PodMonitor"): "prometheus_operator/"
    "monitoring.coreos.com_podmonitors.yaml",
}
"""Custom resources and their vendored CRDs (under tests/deploy, each with its source)."""

KUBERNETES_VERSION = "1.32.0"
"""Schemas of the oldest Kubernetes the manifests are meant for (kubectl here is 1.32)."""

KUBECTL = shutil.which("kubectl")
RENDER_DEADLINE_S = 60


def render(directory: str) -> list[dict[str, Any]]:
    """`kubectl kustomize deploy/<directory>`, as documents."""
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, "kustomize", str(DEPLOY / directory)],
        capture_output=True,
        text=True,
        timeout=RENDER_DEADLINE_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The one document of `kind`."""
    found = [doc for doc in docs if doc["kind"] == kind]
    assert len(found) == 1, f"{len(found)} documents of kind {kind}"
    return found[0]


def crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    """The vendored CRD's openAPIV3Schema for `api_version`."""
    path = ROOT / "tests" / "deploy" / CRD_FILES[api_version, kind]
    crd = yaml.safe_load(path.read_text())
    version = api_version.rsplit("/", 1)[1]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
    return schema


def crd_errors(doc: dict[str, Any]) -> list[str]:
    """Where `doc` breaks its vendored CRD schema (empty: valid)."""
    schema = crd_schema(doc["apiVersion"], doc["kind"])
    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(doc)
    ]


def dashboard_exprs() -> list[str]:
    """Every PromQL expression of the dashboard: panel targets and variable queries."""
    dashboard = json.loads((DEPLOY / "grafana" / "crawlstream.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    variables = dashboard["templating"]["list"]
    return exprs + [v["query"]["query"] for v in variables if v["type"] == "query"]


def alert_rules() -> list[dict[str, Any]]:
    """Every rule of deploy/prometheus/alerts.yaml."""
    rules_file = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yaml").read_text())
    return [rule for group in rules_file["groups"] for rule in group["rules"]]


def env_file(path: Path) -> dict[str, str]:
    """KEY=value lines of an env file (comments and blank lines skipped)."""
    pairs = {}
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            key, _, value = stripped.partition("=")
            pairs[key] = value
    return pairs
