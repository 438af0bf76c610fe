"""The map request_id -> runs in progress that a cancel goes through."""

from __future__ import annotations

from service.contracts import utc_now
from service.control import ActiveRuns, Cancel


class FakeRun:
    def __init__(self) -> None:
        self.cancels: list[Cancel] = []

    def cancel(self, cancel: Cancel) -> None:
        self.cancels.append(cancel)


def _cancel(request_id: str) -> Cancel:
    return Cancel(request_id=request_id, reason=None, at=utc_now())


def test_a_cancel_reaches_every_run_of_its_request_and_no_other():
    """Two submissions of one request_id both stop; a run of another request does not."""
    active = ActiveRuns()
    first, second, other = FakeRun(), FakeRun(), FakeRun()
    with active.running("r", first), active.running("r", second), active.running("x", other):
        assert active.cancel(_cancel("r")) == 2
    assert len(first.cancels) == len(second.cancels) == 1
    assert other.cancels == []


def test_a_finished_run_is_no_longer_reached():
    """After its block ends a run is forgotten; a late cancel changes nothing."""
    active = ActiveRuns()
    run = FakeRun()
    with active.running("r", run):
        pass
    assert len(active) == 0
    assert active.cancel(_cancel("r")) == 0
    assert run.cancels == []
