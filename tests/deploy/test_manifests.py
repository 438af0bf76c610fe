"""deploy/kubernetes: renders with kustomize, validates offline against the Kubernetes and
the vendored CRD schemas, and agrees with the worker's settings, probes and CLI."""

from __future__ import annotations

import copy
import subprocess
import sys
from datetime import timedelta

import kubernetes_validate
import pytest
from manifests import (
    CRD_FILES,
    DEPLOY,
    KUBECTL,
    KUBERNETES_VERSION,
    KUSTOMIZATIONS,
    crd_errors,
    env_file,
    one,
    render,
)

from service.settings import Settings, env_name

pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed: the manifests cannot be rendered"
)

KAFKA_TRIGGER_KEYS = frozenset({
    "bootstrapServers", "bootstrapServersFromEnv", "consumerGroup", "consumerGroupFromEnv",
    "topic", "topicFromEnv", "partitionLimitation", "lagThreshold", "activationLagThreshold",
    "offsetResetPolicy", "allowIdleConsumers", "excludePersistentLag",
    "scaleToZeroOnInvalidOffset", "limitToPartitionsWithLag",
    "ensureEvenDistributionOfPartitions", "version", "tls", "unsafeSsl", "sasl",
    "saslTokenProvider", "awsRegion",
})  # fmt: skip
"""Trigger metadata of KEDA 2.20.2's kafka scaler (pkg/scalers/kafka_scaler.go)."""

PROMETHEUS_TRIGGER_KEYS = frozenset({
    "serverAddress", "query", "queryParameters", "threshold", "activationThreshold",
    "namespace", "customHeaders", "ignoreNullValues", "unsafeSsl", "awsRegion", "timeout",
    "identityOwner",
})  # fmt: skip
"""Trigger metadata of KEDA 2.20.2's prometheus scaler (pkg/scalers/prometheus_scaler.go)."""

KEDA_SASL = {"PLAIN": "plaintext", "SCRAM-SHA-256": "scram_sha256", "SCRAM-SHA-512": "scram_sha512"}
"""CRAWL_KAFKA_SASL_MECHANISM -> the kafka scaler's `sasl`."""

SHUTDOWN_MARGIN_S = 15
"""What the grace period must leave beyond the drain: last commit, browser close, leave."""

KNOWN_ENV = frozenset(env_name(field) for field in Settings.model_fields)
SECRET_ENV = frozenset({"CRAWL_KAFKA_SASL_USERNAME", "CRAWL_KAFKA_SASL_PASSWORD"})
CLUSTER_SECRET = ("crawlstream-cluster-secret", "secret")
"""The Secret (and key) of CRAWL_CLUSTER_SECRET, the HMAC key of internal records."""
PROCESS_ENV = frozenset({"HOME", "TMPDIR"})
"""Variables for Chromium and the runtime, not settings."""


def worker_container(docs):
    return one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def config(docs):
    return one(docs, "ConfigMap")["data"]


def kubernetes_errors(doc) -> str | None:
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return str(exc)
    return None


def unknown_settings(names) -> list[str]:
    return sorted(set(names) - KNOWN_ENV)


@pytest.fixture(scope="module")
def rendered():
    return {directory: render(directory) for directory in KUSTOMIZATIONS}


@pytest.fixture(scope="module")
def full(rendered):
    """The overlay with every component: base, both KEDA triggers, PodMonitor."""
    return rendered["kubernetes/overlays/keda-pages"]


@pytest.mark.parametrize("directory", KUSTOMIZATIONS)
def test_every_manifest_is_valid_kubernetes_or_matches_its_vendored_crd(rendered, directory):
    """Built-in kinds pass the Kubernetes schemas in strict mode; custom ones their CRD's."""
    for doc in rendered[directory]:
        if (doc["apiVersion"], doc["kind"]) in CRD_FILES:
            assert crd_errors(doc) == [], doc["kind"]
        else:
            assert kubernetes_errors(doc) is None, doc["kind"]


