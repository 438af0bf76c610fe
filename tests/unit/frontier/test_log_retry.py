"""Reading a job's frontier back retries broker trouble a bounded number of times."""

from __future__ import annotations

import pytest
from aiokafka.errors import KafkaConnectionError

from service.contracts import FrontierRecord, RecordSource
from service.frontier import log
from service.settings import Settings

SOURCE = RecordSource(topic="t", partition=0, offset=3)


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    async def sleep(_seconds: float) -> None:
        return None

    monkeypatch.setattr(log.asyncio, "sleep", sleep)


async def test_a_broker_that_comes_back_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    record = FrontierRecord(request_id="r", source=SOURCE, kind="page", url="http://a.test/")

    async def flaky(*_args: object, **_kwargs: object) -> list[FrontierRecord]:
        calls.append(1)
        if len(calls) < 3:
            raise KafkaConnectionError("down")
        return [record]

    monkeypatch.setattr(log, "_read", flaky)
    assert await log.read_job(Settings(), "r", SOURCE, since_ms=0) == [record]
    assert len(calls) == 3


async def test_a_broker_that_stays_away_fails_the_read(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    async def down(*_args: object, **_kwargs: object) -> list[FrontierRecord]:
        calls.append(1)
        raise TimeoutError

    monkeypatch.setattr(log, "_read", down)
    with pytest.raises(TimeoutError):
        await log.read_job(Settings(), "r", SOURCE, since_ms=0)
    assert len(calls) == log.READ_ATTEMPTS
