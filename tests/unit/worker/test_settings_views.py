"""The narrow views of the settings a run's outputs and a fetcher's records read: built
once from the settings, frozen, each field the setting it names (pure)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from service.settings import Settings
from service.worker.coordinator.outputs import EVENT_ROOM_BYTES, Destinations
from service.worker.fetcher.deps import FetcherLimits

SETTINGS = Settings(
    worker_name="w-7",
    requests_topic="t.requests",
    max_message_bytes=2_000_000,
    max_deliveries=5,
    max_page_slots=3,
    max_queued_pages=40,
    max_request_deadline=timedelta(minutes=5),
)  # type: ignore[call-arg]


def test_a_runs_destinations_are_its_topics_its_worker_and_the_room_an_event_has():
    to = Destinations.from_settings(SETTINGS)
    assert to == Destinations(
        progress_topic=SETTINGS.progress_topic,
        results_topic=SETTINGS.results_topic,
        pages_topic=SETTINGS.pages_topic,
        frontier_topic=SETTINGS.frontier_topic,
        worker_name="w-7",
        max_event_bytes=2_000_000 - EVENT_ROOM_BYTES,
    )


def test_a_fetchers_limits_are_the_settings_its_records_read():
    assert FetcherLimits.from_settings(SETTINGS) == FetcherLimits(
        results_topic=SETTINGS.results_topic,
        frontier_topic=SETTINGS.frontier_topic,
        max_deliveries=5,
        max_page_slots=3,
        max_queued_pages=40,
        max_request_deadline_s=300.0,
    )


@pytest.mark.parametrize("view", [Destinations, FetcherLimits])
def test_a_view_is_frozen(view):
    built = view.from_settings(SETTINGS)
    name = dataclasses.fields(built)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, name, "changed")
