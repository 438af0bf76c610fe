"""A look at topic metadata asks about the topics it names, never about every topic of the
cluster, and never creates one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from service.errors import BrokerUnavailableError
from service.messaging import metadata
from service.messaging.metadata import NO_LEADER, leaders_in, partitions_of, topic_leaders
from service.settings import Settings

if TYPE_CHECKING:
    from aiokafka.protocol.metadata import MetadataRequest


class _Cluster:
    """A client that records the metadata requests it sends; the cluster holds `topics`."""

    def __init__(self, topics: dict[str, dict[int, int]]) -> None:
        self.topics = topics
        self.requests: list[MetadataRequest] = []
        self.leaderless: dict[str, int] = {}
        """Topic -> how many more looks describe it as LEADER_NOT_AVAILABLE, no partitions."""

    def __call__(self, **_: Any) -> _Cluster:
        return self

    async def bootstrap(self) -> None:
        return None

    def get_random_node(self) -> int:
        return 1

    async def send(self, _: int, request: MetadataRequest) -> Any:
        self.requests.append(request)
        asked = request._topics  # noqa: SLF001 (what the request carries)
        names = list(self.topics) if asked is None else asked
        described = [self._describe(name) for name in names]
        return type("Response", (), {"topics": described})()

    async def close(self) -> None:
        return None

    def _describe(self, name: str) -> tuple[object, ...]:
        if name not in self.topics:
            return (3, name, False, [])
        if self.leaderless.get(name, 0) > 0:
            self.leaderless[name] -= 1
            return (5, name, False, [])
        return (0, name, False, [(0, p, lead, [1], [1]) for p, lead in self.topics[name].items()])


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> _Cluster:
    fake = _Cluster({f"other-{n}": {0: 1, 1: 1} for n in range(500)} | {"ours": {0: 1, 1: -1}})
    monkeypatch.setattr(metadata, "AIOKafkaClient", fake)
    return fake


SETTINGS = Settings(worker_name="unit")  # type: ignore[call-arg]


async def test_a_topics_partitions_come_from_a_request_for_it_alone(cluster: _Cluster) -> None:
    assert await partitions_of(SETTINGS, "ours") == {0, 1}
    [request] = cluster.requests
    assert request._topics == ["ours"]  # noqa: SLF001 (before: every topic of the cluster)
    assert request._allow_auto_topic_creation is False  # noqa: SLF001


async def test_a_missing_topic_is_named_and_not_created(cluster: _Cluster) -> None:
    with pytest.raises(BrokerUnavailableError, match="topic absent does not exist"):
        await partitions_of(SETTINGS, "absent")
    [request] = cluster.requests
    assert request._allow_auto_topic_creation is False  # noqa: SLF001


async def test_leaders_are_given_for_the_topics_that_exist(cluster: _Cluster) -> None:
    found = await topic_leaders(SETTINGS, ["ours", "absent"])
    assert found == {"ours": {0: 1, 1: NO_LEADER}}


def test_every_response_version_is_read() -> None:
    version_0 = [(0, "a", [(0, 0, 1, [1], [1])]), (3, "b", [])]
    version_5 = [(0, "a", False, [(0, 0, 1, [1], [1], [])]), (5, "b", False, [])]
    assert leaders_in(version_0) == {"a": {0: 1}}
    assert leaders_in(version_5) == {"a": {0: 1}, "b": {}}  # b exists, without leaders yet


async def test_a_topic_made_a_moment_ago_is_waited_for_until_described(
    cluster: _Cluster,
) -> None:
    # A loaded broker answers LEADER_NOT_AVAILABLE for a topic it has just made: it exists,
    # its partitions come with its leaders (the demo's client used to stop here).
    cluster.leaderless["ours"] = 3
    assert await partitions_of(SETTINGS, "ours") == {0, 1}
    assert len(cluster.requests) == 4
