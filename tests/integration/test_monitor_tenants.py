"""Monitors of a keyed gateway's tenants against a real broker, gateways, coordinators and
the webhook dispatcher: their check requests carry the gateway's signature (a producer can
forge neither a check nor a tenant's monitor), their webhooks are signed with the tenant's
own secret, and ticks neither overlap a running check nor pass the tenant's limit."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from firecrawl import Firecrawl
from firecrawl.v2.utils.error_handler import FirecrawlError
from gateway import DispatcherProcess
from harness import send
from waiting import until
from webhook_receiver import receiving

from service.contracts import CrawlRequest, dump_request, utc_now
from service.contracts_monitors import MonitorRecord, MonitorTarget, ScheduleSpec
from service.webhooks import verify

if TYPE_CHECKING:
    from pathlib import Path

    from firecrawl.v2.types import MonitorCheck
    from harness import Topics
    from testsite import TestSite
    from webhook_receiver import Delivery

pytestmark = pytest.mark.integration

ACME_KEY = "fc-acme-test-key"

GATEWAY_SECRET = "gateway-secret-of-this-test"  # noqa: S105 - a test key

FAST = {"CRAWL_MONITOR_MIN_INTERVAL": "1"}
"""A minimum interval lowered to 1 s (gateway and coordinator) so that `every 4 seconds` is
allowed: several ticks in a short test."""

DEADLINE_S = 90


def keyed(tmp_path: Path, **acme: Any) -> dict[str, str]:
    """The environment of a gateway, worker or dispatcher of this test: one keys file (acme,
    with `acme`'s limits and secret) and one gateway secret for all."""
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [{"key": ACME_KEY, "tenant": "acme", **acme}]}))
    return {
        "CRAWL_GATEWAY_KEYS_FILE": str(keys),
        "CRAWL_GATEWAY_SECRET": GATEWAY_SECRET,
        **FAST,
    }


async def requests_of(topics: Topics) -> list[tuple[str, dict[str, Any]]]:
    """(request id, metadata) of every record of the requests topic now."""
    consumer = AIOKafkaConsumer(bootstrap_servers=topics.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topics.requests, p) for p in range(4)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        found: list[tuple[str, dict[str, Any]]] = []
        async with asyncio.timeout(30):
            while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    found += [
                        (r.key.decode(), json.loads(r.value).get("metadata") or {}) for r in records
                    ]
        return found
    finally:
        await consumer.stop()


async def checks_of(app: Firecrawl, monitor_id: str, count: int) -> list[MonitorCheck]:
    """The monitor's checks through the SDK, once there are `count`."""
    async with asyncio.timeout(DEADLINE_S):
        while True:
            checks = await asyncio.to_thread(app.list_monitor_checks, monitor_id)
            if len(checks) >= count:
                return checks
            await asyncio.sleep(0.5)


def forged_request(request_id: str, marker: dict[str, Any], site: TestSite) -> bytes:
    request = CrawlRequest(
        request_id=request_id, urls=[site.url("/page/2")], metadata={"monitor": marker}
    )
    return dump_request(request)


async def test_a_producer_forges_neither_a_tenants_check_nor_its_monitor(
    topics: Topics, site: TestSite, start_worker, start_gateway, tmp_path
):
    """A tenant's scheduled checks, produced by a coordinator, are listed as its monitor's
    checks. A request a producer writes naming the monitor (its own marker, or a real
    check's marker copied onto another request id) adds no check and no request to one; a
    monitor record a producer writes naming the tenant is not the tenant's (not listed) and
    never fires."""
    env = keyed(tmp_path)
    worker = await start_worker("coordinator", CRAWL_ROLE="coordinator", **env)
    gateway = await start_gateway(**env)
    acme = Firecrawl(api_key=ACME_KEY, api_url=gateway.url)
    target = [{"type": "scrape", "urls": [site.url("/page/1")]}]
    monitor = await asyncio.to_thread(
        acme.create_monitor, "acme's", {"text": "every 4 seconds"}, target
    )
    now = utc_now()
    forged_monitor = MonitorRecord(
        id="forged-m",
        name="forged",
        tenant="acme",
        schedule=ScheduleSpec(text="every 4 seconds"),
        targets=(MonitorTarget(id="t0", type="scrape", urls=(site.url("/page/2"),)),),
        tag="monitor:forged-m",
        created_at=now,
        updated_at=now,
        schedule_since=now,
    )
    own = {"monitor_id": monitor.id, "check_id": "forged", "target_id": "t0"}
    await send(
        topics,
        [
            (topics.monitors, "forged-m", forged_monitor.model_dump_json().encode()),
            (
                topics.requests,
                "forged.0",
                forged_request("forged.0", own | {"trigger": "manual", "tenant": "acme"}, site),
            ),
        ],
    )
    [first] = await checks_of(acme, monitor.id, 1)
    [(_, real)] = [(rid, m) for rid, m in await requests_of(topics) if rid == f"{first.id}.0"]
    await send(
        topics, [(topics.requests, "copied.0", forged_request("copied.0", real["monitor"], site))]
    )
    checks = await checks_of(acme, monitor.id, 3)  # two more ticks, read after the copies

    assert {c.trigger for c in checks} == {"scheduled"}
    assert "forged" not in {c.id for c in checks}
    for check in checks:  # no fetcher: the first check runs on, later ticks are skipped
        requests = [] if check.status == "skipped_overlap" else [[f"{check.id}.0"]]
        assert [r.expected_jobs for r in check.target_results or []] == requests
    assert [m.id for m in await asyncio.to_thread(acme.list_monitors)] == [monitor.id]
    fired = {e["monitor_id"] for e in worker.events() if e.get("event") == "monitor.fired"}
    assert fired == {monitor.id}
    unusable = {e["monitor_id"] for e in worker.events() if e.get("event") == "monitor.unusable"}
    assert "forged-m" in unusable


