"""Create the service's topics when they are missing."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError, for_code

from service.errors import ConfigurationError
from service.messaging.kafka_config import client_options

if TYPE_CHECKING:
    from service.settings import Settings

ADMIN_DEADLINE_S: Final = 30.0
"""Deadline for connecting the admin client and creating topics."""

_FINE: Final = frozenset({0, TopicAlreadyExistsError.errno})
"""No error, or another replica created the topic first: both are what we wanted."""


def wanted_topics(settings: Settings) -> dict[str, int]:
    """Topic name -> partition count."""
    outputs = (
        settings.results_topic,
        settings.progress_topic,
        settings.dead_letter_topic,
        settings.control_topic,
    )
    topics = dict.fromkeys(outputs, settings.output_partitions)
    topics[settings.requests_topic] = settings.requests_partitions
    return topics


def topic_configs(settings: Settings, name: str) -> dict[str, str]:
    """Configs of a topic the worker creates: the control topic is compacted (one record per
    request_id is all a reader needs)."""
    configs = {"max.message.bytes": str(settings.max_message_bytes + 4096)}
    if name == settings.control_topic:
        configs["cleanup.policy"] = "compact"
    return configs


async def ensure_topics(settings: Settings) -> None:
    """Create every missing topic; existing ones are left as they are."""
    admin = AIOKafkaAdminClient(**client_options(settings))
    await asyncio.wait_for(admin.start(), ADMIN_DEADLINE_S)
    try:
        existing = set(await asyncio.wait_for(admin.list_topics(), ADMIN_DEADLINE_S))
        missing = [
            NewTopic(
                name,
                partitions,
                settings.replication_factor,
                topic_configs=topic_configs(settings, name),
            )
            for name, partitions in wanted_topics(settings).items()
            if name not in existing
        ]
        if missing:
            response = await asyncio.wait_for(admin.create_topics(missing), ADMIN_DEADLINE_S)
            _check_created(response.topic_errors)
    finally:
        await asyncio.wait_for(admin.close(), ADMIN_DEADLINE_S)


def _check_created(topic_errors: list[tuple[object, ...]]) -> None:
    for name, code, *_ in topic_errors:
        if code not in _FINE:
            error = for_code(int(str(code)))
            raise ConfigurationError(f"cannot create topic {name}: {error.__name__}")
