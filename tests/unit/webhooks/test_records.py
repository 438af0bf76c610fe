"""Every progress record the dispatcher cannot use is counted by reason, logged once and
skipped, never raised (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from structlog.testing import capture_logs

from service.contracts import EventType, ProgressEvent
from service.contracts_webhook import WebhookConfig
from service.sealing.marker_auth import sealed
from service.sealing.seal import derive
from service.sealing.targets import Sealer
from service.webhooks.metrics import WebhookMetrics
from service.webhooks.records import Records

KEY = derive(b"the seal key of this deployment")
MARKER_SECRET = b"the gateway's marker secret"


def records(metrics: WebhookMetrics) -> Records:
    return Records(
        sealer=Sealer(KEY),
        metrics=metrics,
        max_age=timedelta(days=1),
        results_partitions=lambda: [0, 1, 2, 3],
        expired=lambda _: None,
        marker_secret=MARKER_SECRET,
    )


def record(value: bytes, offset: int = 7) -> SimpleNamespace:
    return SimpleNamespace(value=value, partition=0, offset=offset)


def event(metadata: dict) -> bytes:
    return (
        ProgressEvent(
            request_id="job-1",
            run_id="run-1",
            seq=0,
            type=EventType.ACCEPTED,
            total=1,
            succeeded=0,
            failed=0,
            at=datetime.now(UTC),
            worker="w1",
            request_metadata=metadata,
        )
        .model_dump_json()
        .encode()
    )


def marker(results_offset: int, results_partition: int = 0, *, signed: bool = True) -> dict:
    """A gateway marker of job-1 (signed as the gateway signs it, unless not `signed`)."""
    body = {
        "kind": "crawl",
        "url": "https://example.com/",
        "tenant": "tenant-b",
        "created_at": "2026-12-02T00:00:00Z",
        "results_partition": results_partition,
        "results_offset": results_offset,
        "formats": ["markdown"],
    }
    return sealed(MARKER_SECRET, "job-1", body) if signed else body


HOOK = "https://hooks.example/in"
CHECK = {"monitor_id": "m", "check_id": "c", "target_id": "t0", "trigger": "manual"}
ACME_CHECK = sealed(MARKER_SECRET, "job-1", CHECK | {"tenant": "acme"})
MONITOR_SEAL = Sealer(KEY).record("monitor:m", "acme", WebhookConfig(url=HOOK))
OTHER_KEY_SEAL = Sealer(derive(b"another deployment")).record("job-1", "t", WebhookConfig(url=HOOK))
ANOTHER_JOBS_SEAL = Sealer(KEY).record("job-2", "t", WebhookConfig(url=HOOK))


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"\xff not json", "invalid"),
        (b'{"schema_version": 1}', "invalid"),
        (event({"webhook": {"url": HOOK, "unknown": 1}}), "invalid_webhook"),
        (event({"webhook": HOOK, "firecrawl": marker(-1)}), "marker"),
        (event({"webhook": HOOK, "firecrawl": marker(2**64)}), "marker"),
        (event({"webhook": HOOK, "firecrawl": marker(0, results_partition=99)}), "marker"),
        (event({"webhook": HOOK, "firecrawl": {"kind": "nope"}}), "marker"),
        (event({"webhook": HOOK, "firecrawl": marker(5, signed=False)}), "marker"),
        (event({"webhook": OTHER_KEY_SEAL}), "sealed"),
        (event({"webhook": ANOTHER_JOBS_SEAL}), "sealed"),
        (event({"webhook": {"sealed": "v1.AAAA"}}), "sealed"),
        (event({"webhook": HOOK, "monitor": CHECK | {"tenant": "acme"}}), "marker"),
        (event({"webhook": MONITOR_SEAL, "monitor": sealed(b"?", "job-1", CHECK)}), "marker"),
        (
            event({"webhook": MONITOR_SEAL, "monitor": sealed(MARKER_SECRET, "job-9", CHECK)}),
            "marker",
        ),
        (event({"webhook": MONITOR_SEAL}), "sealed"),  # a monitor's seal on no check
        (
            event(
                {
                    "webhook": MONITOR_SEAL,
                    "monitor": sealed(MARKER_SECRET, "job-1", CHECK | {"monitor_id": "m2"}),
                }
            ),
            "sealed",
        ),
        (
            event(
                {
                    "webhook": MONITOR_SEAL,
                    "monitor": sealed(MARKER_SECRET, "job-1", CHECK | {"tenant": "globex"}),
                }
            ),
            "sealed",
        ),
    ],
)
def test_a_record_it_cannot_use_is_counted_logged_once_and_skipped(value, reason):
    metrics = WebhookMetrics()
    with capture_logs() as logs:
        planned = records(metrics).plan(record(value))
    assert planned is None
    skipped = [e for e in logs if e["event"] == "webhooks.skipped"]
    assert [e["reason"] for e in skipped] == [reason]
    sample = metrics.registry.get_sample_value(
        "crawl_webhook_records_skipped_total", {"reason": reason}
    )
    assert sample == 1


def test_a_usable_record_names_its_receiver_and_its_hook():
    sealed = Sealer(KEY).record("job-1", "tenant-b", WebhookConfig(url=HOOK + "?token=x"))
    planned = records(WebhookMetrics()).plan(
        record(event({"webhook": sealed, "firecrawl": marker(5)}))
    )
    assert planned is not None
    assert planned.target.origin == "https://hooks.example:443"
    assert planned.target.tenant == "tenant-b"
    assert planned.hook == "started"


def test_a_checks_sealed_webhook_is_its_monitors_tenants():
    """An authentic check of monitor m opens m's sealed webhook, whose tenant signs it."""
    planned = records(WebhookMetrics()).plan(
        record(event({"webhook": MONITOR_SEAL, "monitor": ACME_CHECK}))
    )
    assert planned is not None
    assert planned.check is not None
    assert planned.target.tenant == "acme"
    assert planned.target.url == HOOK