ACME_WEBHOOK_SECRET = "acme-webhook-secret-0123"  # noqa: S105 - a test key

SHARED_WEBHOOK_SECRET = "shared-webhook-secret-01"  # noqa: S105 - a test key


async def test_a_tenants_monitor_webhooks_are_signed_with_its_own_secret(
    topics: Topics, site: TestSite, start_worker, start_gateway, tmp_path
):
    """A keyed gateway whose tenant has a `webhook_secret`: the events of its monitor's
    check (`monitor.page`, `monitor.check.completed`) are signed with that secret, not the
    shared `CRAWL_WEBHOOK_SECRET`; the monitor shows its webhook's URL, not a sealed token."""
    async with receiving() as receiver:
        allowed = f"127.0.0.1:{site.port},{receiver.target}"
        env = keyed(tmp_path, webhook_secret=ACME_WEBHOOK_SECRET) | {
            "CRAWL_ALLOWED_HOSTS": allowed,
            "CRAWL_WEBHOOK_SECRET": SHARED_WEBHOOK_SECRET,
        }
        await start_worker("worker", **env)
        gateway = await start_gateway(**env)
        dispatcher = DispatcherProcess(topics.env(**env), tmp_path / "d.log", "d")
        await dispatcher.start()
        try:
            acme = Firecrawl(api_key=ACME_KEY, api_url=gateway.url)
            monitor = await asyncio.to_thread(
                acme.create_monitor,
                "acme's",
                {"cron": "0 0 1 1 *"},  # yearly: only the check run by hand here
                [{"type": "scrape", "urls": [site.url("/page/1")]}],
                webhook={"url": receiver.url(), "metadata": {"team": "acme"}},
            )
            assert monitor.webhook is not None
            assert monitor.webhook["url"] == receiver.url()
            assert "sealed" not in monitor.webhook
            check = await asyncio.to_thread(acme.run_monitor, monitor.id)

            def sent(kind: str) -> list[Delivery]:
                return [d for d in receiver.of(check.id) if d.type == kind]

            await until(lambda: sent("monitor.check.completed"), DEADLINE_S, every_s=0.2)
        finally:
            await dispatcher.close()
    deliveries = sent("monitor.page") + sent("monitor.check.completed")
    assert len(sent("monitor.page")) == 1
    for delivery in deliveries:
        signature = delivery.headers["X-Firecrawl-Signature"]
        assert verify(ACME_WEBHOOK_SECRET, delivery.raw, signature)
        assert not verify(SHARED_WEBHOOK_SECRET, delivery.raw, signature)


async def test_a_tick_while_the_previous_check_runs_is_skipped_and_a_check_is_a_job(
    topics: Topics, site: TestSite, start_worker, start_gateway, tmp_path
):
    """`every 4 seconds` with a coordinator and no fetcher, so the first check never ends:
    each later tick is listed as a `skipped_overlap` check without requests, and the
    requests topic holds the first check's request only. The running check counts as one
    of the tenant's jobs: with `max_concurrent_jobs` 1, running the monitor by hand is a
    429."""
    env = keyed(tmp_path, max_concurrent_jobs=1)
    await start_worker("coordinator", CRAWL_ROLE="coordinator", **env)
    gateway = await start_gateway(**env)
    acme = Firecrawl(api_key=ACME_KEY, api_url=gateway.url)
    target = [{"type": "scrape", "urls": [site.url("/page/1")]}]
    monitor = await asyncio.to_thread(
        acme.create_monitor, "acme's", {"text": "every 4 seconds"}, target
    )
    checks = await checks_of(acme, monitor.id, 3)

    first, *later = sorted(checks, key=lambda c: c.scheduled_for or "")
    assert first.status in {"queued", "running"}
    assert [c.status for c in later] == ["skipped_overlap"] * len(later)
    assert all(not c.target_results for c in later)
    assert len({c.scheduled_for for c in checks}) == len(checks)
    produced = {rid for rid, metadata in await requests_of(topics) if "monitor" in metadata}
    assert produced == {f"{first.id}.0"}
    with pytest.raises(FirecrawlError) as raised:
        await asyncio.to_thread(acme.run_monitor, monitor.id)
    assert raised.value.status_code == 429
