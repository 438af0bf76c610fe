"""Topics read partition by partition beside another must have its partition count: the
worker refuses to start otherwise, naming both topics, why, and what to do (pure)."""

from __future__ import annotations

import pytest

from service.errors import ConfigurationError
from service.messaging.topics import check_copartitioned, wanted_topics
from service.settings import Settings

SETTINGS = Settings(worker_name="unit")

BESIDE_PAGES = (
    "a page's cache entry (and change history) sits on the partition its host is placed on"
)


def test_topics_made_as_the_service_makes_them_are_copartitioned():
    check_copartitioned(SETTINGS, wanted_topics(SETTINGS))


@pytest.mark.parametrize(
    ("topic", "owner", "because", "advice"),
    [
        (
            SETTINGS.frontier_topic,
            SETTINGS.requests_topic,
            "a coordinator reads the frontier partition of each requests partition it owns",
            " (`crawlstream topics create` makes them equal), or add partitions to it",
        ),
        *[
            (
                monitors,
                SETTINGS.requests_topic,
                "the coordinator owning requests partition p fires the monitors of partition p",
                "",
            )
            for monitors in (SETTINGS.monitors_topic, SETTINGS.monitor_ticks_topic)
        ],
        *[
            (
                beside,
                SETTINGS.pages_topic,
                BESIDE_PAGES,
                "",
            )
            for beside in (
                SETTINGS.cache_index_topic,
                SETTINGS.cache_bodies_topic,
                SETTINGS.change_history_topic,
            )
        ],
    ],
)
def test_a_topic_with_another_count_than_its_owner_is_refused_with_why(
    topic, owner, because, advice
):
    counts = wanted_topics(SETTINGS)
    owned = counts[owner]
    counts[topic] = owned + 1
    with pytest.raises(ConfigurationError) as refused:
        check_copartitioned(SETTINGS, counts)
    assert str(refused.value) == (
        f"topic {topic} has {owned + 1} partitions and {owner} has {owned}: they must be "
        f"equal, because {because}. Recreate {topic} with {owned} partitions{advice}."
    )


def test_a_topic_not_there_yet_is_not_compared():
    counts = wanted_topics(SETTINGS)
    del counts[SETTINGS.requests_topic]
    counts[SETTINGS.frontier_topic] += 1
    check_copartitioned(SETTINGS, counts)
