"""Firecrawl's monitor bodies as records, the gateway's fold of monitors and checks, and the
`monitor.*` webhook bodies: pure, no broker."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from service.contracts import EventType, PageChange, PageResult, ProgressEvent
from service.contracts_monitors import (
    MonitorCheckMarker,
    MonitorRecord,
    MonitorTarget,
    MonitorTick,
    ScheduleSpec,
    SkippedCheck,
)
from service.gateway import monitor_bodies as bodies
from service.gateway.errors import ApiError
from service.gateway.mapping import Limits
from service.gateway.monitor_view import Check, CheckRequest, MonitorView
from service.monitors import Summary, check_requests
from service.monitors.signing import authentic_marker, signed_record, signed_skip
from service.sealing.marker_auth import sealed
from service.webhooks import monitor_events

LIMITS = Limits(max_urls=100, max_crawl_pages=10_000, max_pages_per_host=4)
NOW = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
MINUTE = timedelta(seconds=60)


def refusal(call, *args, **kwargs) -> ApiError:
    with pytest.raises(ApiError) as raised:
        call(*args, **kwargs)
    return raised.value


def test_targets_map_to_scrape_and_crawl_requests() -> None:
    """`scrape` takes `urls` and `scrapeOptions` as a batch does; `crawl` takes `url` and
    `crawlOptions` as a crawl does; a `changeTracking`-only format list is left out (checks
    always track)."""
    scrape, crawl = bodies.targets_of(
        [
            {
                "type": "scrape",
                "urls": ["https://example.com/a"],
                "scrapeOptions": {"formats": [{"type": "changeTracking", "modes": ["git-diff"]}]},
            },
            {
                "type": "crawl",
                "id": "docs",
                "url": "https://example.com/docs/",
                "crawlOptions": {"limit": 7},
            },
        ],
        limits=LIMITS,
    )
    assert (scrape.id, scrape.type, scrape.urls) == ("t0", "scrape", ("https://example.com/a",))
    assert (crawl.id, crawl.type, crawl.urls) == ("docs", "crawl", ("https://example.com/docs/",))
    assert crawl.crawl is not None
    assert crawl.crawl.max_pages == 7


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"goal": "tell me"}, "goal"),
        ({"judgeEnabled": True}, "judgeEnabled"),
        ({"notification": {"email": {"enabled": True}}}, "notification.email"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_what_has_no_counterpart_is_refused_by_name(body: dict, named: str) -> None:
    assert named in refusal(bodies.refuse_unsupported, body).message


def test_schedules_are_checked_against_the_minimum_interval() -> None:
    spec = bodies.schedule_of({"text": "every 5 minutes"}, minimum=MINUTE, now=NOW)
    assert spec.text == "every 5 minutes"
    too_fast = refusal(bodies.schedule_of, {"text": "every 5 seconds"}, minimum=MINUTE, now=NOW)
    assert "CRAWL_MONITOR_MIN_INTERVAL" in too_fast.message
    assert (
        "schedule" in refusal(bodies.schedule_of, {"cron": "bad"}, minimum=MINUTE, now=NOW).message
    )


def test_search_targets_and_webhook_headers_are_refused() -> None:
    search = refusal(bodies.targets_of, [{"type": "search", "queries": ["x"]}], limits=LIMITS)
    assert "search" in search.message
    headers = refusal(bodies.webhook_of, {"url": "https://h.example/", "headers": {"A": "b"}})
    assert "webhook.headers" in headers.message
    assert bodies.webhook_of({"url": "https://h.example/"}) == {
        "url": "https://h.example/",
        "metadata": {},
        "events": ["monitor.page", "monitor.check.completed"],
    }


def event(request_id: str, kind: EventType, seq: int) -> ProgressEvent:
    return ProgressEvent.model_validate(
        {
            "request_id": request_id,
            "run_id": "r",
            "seq": seq,
            "type": kind,
            "at": NOW,
            "worker": "w",
            "total": 1,
            "succeeded": 0,
            "failed": 0,
        }
    )


SECRET = b"gateway-marker-key"


def test_a_check_marker_or_a_tenants_record_not_signed_with_the_gateways_key_is_ignored() -> None:
    """A producer's request naming a monitor adds no check to it, nor does a marker signed
    for another request id; a record naming a tenant counts only when the gateway signed
    it, and a signed record changed by a producer is no longer that tenant's."""
    view = MonitorView(secret=SECRET)
    marker = {"monitor_id": "m", "check_id": "c", "target_id": "t0", "trigger": "manual"}
    view.request("c.0", {"monitor": marker}, NOW)
    view.request("c.1", {"monitor": sealed(SECRET, "c.0", marker)}, NOW)
    view.request("c.2", {"monitor": sealed(b"another key", "c.2", marker)}, NOW)
    assert view.checks == {}
    record = signed_record(SECRET, tenant_record())
    view.monitor_record(b"m", record.model_dump_json().encode())
    assert view.of_tenant("acme", open_gateway=False) == [record]
    moved = record.model_copy(update={"targets": tenant_record("https://evil.example/").targets})
    view.monitor_record(b"m", moved.model_dump_json().encode())
    assert view.of_tenant("acme", open_gateway=False) == []
    view.monitor_record(b"m", tenant_record().model_dump_json().encode())
    assert view.monitors == {}


