"""Why a consumer reads or does not read each partition, for a replica that seems stuck
(SIGUSR1): the consumer's own state and what its Kafka client holds. It reads private state
(the consumer's and aiokafka's) on purpose: diagnosis only, nothing here changes anything."""

# ruff: noqa: SLF001

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from service.logs import get_logger

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer

    from service.messaging.consumer import RecordConsumer

log = get_logger(__name__)


def log_consumer_state(consumer: RecordConsumer[Any]) -> None:
    """Log `consumer.state`: room, pauses, and per assigned partition its tasks, tracker
    positions and the client's fetch position."""
    client = consumer._consumer
    room = consumer._fetch_room()
    paused = client.paused()
    partitions = {}
    for tp in sorted(client.assignment(), key=lambda tp: tp.partition):
        partitions[tp.partition] = {
            "paused": tp in paused,
            "tasks": len(consumer._tasks.get(tp, ())),
            "in_flight": consumer._tracker.in_flight(tp),
            "run_ahead": consumer._tracker.run_ahead(tp, consumer._aside_of(tp)),
            "full": consumer.handler.full(tp.partition),
            "next": consumer._tracker.next_offset(tp),
            "committed": consumer._tracker.committed_position(tp),
        }
    log.warning(
        "consumer.state",
        consumer=consumer._spec.name,
        room=room,
        intake_room=None if consumer._intake_room is None else consumer._intake_room(),
        gate_pauses=consumer._should_pause(),
        paused_all=consumer._paused_all,
        in_flight=consumer.in_flight,
        aside=consumer.aside,
        ending=len(consumer._ending),
        stopping=consumer._stopping.is_set(),
        partitions=partitions,
        client=client_state(client),
    )


def client_state(consumer: AIOKafkaConsumer) -> dict[str, Any]:
    """What aiokafka's fetcher holds per partition (its private state: diagnosis only)."""
    try:
        fetcher = consumer._fetcher  # no public call
        subscription = consumer._subscription.subscription
        assignment = subscription.assignment if subscription is not None else None
        if assignment is None:
            return {"assignment": None}
        states = {}
        for tp in sorted(assignment.tps, key=lambda tp: tp.partition):
            state = assignment.state_value(tp)
            states[tp.partition] = {
                "position": state._position,
                "reset": state.awaiting_reset,
                "committed_waiters": len(state._committed_futs),
                "buffered": tp in fetcher._records,
            }
        return {
            "active": assignment.active,
            "in_flight_nodes": sorted(fetcher._in_flight),
            "pending": len(fetcher._pending_tasks),
            "partitions": states,
        }
    except AttributeError as exc:  # another aiokafka version
        return {"unavailable": repr(exc)}
