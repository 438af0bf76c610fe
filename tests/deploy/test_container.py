"""Dockerfile and docker-compose.yml agree with deploy/kubernetes: user, probe, entrypoint,
settings, memory limit and grace period.

The container lane (`make test-container`, scripts/container/lane.sh, docs/containers.md)
also runs the image it built: the compose services on this machine (compose.lane.yml sets
the local images and the host's network), and the image by hand with `docker run`. Those
tests run only where CRAWL_CONTAINER_LANE=1: an engine that happens to answer during
`make test` is not the lane's (its images are not built)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import subprocess
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import yaml
from firecrawl import Firecrawl
from harness import (
    Collected,
    Collector,
    Topics,
    collecting,
    produce,
    running_broker,
    wait_for_leaders,
)
from manifests import DEPLOY, ROOT, env_file
from ports import unused_port
from prometheus_client.parser import text_string_to_metric_families

from service.contracts import CrawlRequest, EventType, dump
from service.settings import Settings, env_name

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    from testsite import TestSite

KNOWN_ENV = frozenset(env_name(field) for field in Settings.model_fields)
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
    """The image's HEALTHCHECK asks /healthz on CRAWL_METRICS_PORT, like the liveness probe;
    without the variable, on its default (worker.env's port)."""
    port = env_file(WORKER_ENV)["CRAWL_METRICS_PORT"]
    check = instruction("HEALTHCHECK")
    assert f"os.environ.get('CRAWL_METRICS_PORT', '{port}')" in check
    assert "127.0.0.1:{port}/healthz" in check
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


# --- The container lane ------------------------------------------------------------------

LANE = os.environ.get("CRAWL_CONTAINER_LANE") == "1"
lane = pytest.mark.skipif(
    not LANE, reason="the container lane's: `make test-container` sets CRAWL_CONTAINER_LANE=1"
)
IMAGE = os.environ.get("CRAWL_LANE_IMAGE", "crawlstream:lane")
KAFKA_IMAGE = os.environ.get("CRAWL_LANE_KAFKA_IMAGE", "crawlstream-lane/kafka:4.1.1")
COMPOSE = os.environ.get("CRAWL_LANE_COMPOSE", "docker-compose")
OVERRIDE = Path(__file__).with_name("compose.lane.yml")
PROJECT = "crawlstream-lane"
LOGS = Path(os.environ.get("CRAWL_LANE_LOGS", "/tmp/crawlstream-lane"))  # noqa: S108
BROKER = "127.0.0.1:9092"
"""The compose broker's listener on the host's loopback (compose.lane.yml)."""
WORKERS = {"worker": 9401, "worker-2": 9402, "worker-3": 9403}
"""Worker services and their metrics ports (compose.lane.yml)."""
WEBHOOKS_PORT = 9400
GATEWAY = "http://127.0.0.1:3002"
DOCKER_DEADLINE_S = 120
UP_DEADLINE_S = 900
"""`up` waits for the broker's health, then the topics job; containers start on vfs."""
HEALTHY_DEADLINE_S = 300
"""Workers start Chromium, join the groups, and the health check runs every 30 s."""
CRAWL_DEADLINE_S = 600
PAGE_DELAY_MS = 2000
"""Each page of the kill test answers after this long, so the kill lands mid-run."""
ALLOC_PAGES = 16
ALLOC_MB = 100
STOP_DEADLINE_S = 180
MEMORY_LIMIT = 2 * 2**30
"""docker-compose.yml's worker mem_limit (2g; test_compose_reads_the_kubernetes_settings...)."""


def docker(*args: str, deadline_s: float = DOCKER_DEADLINE_S, check: bool = True) -> str:
    done = subprocess.run(
        ["docker", *args],  # noqa: S607
        capture_output=True,
        text=True,
        timeout=deadline_s,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {done.stderr[-3000:]}")
    return done.stdout


def state(container: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(docker("inspect", "--format", "{{json .State}}", container))
    return found


def health(container: str) -> str:
    """The health check's status; a container that exited for good fails the test with its
    log (one that restarts, `restart: on-failure`, is waited for)."""
    now = state(container)
    if not now["Running"] and not now["Restarting"]:
        tail = subprocess.run(
            ["docker", "logs", "--tail", "40", container],  # noqa: S607
            capture_output=True,
            text=True,
            timeout=DOCKER_DEADLINE_S,
            check=False,
        )
        raise AssertionError(f"{container} exited {now['ExitCode']}: {tail.stderr[-4000:]}")
    return str(now.get("Health", {}).get("Status", "none"))


async def wait_ready(container: str, port: int) -> None:
    """The container keeps running and its /readyz on `port` answers 200."""

    def ready() -> bool:
        health(container)
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
        return False

    await wait_for(ready, HEALTHY_DEADLINE_S, f"{container} ready on port {port}")


async def wait_for(condition: Callable[[], bool], deadline_s: float, what: str) -> None:
    """Polls `condition()` (blocking calls, run in a thread) until true or the deadline."""
    try:
        async with asyncio.timeout(deadline_s):
            while not await asyncio.to_thread(condition):
                await asyncio.sleep(2)
    except TimeoutError:
        raise AssertionError(f"not within {deadline_s} s: {what}") from None


class Cluster:
    """docker-compose.yml with compose.lane.yml, as project `crawlstream-lane`.

    compose runs the merged configuration less the gateway's published port: on the host's
    network a port is the process's own (the engine discards port publishing there, and
    compose 1.29 refuses the pair; an override cannot remove a list entry)."""

    def __init__(self, allowed_hosts: str) -> None:
        self.env = os.environ | {
            "CRAWL_LANE_IMAGE": IMAGE,
            "CRAWL_LANE_KAFKA_IMAGE": KAFKA_IMAGE,
            "CRAWL_LANE_ALLOWED_HOSTS": allowed_hosts,
            # compose 1.29 gives each engine call 60 s; creating a worker and its volumes
            # took longer on this machine under load
            "COMPOSE_HTTP_TIMEOUT": "600",
        }
        self.is_down = False
        self.files = ["-f", str(ROOT / "docker-compose.yml"), "-f", str(OVERRIDE)]

    def merged(self) -> dict[str, Any]:
        """`config` of docker-compose.yml and compose.lane.yml."""
        found: dict[str, Any] = yaml.safe_load(self.compose("config"))
        return found

    def resolve(self) -> None:
        """From here on, compose runs the merged configuration, less the gateway's ports."""
        merged = self.merged()
        merged.pop("version", None)  # the compose specification: depends_on conditions
        merged["services"]["gateway"].pop("ports")
        LOGS.mkdir(parents=True, exist_ok=True)
        resolved = LOGS / "compose.resolved.yml"
        resolved.write_text(yaml.safe_dump(merged))
        self.files = ["-f", str(resolved)]

    def compose(self, *args: str, deadline_s: float = DOCKER_DEADLINE_S) -> str:
        done = subprocess.run(
            [COMPOSE, "-p", PROJECT, *self.files, "--ansi", "never", *args],
            capture_output=True,
            text=True,
            timeout=deadline_s,
            check=False,
            env=self.env,
            cwd=ROOT,
        )
        if done.returncode != 0:
            raise AssertionError(f"compose {' '.join(args)}: {done.stderr[-3000:]}")
        return done.stdout

    def container(self, service: str) -> str:
        (found,) = self.compose("ps", "-q", service).split()
        return found

    def save_logs(self) -> None:
        LOGS.mkdir(parents=True, exist_ok=True)
        (LOGS / "compose.log").write_text(self.compose("logs", "--no-color", "--timestamps"))


@pytest.fixture(scope="module")
async def cluster(site: TestSite) -> AsyncIterator[Cluster]:
    """The compose services up (`up -d` waits for the broker's health and the topics job);
    stopped at the end if the test of `down` did not get to it. Logs: $CRAWL_LANE_LOGS."""
    running = Cluster(allowed_hosts=f"127.0.0.1:{site.port}")
    await asyncio.to_thread(running.resolve)
    await asyncio.to_thread(running.compose, "down", "--volumes", "--remove-orphans")
    try:
        await asyncio.to_thread(running.compose, "up", "-d", "--no-build", deadline_s=UP_DEADLINE_S)
        yield running
    finally:
        if not running.is_down:
            with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
                await asyncio.to_thread(running.save_logs)
            await asyncio.to_thread(
                running.compose, "down", "--volumes", deadline_s=STOP_DEADLINE_S
            )


def crawl_topics() -> Topics:
    """The compose cluster's topics: worker.env's `crawl.*` names."""
    return Topics(bootstrap=BROKER, prefix="crawl")


def request(request_id: str, urls: list[str]) -> tuple[bytes, bytes]:
    return request_id.encode(), dump(CrawlRequest(request_id=request_id, urls=urls))


def all_ended(seen: Collected, requests: dict[str, list[str]]) -> bool:
    """Every request has a terminal event and a result for each of its URLs (the collector
    reads results and progress from different topics, so a terminal event may be read
    before the last results it follows). Results count by URL, whatever their run: a run
    that takes a request over after a kill counts the pages finished before it, whose
    results carry the run that dispatched them (`PageResult.run_id`, docs/guarantees.md)."""
    for rid, urls in requests.items():
        if not seen.terminal(rid):
            return False
        if not {r.url for r in seen.results_of(rid)} >= set(urls):
            return False
    return True


def assert_nothing_lost(collector: Collector, requests: dict[str, list[str]]) -> set[str]:
    """Each request ended: one terminal event per run, each `completed` and counting every
    URL a success; every URL has a result, all ok, one `result_id` per URL (a page rendered
    again after a kill is a duplicate, not another result). A run that completed but was
    not committed before a kill is redone (at least once: docs/guarantees.md), so a request
    may have two such runs; an interrupted run has none. Returns the workers that completed
    runs."""
    completed_by = set()
    for rid, urls in requests.items():
        terminal = collector.seen.terminal(rid)
        runs = [event.run_id for event in terminal]
        assert runs, rid
        assert len(runs) == len(set(runs)), rid  # one terminal event per run
        for event in terminal:
            counts = (event.type, event.total, event.succeeded, event.failed, event.cancelled)
            assert counts == (EventType.COMPLETED, len(urls), len(urls), 0, 0), rid
            completed_by.add(event.worker)
        ids: dict[str, set[str]] = {}
        for result in collector.seen.results_of(rid):
            assert result.ok, (rid, result.url, result.error)
            ids.setdefault(result.url, set()).add(result.result_id)
        assert sorted(ids) == sorted(urls), rid
        assert all(len(found) == 1 for found in ids.values()), rid
    return completed_by


async def crawl_with_a_kill(
    topics: Topics, site: TestSite, prefix: str, kill: Callable[[], object]
) -> set[str]:
    """Requests of slow pages; once results flow, `kill()`; then every request ends whole."""
    requests = {
        f"{prefix}-{i}": [site.url(f"/slow/{prefix}-{i}-{p}?ms={PAGE_DELAY_MS}") for p in range(4)]
        for i in range(12)
    }
    async with collecting(topics) as collector:
        try:
            await produce(topics, [request(rid, urls) for rid, urls in requests.items()])
            await collector.wait_until(lambda seen: len(seen.results) >= 4, CRAWL_DEADLINE_S)
            await asyncio.to_thread(kill)
            await collector.wait_until(lambda seen: all_ended(seen, requests), CRAWL_DEADLINE_S)
            return assert_nothing_lost(collector, requests)
        finally:
            save_seen(collector.seen, LOGS / f"kill-{prefix}.jsonl")


def save_seen(seen: Collected, path: Path) -> None:
    """What the collector read, one line per event or result (without the page's content)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as sink:
        for event, partition in seen.events:
            line = event.model_dump(mode="json", exclude={"request_metadata"})
            sink.write(json.dumps({"topic": "progress", "partition": partition, **line}) + "\n")
        for result, partition in seen.results:
            line = result.model_dump(
                mode="json", include={"request_id", "result_id", "run_id", "url", "ok", "worker"}
            )
            sink.write(json.dumps({"topic": "results", "partition": partition, **line}) + "\n")


def scrape(url: str, api_url: str) -> Any:
    """The official SDK's `scrape`, as a user calls it, against a gateway container."""
    return Firecrawl(api_key="fc-lane", api_url=api_url).scrape(url, timeout=120_000)


@lane
def test_the_image_is_lean_runs_tini_as_pid_1_and_a_numeric_non_root_user():
    """The built image: USER 10001:10001, entrypoint tini -> crawlstream (a running one's PID 1:
    test_by_hand_two_worker_containers...), the HEALTHCHECK of /healthz, no compiler, make,
    package lists or downloads, or pip caches left. Its size goes to the lane's log."""
    config = json.loads(docker("image", "inspect", "--format", "{{json .Config}}", IMAGE))
    assert config["User"] == instruction("USER") == "10001:10001"
    assert config["Entrypoint"] == ["/usr/bin/tini", "--", "crawlstream"]
    assert config["Cmd"] == ["worker"]
    assert "/healthz" in " ".join(config["Healthcheck"]["Test"])
    leftovers = docker(
        "run", "--rm", "--network", "none", "--user", "0", "--entrypoint", "sh", IMAGE, "-c",
        "for tool in gcc cc c++ make; do command -v $tool; done;"
        " find /var/lib/apt/lists /var/cache/apt/archives /root/.cache /home/crawl/.cache"
        " -mindepth 1 -not -name lock -not -name partial 2>/dev/null",
        check=False,
    )  # fmt: skip
    assert leftovers.split() == []
    size = int(docker("image", "inspect", "--format", "{{.Size}}", IMAGE))
    print(f"image {IMAGE}: {size / 1e6:.0f} MB")  # noqa: T201


@lane
def test_the_lane_override_repeats_the_compose_workers_but_for_port_and_name():
    """worker-2 and worker-3 of compose.lane.yml are docker-compose.yml's worker (as the
    override sets it) but for the metrics port and the worker name."""
    services = Cluster("127.0.0.1:1").merged()["services"]
    first = {key: value for key, value in services["worker"].items() if key != "build"}
    for name in ("worker-2", "worker-3"):
        other = dict(services[name])
        for service in (first, other):
            service["environment"] = {
                key: value
                for key, value in service["environment"].items()
                if key not in {"CRAWL_METRICS_PORT", "CRAWL_WORKER_NAME"}
            }
        assert other == first, name


@lane
@pytest.mark.timeout(UP_DEADLINE_S + HEALTHY_DEADLINE_S)
async def test_every_compose_service_comes_up_healthy(cluster: Cluster):
    """The broker healthy, the topics job exited 0, three workers and the gateway healthy by
    their images' health checks, the webhook dispatcher running and ready."""
    topics_job = state(cluster.container("topics"))
    assert (topics_job["Status"], topics_job["ExitCode"]) == ("exited", 0)
    assert health(cluster.container("kafka")) == "healthy"
    services = [*WORKERS, "gateway"]
    containers = {service: cluster.container(service) for service in services}

    def all_healthy() -> bool:
        return all(health(container) == "healthy" for container in containers.values())

    await wait_for(all_healthy, HEALTHY_DEADLINE_S, "the workers and the gateway healthy")
    async with httpx.AsyncClient(timeout=10) as client:
        for port in [*WORKERS.values(), WEBHOOKS_PORT]:
            assert (await client.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200
    assert state(cluster.container("webhooks"))["Running"] is True


BROKER_CHECKS_DEADLINE_S = 60
"""Time for the broker's health check (every 5 s) to have run a few times more."""


@lane
async def test_the_brokers_health_check_starts_a_client_only_until_the_broker_answered(
    cluster: Cluster,
):
    """Once a Kafka client got the broker's answer, the health check only looks at the port:
    docker keeps its last five results, and those after the broker answered say so (a
    `kafka-topics.sh` every 5 s was a JVM, about a CPU second, for the cluster's life)."""
    kafka = cluster.container("kafka")

    port_open = (0, "port open")

    def results() -> list[tuple[int, str]]:
        log = state(kafka).get("Health", {}).get("Log") or []
        return [(entry["ExitCode"], str(entry["Output"]).strip()) for entry in log]

    await wait_for(
        lambda: results()[-2:] == [port_open, port_open],
        BROKER_CHECKS_DEADLINE_S,
        "two health checks of the broker by its port",
    )
    latest = results()
    since = latest.index((0, "answered")) + 1 if (0, "answered") in latest else 0
    assert set(latest[since:]) == {port_open}, latest


@lane
@pytest.mark.timeout(2 * CRAWL_DEADLINE_S)
async def test_a_crawl_completes_and_a_docker_kill_of_a_worker_loses_nothing(
    cluster: Cluster, site: TestSite
):
    """12 requests of 4 slow pages over the three workers; `docker kill` of worker-2 while
    they load: every request ends once, completed, with every page's result."""
    victim = cluster.container("worker-2")
    topics = crawl_topics()
    completed_by = await crawl_with_a_kill(topics, site, "compose", lambda: docker("kill", victim))
    assert state(victim)["ExitCode"] == 137  # SIGKILL: no drain
    assert completed_by & {"worker-1", "worker-3"}  # the survivors finished the crawl


@lane
async def test_a_firecrawl_sdk_scrape_through_the_gateway_container(
    cluster: Cluster, site: TestSite
):
    """`Firecrawl(api_url=...).scrape` against the gateway service gets the page's markdown."""
    document = await asyncio.to_thread(scrape, site.url("/page/3"), GATEWAY)
    assert document.markdown
    assert document.metadata_typed.status_code == 200
    assert document.metadata_typed.source_url == site.url("/page/3")


@lane
@pytest.mark.timeout(2 * CRAWL_DEADLINE_S)
async def test_a_worker_under_the_memory_limit_crawls_pages_of_100_mb_without_oom(
    cluster: Cluster, site: TestSite
):
    """Pages whose scripts each allocate and hold 100 MB, through the workers under the
    compose file's 2 GiB limit: every page ends ok, no container is OOM-killed, and the
    governor works against the container's limit (read from its cgroup)."""
    live = {name: port for name, port in WORKERS.items() if name != "worker-2"}
    urls = [site.url(f"/alloc?mb={ALLOC_MB}&hold=1&i={i}") for i in range(ALLOC_PAGES)]
    requests = {f"alloc-{i}": urls[i * 4 : i * 4 + 4] for i in range(ALLOC_PAGES // 4)}
    async with collecting(crawl_topics()) as collector:
        await produce(crawl_topics(), [request(rid, batch) for rid, batch in requests.items()])
        await collector.wait_until(lambda seen: all_ended(seen, requests), CRAWL_DEADLINE_S)
        assert_nothing_lost(collector, requests)
    for name in live:
        container = cluster.container(name)
        after = state(container)
        restarts = int(docker("inspect", "--format", "{{.RestartCount}}", container))
        assert (after["Running"], after["OOMKilled"], restarts) == (True, False, 0), name
    async with httpx.AsyncClient(timeout=10) as client:
        for port in live.values():
            metrics = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
            assert gauge(metrics, "crawl_memory_limit_bytes") == MEMORY_LIMIT, port


def gauge(metrics: str, name: str) -> float | None:
    """The value of an unlabelled metric in a Prometheus text page (the client writes large
    values as 2.147483648e+09)."""
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    return None


@lane
@pytest.mark.timeout(2 * STOP_DEADLINE_S)
async def test_compose_down_ends_every_container_with_exit_code_0(cluster: Cluster):
    """`down` sends SIGTERM: the workers drain, the gateway and the dispatcher stop, each
    exits 0 (the gateway exited 143 before). Kafka's JVM exits 143 on SIGTERM after its
    controlled shutdown (the official image does the same): 0 or 143, never a SIGKILL."""
    running = {
        service: cluster.container(service)
        for service in ("kafka", "worker", "worker-3", "gateway", "webhooks")
    }
    await asyncio.to_thread(cluster.save_logs)
    deaths = DeathWatch()
    with deaths.watching(), following_logs(cluster, LOGS / "compose-down.log"):
        await asyncio.to_thread(cluster.compose, "down", "--volumes", deadline_s=STOP_DEADLINE_S)
        cluster.is_down = True
    codes = {service: deaths.exit_code(container) for service, container in running.items()}
    expected = dict.fromkeys(running, 0) | {"kafka": codes["kafka"]}
    assert codes == expected
    assert codes["kafka"] in {0, 143}


@contextlib.contextmanager
def following_logs(cluster: Cluster, path: Path) -> Iterator[None]:
    """The services' log lines while the block runs (`down` removes them), into `path`."""
    with path.open("w") as sink:
        follow = subprocess.Popen(
            [COMPOSE, "-p", PROJECT, *cluster.files, "logs", "-f", "--no-color", "--timestamps"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=cluster.env,
            cwd=ROOT,
        )
        try:
            yield
        finally:
            follow.terminate()
            follow.wait(DOCKER_DEADLINE_S)


class DeathWatch:
    """`docker events` of containers dying, with their exit codes (`down` removes them)."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        events = subprocess.Popen(
            ["docker", "events", "--filter", "event=die", "--format", "{{json .}}"],  # noqa: S607
            stdout=subprocess.PIPE,
            text=True,
        )
        reader = threading.Thread(target=self._read, args=(events,), daemon=True)
        reader.start()
        try:
            yield
        finally:
            docker("version")  # an engine round trip: the dies before it are in the stream
            events.terminate()
            events.wait(DOCKER_DEADLINE_S)
            reader.join(DOCKER_DEADLINE_S)
            if events.stdout is not None:
                events.stdout.close()

    def _read(self, events: subprocess.Popen[str]) -> None:
        assert events.stdout is not None
        for line in events.stdout:
            event = json.loads(line)
            self.codes[event["id"]] = int(event["Actor"]["Attributes"]["exitCode"])

    def exit_code(self, container: str) -> int | None:
        return self.codes.get(container)


# --- The image by hand: `docker run --network host` against a broker outside compose ------


@pytest.fixture
async def outside_broker(site: TestSite) -> AsyncIterator[Topics]:
    """A broker started by the project's own code on the loopback, its topics created by
    the image's `topics create`."""
    async with running_broker() as broker:
        topics = Topics(
            bootstrap=broker.bootstrap_servers,
            extra_env={"CRAWL_ALLOWED_HOSTS": f"127.0.0.1:{site.port}"},
        )
        await asyncio.to_thread(
            docker, "run", "--rm", "--network", "host", *env_args(topics.env()),
            IMAGE, "topics", "create",
        )  # fmt: skip
        await wait_for_leaders(topics)
        yield topics


def env_args(env: dict[str, str]) -> list[str]:
    return [argument for name, value in env.items() for argument in ("-e", f"{name}={value}")]


@contextlib.contextmanager
def containers() -> Iterator[list[str]]:
    """Names of containers a test starts; each removed at the end."""
    started: list[str] = []
    try:
        yield started
    finally:
        for name in started:
            docker("rm", "-f", name, check=False)


def run(started: list[str], name: str, env: dict[str, str], *command: str) -> str:
    docker("rm", "-f", name, check=False)
    docker(
        "run", "-d", "--name", name, "--network", "host", "--memory", "2g",
        *env_args(env), IMAGE, *command,
    )  # fmt: skip
    started.append(name)
    return name


@lane
@pytest.mark.timeout(2 * CRAWL_DEADLINE_S)
async def test_by_hand_two_worker_containers_survive_a_docker_kill_of_one(
    outside_broker: Topics, site: TestSite
):
    """`docker run --network host IMAGE` (its default command: worker) twice against the
    outside broker; `docker kill` of one mid-run loses nothing; the other drains on
    `docker stop` and exits 0."""
    topics = outside_broker
    with containers() as started:
        for name in ("lane-hand-1", "lane-hand-2"):
            port = unused_port()
            run(started, name, topics.env(CRAWL_WORKER_NAME=name, CRAWL_METRICS_PORT=str(port)))
            await wait_ready(name, port)
        completed_by = await crawl_with_a_kill(
            topics, site, "hand", lambda: docker("kill", "lane-hand-1")
        )
        assert "lane-hand-2" in completed_by
        init = docker("exec", "lane-hand-2", "cat", "/proc/1/cmdline").split("\0")
        assert init[:4] == ["/usr/bin/tini", "--", "crawlstream", "worker"]
        status = docker("exec", "lane-hand-2", "cat", "/proc/1/status")
        assert "Uid:\t10001\t10001" in status  # the entrypoint runs as the image's user
        docker("stop", "--time", "60", "lane-hand-2", deadline_s=STOP_DEADLINE_S)
        assert state("lane-hand-2")["ExitCode"] == 0


@lane
async def test_by_hand_the_gateway_container_answers_firecrawls_api(
    outside_broker: Topics, site: TestSite
):
    """`docker run --network host IMAGE gateway` with a worker container: the SDK's scrape
    through it works; `docker stop` ends the gateway with exit code 0."""
    topics = outside_broker
    port = unused_port()
    gateway_env = topics.env(CRAWL_GATEWAY_PORT=str(port), CRAWL_GATEWAY_HOST="127.0.0.1")
    with containers() as started:
        metrics = unused_port()
        worker_env = topics.env(CRAWL_WORKER_NAME="lane-hand-w", CRAWL_METRICS_PORT=str(metrics))
        run(started, "lane-hand-worker", worker_env)
        run(started, "lane-hand-gateway", gateway_env, "gateway")
        await wait_ready("lane-hand-worker", metrics)
        await wait_ready("lane-hand-gateway", port)
        document = await asyncio.to_thread(scrape, site.url("/page/3"), f"http://127.0.0.1:{port}")
        assert document.markdown
        assert document.metadata_typed.source_url == site.url("/page/3")
        docker("stop", "lane-hand-gateway", deadline_s=STOP_DEADLINE_S)
        assert state("lane-hand-gateway")["ExitCode"] == 0