def tenant_record(url: str = "https://e.example/") -> MonitorRecord:
    return MonitorRecord(
        id="m",
        name="m",
        tenant="acme",
        schedule=ScheduleSpec(text="hourly"),
        targets=(MonitorTarget(id="t0", type="scrape", urls=(url,)),),
        tag="monitor:m",
        created_at=NOW,
        updated_at=NOW,
        schedule_since=NOW,
    )


def test_the_view_folds_check_requests_and_their_runs() -> None:
    """A check's state follows its requests' runs: queued, running, then completed (or
    partial when one target failed); a copy of a request record counts once."""
    view = MonitorView(secret=SECRET)
    marker = {"monitor_id": "m", "check_id": "c", "target_id": "t0", "trigger": "manual"}
    view.request("c.0", {"monitor": sealed(SECRET, "c.0", marker)}, NOW)
    view.request("c.1", {"monitor": sealed(SECRET, "c.1", marker | {"target_id": "t1"})}, NOW)
    view.request("c.0", {"monitor": sealed(SECRET, "c.0", marker)}, NOW)
    view.request("other", {"monitor": sealed(SECRET, "other", {"broken": True})}, NOW)
    check = view.checks["c"]
    assert (check.state, len(check.requests)) == ("queued", 2)
    view.progressed(event("c.0", EventType.ACCEPTED, 0))
    assert check.state == "running"
    view.progressed(event("c.0", EventType.COMPLETED, 1))
    view.progressed(event("c.1", EventType.FAILED, 0))
    assert check.state == "partial"
    assert check.terminal
    assert view.checks_of("m") == [check]


def result(status: str | None) -> PageResult:
    return PageResult.model_validate(
        {
            "request_id": "c.0",
            "result_id": "x",
            "run_id": "r",
            "url": "https://e.example/",
            "final_url": "https://e.example/",
            "ok": True,
            "status_code": 200,
            "fetched_at": NOW,
            "rendered_by": "http",
            "elapsed_ms": 1,
            "worker": "w",
            "change_tracking": None if status is None else PageChange(status=status, diff="-a\n+b"),
        }
    )


def test_monitor_webhook_bodies() -> None:
    """`monitor.page` carries the page's status and diff; `monitor.check.completed` the
    summary; both name the monitor and the check and echo the webhook's metadata."""
    page = event("c.0", EventType.PAGE_SUCCEEDED, 1).model_copy(update={"result_id": "x"})
    page = page.model_copy(
        update={
            "request_metadata": {
                "monitor": {
                    "monitor_id": "m",
                    "check_id": "c",
                    "target_id": "t0",
                    "trigger": "scheduled",
                }
            }
        }
    )
    marker = MonitorCheckMarker.model_validate(page.request_metadata["monitor"])

    @dataclass
    class Config:
        events: tuple[str, ...] = ("page", "completed")
        metadata: dict[str, str] = field(default_factory=lambda: {"team": "x"})

    assert monitor_events.monitor_hook(page, Config()) == "page"
    sent = monitor_events.page_event(page, marker, result("changed"), Config())
    assert sent.body["type"] == "monitor.page"
    assert sent.body["data"] == [
        {
            "targetId": "t0",
            "url": "https://e.example/",
            "status": "changed",
            "statusCode": 200,
            "error": None,
            "diff": {"text": "-a\n+b"},
        }
    ]
    assert (sent.body["monitorId"], sent.body["checkId"], sent.body["metadata"]) == (
        "m",
        "c",
        {"team": "x"},
    )
    done = monitor_events.check_event(marker, "completed", Summary(new=2), Config())
    assert done.body["type"] == "monitor.check.completed"
    assert done.body["eventId"] == "c:completed"
    [data] = done.body["data"]
    assert (data["checkId"], data["monitorId"], data["status"]) == ("c", "m", "completed")
    assert data["summary"]["totalPages"] == 2
    assert done.body["success"]