def test_the_validators_reject_broken_manifests(full):
    """A misspelt field, a wrong type: each validator says no (so the test above can fail)."""
    deployment = copy.deepcopy(one(full, "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    assert kubernetes_errors(deployment) is not None
    scaled = copy.deepcopy(one(full, "ScaledObject"))
    scaled["spec"]["maxReplicaCount"] = "twelve"
    assert crd_errors(scaled)
    scaled = copy.deepcopy(one(full, "ScaledObject"))
    scaled["spec"]["triggers"][0]["metadata"]["excludePersistentLag"] = False  # not a string
    assert crd_errors(scaled)


def test_default_kustomization_is_the_base_with_kafka_autoscaling(rendered):
    """deploy/kubernetes adds KEDA to the base; the base alone has no custom resources."""
    kinds = {doc["kind"] for doc in rendered["kubernetes"]}
    assert {"Deployment", "ConfigMap", "Job", "PodDisruptionBudget", "Service"} <= kinds
    assert {"ScaledObject", "TriggerAuthentication"} <= kinds
    assert all((d["apiVersion"], d["kind"]) not in CRD_FILES for d in rendered["kubernetes/base"])


def test_every_setting_the_workers_get_is_a_known_crawl_setting(full):
    """ConfigMap keys and container env names are settings of service/settings.py."""
    env_names = [item["name"] for item in worker_container(full)["env"]]
    assert unknown_settings(config(full)) == []
    assert unknown_settings(set(env_names) - PROCESS_ENV) == []
    assert unknown_settings(["CRAWL_MAX_PAGES_SLOTS"]) == ["CRAWL_MAX_PAGES_SLOTS"]


def test_the_configmap_is_a_valid_settings_tree(full, monkeypatch):
    """The ConfigMap's values, with the Secret's, load as Settings without an error."""
    for name, value in config(full).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CRAWL_KAFKA_SASL_USERNAME", "crawlstream")
    monkeypatch.setenv("CRAWL_KAFKA_SASL_PASSWORD", "secret")
    settings = Settings()
    assert settings.kafka_security_protocol.startswith("SASL")


def secret_refs(container) -> dict[str, dict[str, object]]:
    """Each env variable of `container` that comes from a Secret: its secretKeyRef."""
    return {
        item["name"]: item["valueFrom"]["secretKeyRef"]
        for item in container["env"]
        if "secretKeyRef" in item.get("valueFrom", {})
    }


def test_sasl_credentials_come_from_a_secret_in_the_workers_and_the_topics_job(full):
    """Username and password are secretKeyRefs; KEDA reads the same Secret."""
    job = one(full, "Job")["spec"]["template"]["spec"]["containers"][0]
    for container in (worker_container(full), job):
        refs = {
            name: ref["name"] for name, ref in secret_refs(container).items() if name in SECRET_ENV
        }
        assert set(refs) == SECRET_ENV
        assert not SECRET_ENV & set(config(full))
    secrets = {ref["name"] for ref in one(full, "TriggerAuthentication")["spec"]["secretTargetRef"]}
    assert secrets == set(refs.values())


@pytest.mark.parametrize("directory", KUSTOMIZATIONS)
def test_the_workers_tag_internal_records_with_the_cluster_secret_from_a_secret(
    rendered, directory
):
    """Every rendering's workers read CRAWL_CLUSTER_SECRET from one Secret (required: a worker
    never starts without it, so internal records are never tagged with a key anyone can
    derive); no ConfigMap holds it. The webhook secret that seals producers' webhooks is an
    optional secretKeyRef."""
    docs = rendered[directory]
    refs = secret_refs(worker_container(docs))
    cluster = refs["CRAWL_CLUSTER_SECRET"]
    assert (cluster["name"], cluster["key"]) == CLUSTER_SECRET
    assert not cluster.get("optional", False)
    assert refs["CRAWL_WEBHOOK_SECRET"]["optional"] is True
    assert not {"CRAWL_CLUSTER_SECRET", "CRAWL_WEBHOOK_SECRET"} & set(config(docs))


def test_the_worker_name_is_the_pod_name(full):
    """CRAWL_WORKER_NAME comes from the downward API; static membership stays off."""
    (name,) = [e for e in worker_container(full)["env"] if e["name"] == "CRAWL_WORKER_NAME"]
    assert name["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert config(full).get("CRAWL_STATIC_MEMBERSHIP", "false").lower() == "false"


def test_probes_hit_the_workers_health_paths_on_its_metrics_port(full):
    """Liveness and startup on /healthz, readiness on /readyz, on CRAWL_METRICS_PORT."""
    container = worker_container(full)
    port = int(config(full)["CRAWL_METRICS_PORT"])
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    paths = {}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert named.get(get["port"], get["port"]) == port
        paths[probe] = get["path"]
    assert paths == {
        "startupProbe": "/healthz",
        "livenessProbe": "/healthz",
        "readinessProbe": "/readyz",
    }
    service = one(full, "Service")["spec"]
    assert service["ports"][0]["targetPort"] in named
    assert service["publishNotReadyAddresses"] is True


def test_the_grace_period_outlasts_the_drain(full):
    """terminationGracePeriodSeconds > CRAWL_SHUTDOWN_GRACE plus the time to close."""
    grace = Settings(shutdown_grace=config(full)["CRAWL_SHUTDOWN_GRACE"]).shutdown_grace
    pod = one(full, "Deployment")["spec"]["template"]["spec"]
    needed = grace + timedelta(seconds=SHUTDOWN_MARGIN_S)
    assert pod["terminationGracePeriodSeconds"] >= needed.total_seconds()
    assert "preStop" not in worker_container(full).get("lifecycle", {})


def test_the_worker_runs_non_root_read_only_with_writable_tmp_and_home(full):
    """Non-root, read-only root, no capabilities; /tmp and $HOME are emptyDirs on disk."""
    pod = one(full, "Deployment")["spec"]["template"]["spec"]
    container = worker_container(full)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    home = next(e["value"] for e in container["env"] if e["name"] == "HOME")
    for path in ("/tmp", home):  # noqa: S108 - the container's own /tmp, an emptyDir
        assert "medium" not in mounts[path]["emptyDir"]  # disk, not memory
    # The worker launches Chromium with --disable-dev-shm-usage: no /dev/shm volume.
    assert "/dev/shm" not in mounts  # noqa: S108


def test_memory_request_equals_the_limit_the_governor_reads(full):
    """The governor reads the container's cgroup limit: request = limit, no override."""
    resources = worker_container(full)["resources"]
    assert resources["limits"]["memory"] == resources["requests"]["memory"]
    assert "CRAWL_MEMORY_LIMIT" not in config(full)


def test_keda_scales_on_the_workers_group_and_topic_up_to_the_partition_count(full):
    """Kafka triggers on both groups: the coordinators' on the requests topic and the
    fetchers' on the pages topic; max replicas = partitions of each (equal); paused
    partitions' lag counts; metadata keys are the scaler's own."""
    spec = one(full, "ScaledObject")["spec"]
    settings = config(full)
    assert spec["scaleTargetRef"]["name"] == one(full, "Deployment")["metadata"]["name"]
    assert spec["maxReplicaCount"] == int(settings["CRAWL_REQUESTS_PARTITIONS"])
    assert spec["maxReplicaCount"] == int(settings["CRAWL_PAGE_PARTITIONS"])
    requests, pages, prometheus = spec["triggers"]
    for kafka, topic, group in (
        (requests, "CRAWL_REQUESTS_TOPIC", "CRAWL_GROUP_ID"),
        (pages, "CRAWL_PAGES_TOPIC", "CRAWL_FETCHER_GROUP_ID"),
    ):
        meta = kafka["metadata"]
        assert set(meta) <= KAFKA_TRIGGER_KEYS
        assert meta["topicFromEnv"] == topic
        assert topic in settings
        assert meta["consumerGroupFromEnv"] == group
        assert group in settings
        assert meta["bootstrapServersFromEnv"] == "KAFKA_BOOTSTRAP_SERVERS" in settings
        assert meta["excludePersistentLag"] == "false"
        assert meta["allowIdleConsumers"] == "false"
    assert prometheus["type"] == "prometheus"
    assert set(prometheus["metadata"]) <= PROMETHEUS_TRIGGER_KEYS
    assert "crawl_pages_pending" in prometheus["metadata"]["query"]


def test_keda_logs_in_to_kafka_as_the_workers_do(full):
    """The trigger's sasl and tls follow CRAWL_KAFKA_SASL_MECHANISM and the protocol."""
    settings = config(full)
    meta = one(full, "ScaledObject")["spec"]["triggers"][0]["metadata"]
    protocol = settings["CRAWL_KAFKA_SECURITY_PROTOCOL"]
    if protocol.startswith("SASL"):
        assert meta["sasl"] == KEDA_SASL[settings["CRAWL_KAFKA_SASL_MECHANISM"]]
    else:
        assert meta.get("sasl", "none") == "none"
    assert meta.get("tls", "disable") == ("enable" if protocol.endswith("SSL") else "disable")


def test_the_topics_job_runs_the_projects_own_topics_command(full):
    """`crawlstream topics create` with the workers' settings; the CLI knows the command."""
    job = one(full, "Job")["spec"]["template"]["spec"]
    container = job["containers"][0]
    assert container["image"] == worker_container(full)["image"]
    assert container["envFrom"] == worker_container(full)["envFrom"]
    assert job["restartPolicy"] == "OnFailure"
    done = subprocess.run(
        [sys.executable, "-m", "service", *container["args"], "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_disruption_budget_and_metrics_service_select_the_workers(full):
    """PDB and Service select exactly the Deployment's pods; the PDB never blocks a drain."""
    labels = one(full, "Deployment")["spec"]["template"]["metadata"]["labels"]
    pdb = one(full, "PodDisruptionBudget")["spec"]
    assert pdb["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["maxUnavailable"] == 1
    assert one(full, "Service")["spec"]["selector"].items() <= labels.items()
    assert one(full, "PodMonitor")["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_the_settings_file_is_the_configmap(full):
    """worker.env, which docker-compose.yml reads too, is exactly the ConfigMap's data."""
    assert config(full) == env_file(DEPLOY / "kubernetes" / "base" / "worker.env")
