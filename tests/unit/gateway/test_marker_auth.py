"""The gateway's signed job marker, and the view's fold of forged and rejected records (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.contracts import EventType, ProgressEvent
from service.gateway.errors import ApiError
from service.gateway.jobs import MARKER_KEY, JobMarker, JobView
from service.gateway.paging import Cursor
from service.sealing.marker_auth import sealed, sign_marker, verify_marker

SECRET = b"gateway-secret"
MARKER = JobMarker(
    kind="crawl",
    url="https://example.com/",
    tenant="tenant-b",
    created_at=datetime(2026, 12, 1, tzinfo=UTC),
    formats=("markdown",),
).model_dump(mode="json")


def event(request_id: str, kind: EventType, metadata: dict[str, object]) -> ProgressEvent:
    return ProgressEvent(
        request_id=request_id,
        run_id="r1",
        seq=0 if kind == EventType.ACCEPTED else 1,
        type=kind,
        total=1,
        succeeded=0,
        failed=0,
        at=datetime(2026, 12, 1, tzinfo=UTC),
        worker="w1",
        request_metadata=metadata,  # type: ignore[arg-type]
    )


def test_a_signature_holds_for_its_request_and_marker_only():
    signature = sign_marker(SECRET, "job-1", MARKER)
    assert verify_marker(SECRET, "job-1", MARKER, signature)
    assert not verify_marker(SECRET, "job-2", MARKER, signature)
    assert not verify_marker(SECRET, "job-1", MARKER | {"tenant": "tenant-a"}, signature)
    assert not verify_marker(b"other", "job-1", MARKER, signature)
    assert not verify_marker(SECRET, "job-1", MARKER, None)


def test_a_forged_or_copied_marker_makes_no_job_and_counts_nothing():
    view = JobView(secret=SECRET)
    forged = MARKER | {"sig": "0" * 64}
    copied = sealed(SECRET, "job-1", MARKER)
    for request_id, raw in (("job-9", forged), ("job-10", copied)):
        assert JobMarker.authentic(SECRET, request_id, {MARKER_KEY: raw}) is None
        view.progressed(event(request_id, EventType.PAGE_SUCCEEDED, {MARKER_KEY: raw}))
    assert view.status("job-9") is None
    assert view.active(tenant="tenant-b") == []
    assert view.recent_pages("tenant-b") == []


def test_a_rejected_job_ends_failed_also_when_its_event_comes_first():
    view = JobView(secret=SECRET)
    view.progressed(event("job-1", EventType.REJECTED, {}))
    view.submitted("job-1", JobMarker.model_validate(MARKER))
    status = view.status("job-1")
    assert status is not None
    assert status.state == "failed"
    assert view.active(tenant="tenant-b") == []


@pytest.mark.parametrize("offset", [2**63, 2**64, 10**30])
def test_a_cursor_past_a_kafka_offset_is_a_400(offset):
    with pytest.raises(ApiError) as raised:
        Cursor.parse(Cursor(offset=offset).token())
    assert raised.value.status == 400


def test_an_ended_scrape_leaves_the_view_whichever_record_comes_first():
    """A synchronous scrape counts while it runs, then is forgotten: the view does not grow
    with every scrape, and a request record read after the end does not revive it."""
    view = JobView(secret=SECRET)
    scrape = JobMarker.model_validate(MARKER | {"kind": "scrape"})
    metadata = {MARKER_KEY: sealed(SECRET, "s-1", scrape.model_dump(mode="json"))}
    view.submitted("s-1", scrape)
    assert len(view.active(tenant="tenant-b")) == 1
    view.progressed(event("s-1", EventType.COMPLETED, metadata))
    assert view.status("s-1") is None
    metadata = {MARKER_KEY: sealed(SECRET, "s-2", scrape.model_dump(mode="json"))}
    view.progressed(event("s-2", EventType.COMPLETED, metadata))
    view.submitted("s-2", scrape)
    assert view.active(tenant="tenant-b") == []
    assert len(view) == 0
