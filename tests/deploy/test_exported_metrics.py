"""Every metric the dashboard, the alerts and the KEDA Prometheus trigger read is one a
running worker exports (scraped from a real worker on a real broker), and the worker serves
the probes the Deployment and the Dockerfile use."""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING

import aiohttp
import pytest
import yaml
from manifests import DEPLOY, alert_rules, dashboard_exprs
from prometheus_client.parser import text_string_to_metric_families
from promql_names import exported_samples, grafana_to_promql, problems

from service.metrics import Metrics

if TYPE_CHECKING:
    from collections.abc import Iterable

pytestmark = pytest.mark.integration

EXTERNAL_METRICS = {
    "kube_pod_container_status_restarts_total": "kube-state-metrics: a worker the kernel "
    "killed exports nothing more; only the kubelet's view tells that it restarted.",
    "kube_pod_container_status_last_terminated_reason": "kube-state-metrics: why the "
    "container last ended (OOMKilled), which the dead worker cannot report.",
}
"""Metrics from outside the worker that deploy/ may read, each with the reason."""

READY_DEADLINE_S = 90.0
HTTP_DEADLINE_S = 5.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def declared_labels() -> dict[str, set[str]]:
    """Family name -> label names, as service/metrics.py declares them (a labelled family
    with no child yet shows no sample in a scrape, so its labels are read here)."""
    declared = {}
    for value in vars(Metrics()).values():
        name = getattr(value, "_name", None)
        if name is not None:
            declared[name] = set(value._labelnames)  # noqa: SLF001 - the declared labels
    return declared


def scraped(text: str) -> dict[str, set[str]]:
    """Sample names and their label names from a /metrics body."""
    declared = declared_labels()
    families: list[tuple[str, str, Iterable[str]]] = []
    for family in text_string_to_metric_families(text):
        labels = {label for sample in family.samples for label in sample.labels} - {"le"}
        families.append((family.name, family.type, labels | declared.get(family.name, set())))
    return exported_samples(families)


def keda_queries() -> list[str]:
    patch = DEPLOY / "kubernetes" / "components" / "keda-pages" / "pending-pages-trigger.yaml"
    return [op["value"]["metadata"]["query"] for op in yaml.safe_load(patch.read_text())]


async def get(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=HTTP_DEADLINE_S)) as answer:
        return answer.status, await answer.text()


async def wait_ready(session: aiohttp.ClientSession, base: str) -> None:
    async with asyncio.timeout(READY_DEADLINE_S):
        while (await get(session, f"{base}/readyz"))[0] != 200:
            await asyncio.sleep(0.2)


async def test_every_metric_deploy_reads_is_exported_by_a_running_worker(start_worker):
    """Scrape a live worker: each name and label in the dashboard, alerts and KEDA query
    exists (external metrics only from the listed ones); /healthz and /readyz answer 200."""
    port = free_port()
    await start_worker(CRAWL_METRICS_PORT=str(port))
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:
        assert (await get(session, f"{base}/healthz"))[0] == 200
        await wait_ready(session, base)
        status, body = await get(session, f"{base}/metrics")
    assert status == 200
    exported = scraped(body)
    assert "crawl_consumer_lag" in exported
    assert "crawl_commits_total" in exported
    exprs = [grafana_to_promql(e) for e in dashboard_exprs()]
    exprs += [rule["expr"] for rule in alert_rules()]
    exprs += keda_queries()
    assert problems(exprs, exported, EXTERNAL_METRICS) == []
