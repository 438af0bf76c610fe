"""deploy/kubernetes/gateway: valid Kubernetes, settings the code knows, the same cluster and
topics as the workers, probes and ports the gateway serves, an HPA on the gateway."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml
from manifests import DEPLOY, KUBECTL, KUBERNETES_VERSION, env_file, render

from service.settings import Settings, env_name

pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed: the manifests cannot be rendered"
)

KNOWN_ENV = frozenset(env_name(field) for field in Settings.model_fields)
SHARED = (
    "KAFKA_BOOTSTRAP_SERVERS",
    "CRAWL_KAFKA_SECURITY_PROTOCOL",
    "CRAWL_KAFKA_SASL_MECHANISM",
    "CRAWL_REQUESTS_TOPIC",
    "CRAWL_RESULTS_TOPIC",
    "CRAWL_PROGRESS_TOPIC",
    "CRAWL_CONTROL_TOPIC",
    "CRAWL_FRONTIER_TOPIC",
    "CRAWL_GROUP_ID",
)
"""Settings the gateway must share with the workers, or it talks to another cluster."""


@pytest.fixture(scope="module")
def docs():
    return render("kubernetes/gateway")


def named(docs, kind, name):
    [found] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def container(docs, name):
    return named(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]


def test_every_manifest_is_valid_kubernetes(docs):
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    assert {d["kind"] for d in docs} == {
        "ConfigMap",
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
    }


def test_the_settings_are_known_and_shared_with_the_workers(docs):
    gateway = env_file(DEPLOY / "kubernetes/gateway/gateway.env")
    workers = env_file(DEPLOY / "kubernetes/base/worker.env")
    assert sorted(set(gateway) - KNOWN_ENV) == []
    assert {key: gateway[key] for key in SHARED} == {key: workers[key] for key in SHARED}
    for name in ("crawlstream-gateway", "crawlstream-webhooks"):
        env = [item["name"] for item in container(docs, name)["env"]]
        assert sorted(set(env) - KNOWN_ENV) == []


def test_the_gateway_serves_its_port_and_probes_and_reads_the_mounted_keys(docs):
    gateway = container(docs, "crawlstream-gateway")
    assert gateway["args"] == ["gateway"]
    ports = {port["name"]: port["containerPort"] for port in gateway["ports"]}
    assert ports["http"] == Settings().gateway_port
    metrics_port = env_file(DEPLOY / "kubernetes/gateway/gateway.env")["CRAWL_GATEWAY_METRICS_PORT"]
    assert ports["metrics"] == int(metrics_port)
    annotations = named(docs, "Deployment", "crawlstream-gateway")["spec"]["template"]["metadata"]
    assert annotations["annotations"]["prometheus.io/port"] == metrics_port
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert gateway["livenessProbe"]["httpGet"]["path"] == "/healthz"
    [mount] = gateway["volumeMounts"]
    keys_file = env_file(DEPLOY / "kubernetes/gateway/gateway.env")["CRAWL_GATEWAY_KEYS_FILE"]
    assert keys_file.startswith(mount["mountPath"] + "/")
    webhooks = container(docs, "crawlstream-webhooks")
    assert webhooks["args"] == ["webhooks"]
    assert webhooks["ports"][0]["containerPort"] == Settings().metrics_port
    assert webhooks["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_the_gateway_checks_internal_records_with_the_workers_cluster_secret(docs):
    """The gateway reads frontier records (`map`) and checks their tags: CRAWL_CLUSTER_SECRET
    from the workers' Secret, required. The dispatchers read only the progress and results
    topics, which carry no tag."""
    workers = render("kubernetes/base")
    [worker] = [d for d in workers if d["kind"] == "Deployment"]
    worker_env = worker["spec"]["template"]["spec"]["containers"][0]["env"]

    def cluster_secret(env):
        [item] = [item for item in env if item["name"] == "CRAWL_CLUSTER_SECRET"]
        return item["valueFrom"]["secretKeyRef"]

    gateway = cluster_secret(container(docs, "crawlstream-gateway")["env"])
    assert gateway == cluster_secret(worker_env)
    assert not gateway.get("optional", False)
    dispatcher = container(docs, "crawlstream-webhooks")["env"]
    assert "CRAWL_CLUSTER_SECRET" not in {item["name"] for item in dispatcher}


def test_the_service_and_hpa_target_the_gateway(docs):
    service = named(docs, "Service", "crawlstream-gateway")
    labels = named(docs, "Deployment", "crawlstream-gateway")["spec"]["template"]["metadata"]
    assert service["spec"]["selector"].items() <= labels["labels"].items()
    hpa = named(docs, "HorizontalPodAutoscaler", "crawlstream-gateway")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "crawlstream-gateway"
    assert hpa["spec"]["minReplicas"] >= 2


def test_compose_runs_the_gateway_and_the_dispatcher_with_known_settings():
    services = yaml.safe_load((DEPLOY.parent / "docker-compose.yml").read_text())["services"]
    assert services["gateway"]["command"] == ["gateway"]
    assert services["webhooks"]["command"] == ["webhooks"]
    assert services["gateway"]["ports"] == [f"{Settings().gateway_port}:3002"]
    for name in ("gateway", "webhooks"):
        assert set(services[name]["environment"]) <= KNOWN_ENV
        assert services[name]["read_only"] is True