def test_a_check_ends_once_every_request_of_it_has_ended() -> None:
    """A check of several requests has no status while one runs; then `completed` when
    each completed, `failed` when each failed, `partial` otherwise. A marker naming no parts
    (an older one) is a check of its own request."""
    ended, failed = EventType.COMPLETED, EventType.FAILED
    assert monitor_events.check_status({"c.0": ended, "c.1": None}) is None
    assert monitor_events.check_status({"c.0": ended, "c.1": ended}) == "completed"
    assert monitor_events.check_status({"c.0": failed, "c.1": EventType.EXPIRED}) == "failed"
    assert monitor_events.check_status({"c.0": ended, "c.1": failed}) == "partial"
    end = event("c.0", EventType.COMPLETED, 2)
    marker = MonitorCheckMarker(
        monitor_id="m", check_id="c", target_id="t0", trigger="manual", results_offset=7
    )
    [part] = monitor_events.parts_of(marker, end)
    assert (part.request_id, part.results_offset) == ("c.0", 7)


def test_each_request_of_a_check_names_every_request_of_it() -> None:
    """The webhook dispatcher finds the check's other requests in any one's marker."""
    now = datetime(2026, 12, 3, tzinfo=UTC)
    record = MonitorRecord(
        id="m",
        name="m",
        schedule=ScheduleSpec(text="hourly"),
        targets=tuple(
            MonitorTarget(id=f"t{i}", type="scrape", urls=(f"https://e.example/{i}",))
            for i in range(3)
        ),
        tag="monitor:m",
        created_at=now,
        updated_at=now,
        schedule_since=now,
    )
    requests = check_requests(
        record,
        "c",
        trigger="scheduled",
        scheduled_for=now,
        results_offsets={"c.0": 5, "c.2": 9},
        progress_offsets={"c.2": 4},
        only={"t0", "t2"},
        secret=SECRET,
    )
    for request in requests:
        marker = authentic_marker(SECRET, request.request_id, request.metadata, "monitor")
        assert marker is not None
        assert [(p.request_id, p.results_offset, p.progress_offset) for p in marker.parts] == [
            ("c.0", 5, 0),
            ("c.2", 9, 4),
        ]


def test_skipped_ticks_are_checks_and_running_checks_count_as_jobs() -> None:
    """A tick record's skipped ticks signed by its owner are `skipped_overlap` checks (a
    forged one is not); a tenant's check counts as one of its jobs until it ends."""
    view = MonitorView(secret=SECRET)
    skip = SkippedCheck(monitor_id="m", check_id="s1", scheduled_for=NOW, at=NOW, tenant="acme")
    forged = skip.model_copy(update={"check_id": "s2"})
    tick = MonitorTick(
        monitor_id="m",
        scheduled_for=NOW,
        check_id="c",
        requests=(),
        fired_at=NOW,
        skipped=(signed_skip(SECRET, skip), forged),
    )
    view.tick_record(tick.model_dump_json().encode())
    assert set(view.checks) == {"s1"}
    assert (view.checks["s1"].state, view.checks["s1"].terminal) == ("skipped_overlap", True)
    marker = {"monitor_id": "m", "check_id": "c", "target_id": "t0", "trigger": "scheduled"}
    view.request("c.0", {"monitor": sealed(SECRET, "c.0", marker | {"tenant": "acme"})}, NOW)
    assert (view.running_checks("acme"), view.running_checks("globex")) == (1, 0)
    view.progressed(event("c.0", EventType.COMPLETED, 1))
    assert view.running_checks("acme") == 0


def test_a_check_read_while_it_ends_is_answered_as_it_was_when_the_read_began() -> None:
    """A check's pages are read after its snapshot is taken: a request that ends during the
    read leaves the snapshot running, so its answer never says `completed` with pages read
    before the last of them arrived, and an unfinished summary is never kept."""
    check = Check(id="c", monitor_id="m", trigger="manual", scheduled_for=None, created_at=NOW)
    check.requests["c.0"] = CheckRequest(request_id="c.0", target_id="t0", results_offset=0)
    check.requests["c.0"].state = "running"
    snapshot = check.snapshot()
    check.requests["c.0"].state = "completed"
    check.requests["c.0"].finished_at = NOW
    assert (check.state, check.terminal) == ("completed", True)
    assert (snapshot.state, snapshot.terminal, snapshot.finished_at) == ("running", False, None)
    assert check.snapshot().state == "completed"
