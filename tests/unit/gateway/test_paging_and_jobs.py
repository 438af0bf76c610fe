"""The cursor and the job view's fold (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.contracts import EventType, ProgressEvent
from service.gateway.errors import ApiError
from service.gateway.jobs import MARKER_KEY, JobMarker, JobView
from service.gateway.paging import Cursor
from service.sealing.marker_auth import sealed

MARKER = JobMarker(
    kind="crawl",
    url="https://example.com/",
    tenant="acme",
    created_at=datetime(2026, 12, 1, tzinfo=UTC),
    results_partition=2,
    results_offset=40,
    formats=("markdown",),
)


def event(run: str, seq: int, kind: EventType, succeeded: int = 0, total: int = 3):
    return ProgressEvent(
        request_id="job-1",
        run_id=run,
        seq=seq,
        type=kind,
        total=total,
        succeeded=succeeded,
        failed=0,
        at=datetime(2026, 12, 1, tzinfo=UTC),
        worker="w1",
        request_metadata={MARKER_KEY: sealed(b"", "job-1", MARKER.model_dump(mode="json"))},
    )


def test_a_cursor_round_trips_and_equal_positions_give_equal_tokens():
    cursor = Cursor(offset=1234, returned=100)
    assert Cursor.parse(cursor.token()) == cursor
    assert cursor.token() == Cursor(offset=1234, returned=100).token()


@pytest.mark.parametrize("token", ["", "garbage", Cursor(offset=1).token()[:-1] + "!"])
def test_a_token_that_is_not_a_cursor_is_a_400(token):
    with pytest.raises(ApiError) as raised:
        Cursor.parse(token)
    assert raised.value.status == 400


def test_a_job_without_events_is_scraping_zero_of_zero_and_an_unknown_one_is_none():
    view = JobView()
    view.submitted("job-1", MARKER)
    status = view.status("job-1")
    assert status is not None
    assert (status.state, status.total, status.completed) == ("scraping", 0, 0)
    assert view.status("job-2") is None


def test_the_fold_follows_a_run_and_a_redelivery_but_not_a_late_event_of_the_old_run():
    view = JobView()
    view.submitted("job-1", MARKER)
    view.progressed(event("r1", 0, EventType.ACCEPTED))
    view.progressed(event("r1", 1, EventType.PAGE_SUCCEEDED, succeeded=1))
    view.progressed(event("r2", 0, EventType.ACCEPTED))
    view.progressed(event("r1", 2, EventType.PAGE_SUCCEEDED, succeeded=2))
    status = view.status("job-1")
    assert status is not None
    assert status.completed == 0
    view.progressed(event("r2", 1, EventType.COMPLETED, succeeded=3))
    status = view.status("job-1")
    assert status is not None
    assert (status.state, status.completed, status.total) == ("completed", 3, 3)
    assert view.active() == []


def test_events_before_the_request_record_are_kept_and_terminal_types_map_to_firecrawl():
    view = JobView()
    view.progressed(event("r1", 0, EventType.ACCEPTED))
    view.progressed(event("r1", 1, EventType.EXPIRED))
    view.submitted("job-1", MARKER)  # the view's secret: b"" (JobView's default)
    status = view.status("job-1")
    assert status is not None
    assert status.state == "failed"


def test_active_jobs_are_per_tenant_and_kind():
    view = JobView()
    view.submitted("job-1", MARKER)
    view.submitted("job-2", MARKER.model_copy(update={"tenant": "other"}))
    view.submitted("job-3", MARKER.model_copy(update={"kind": "batch"}))
    assert [s.id for s in view.active(tenant="acme", kind="crawl")] == ["job-1"]
    assert len(view.active(tenant="acme")) == 2
