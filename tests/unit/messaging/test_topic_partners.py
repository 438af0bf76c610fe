"""Topics whose partition count follows another's get that topic's count, also when another
process made it a moment before the worker looked."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiokafka.errors import TopicAlreadyExistsError

from service.messaging import topics
from service.settings import Settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import pytest
    from aiokafka.admin import NewTopic


@dataclass
class _JustMadeAdmin:
    """A broker where `made` was created by another process a moment ago: not yet in the list
    of topics, and described only on the second look."""

    made: dict[str, int]
    created: dict[str, int] = field(default_factory=dict)
    looks: int = 0

    async def describe_topics(self, names: list[str]) -> list[dict[str, Any]]:
        self.looks += 1
        if self.looks == 1:
            return [{"topic": name, "error_code": 3, "partitions": []} for name in names]
        known = self.made | self.created
        return [
            {"topic": name, "error_code": 0, "partitions": [{}] * known[name]}
            for name in names
            if name in known
        ]

    async def create_topics(self, new: list[NewTopic]) -> Any:
        errors = []
        for topic in new:
            if topic.name in self.made:
                errors.append((topic.name, TopicAlreadyExistsError.errno, None))
            else:
                self.created[topic.name] = topic.num_partitions
                errors.append((topic.name, 0, None))
        return type("Response", (), {"topic_errors": errors})()


async def test_a_requests_topic_made_a_moment_ago_gives_the_frontier_its_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings(worker_name="unit", requests_partitions=4, page_partitions=4)  # type: ignore[arg-type]
    admin = _JustMadeAdmin(made={settings.requests_topic: 1})

    @contextlib.asynccontextmanager
    async def fake_admin(_: Settings) -> AsyncIterator[_JustMadeAdmin]:
        yield admin

    async def none_listed(_: Settings, __: object) -> dict[str, dict[int, int]]:
        return {}

    monkeypatch.setattr(topics, "_admin", fake_admin)
    monkeypatch.setattr(topics, "topic_leaders", none_listed)
    created = await topics.ensure_topics(settings)
    assert admin.created[settings.frontier_topic] == 1
    assert admin.created[settings.monitors_topic] == 1
    assert admin.created[settings.pages_topic] == 4
    assert admin.created[settings.cache_index_topic] == 4
    assert settings.requests_topic not in admin.created
    assert settings.frontier_topic in created
