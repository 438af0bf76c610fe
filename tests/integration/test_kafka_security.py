"""Kafka with SASL/SCRAM: the right login works end to end, a wrong one fails in one line."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import TYPE_CHECKING

import pytest
from aiokafka import AIOKafkaConsumer
from harness import Topics, WorkerProcess, running_broker

from service.broker.local import SCRAM_MECHANISM
from service.contracts import CrawlRequest, PageResult, dump
from service.messaging.chunks import Reassembler
from service.messaging.kafka_config import client_options
from service.messaging.publisher import Publisher
from service.messaging.topics import ensure_topics

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from testsite import TestSite

    from service.broker import LocalBroker
    from service.settings import Settings

pytestmark = pytest.mark.integration

USER, PASSWORD = "alice", "alice-secret"

FAILURE_DEADLINE_S = 60.0
"""A refused worker should be gone in a few seconds; this leaves room for a busy machine."""

RESULT_DEADLINE_S = 180.0
"""Time for a worker to render one page of the test site on a busy machine."""


@pytest.fixture(scope="module")
async def scram_broker() -> AsyncIterator[LocalBroker]:
    """A broker of this module's own whose only client listener wants SCRAM-SHA-256."""
    async with running_broker(scram_users={USER: PASSWORD}) as broker:
        yield broker


def _login_env(username: str = USER, password: str = PASSWORD) -> dict[str, str]:
    return {
        "CRAWL_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "CRAWL_KAFKA_SASL_MECHANISM": SCRAM_MECHANISM,
        "CRAWL_KAFKA_SASL_USERNAME": username,
        "CRAWL_KAFKA_SASL_PASSWORD": password,
    }


@pytest.fixture
def sasl_topics(scram_broker: LocalBroker, site: TestSite) -> Topics:
    """Topics of this test's own on the SCRAM broker; the worker env carries the login."""
    env = _login_env() | {"CRAWL_ALLOWED_HOSTS": f"127.0.0.1:{site.port}"}
    return Topics(bootstrap=scram_broker.bootstrap_servers, extra_env=env)


def _login_settings(topics: Topics):
    return topics.settings(
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism=SCRAM_MECHANISM,
        kafka_sasl_username=USER,
        kafka_sasl_password=PASSWORD,
    )


async def test_producer_and_consumer_with_the_right_login_round_trip(sasl_topics):
    """With the right SCRAM login, topics are created, a message is produced and read back."""
    settings = _login_settings(sasl_topics)
    await ensure_topics(settings)
    value = uuid.uuid4().bytes
    async with Publisher(settings) as publisher:
        await publisher.send_and_wait(sasl_topics.requests, b"k", value)
    consumer = AIOKafkaConsumer(
        sasl_topics.requests,
        **client_options(settings),
        group_id=None,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        async with asyncio.timeout(60):
            record = await consumer.getone()
    finally:
        await consumer.stop()
    assert (record.key, record.value) == (b"k", value)


async def test_worker_with_the_right_login_completes_a_request(sasl_topics, site, tmp_path):
    """A worker logging in with SCRAM starts, crawls a page of the test site requested by a
    producer that logs in too, and exits 0 on SIGTERM."""
    settings = _login_settings(sasl_topics)
    worker = WorkerProcess(sasl_topics.env(), tmp_path / "worker.log", "sasl-worker")
    try:
        await worker.start()
        url = site.url("/page/1")
        request = CrawlRequest(request_id="sasl-1", urls=[url])
        async with Publisher(settings) as publisher:
            await publisher.send_and_wait(settings.requests_topic, "sasl-1", dump(request))
        result = await _first_result(settings)
        assert (result.request_id, result.url) == ("sasl-1", url)
        assert result.ok, result.error
        assert result.status_code == 200
        assert await worker.terminate() == 0
    finally:
        await worker.close()


async def _first_result(settings: Settings) -> PageResult:
    consumer = AIOKafkaConsumer(
        settings.results_topic,
        **client_options(settings),
        group_id=None,
        auto_offset_reset="earliest",
    )
    chunks = Reassembler()
    await consumer.start()
    try:
        async with asyncio.timeout(RESULT_DEADLINE_S):
            async for record in consumer:
                whole = chunks.add(record.value, list(record.headers))
                if whole is not None:
                    return PageResult.model_validate_json(whole)
    finally:
        await consumer.stop()
    raise AssertionError("the results consumer stopped")


@pytest.mark.parametrize(
    ("username", "password"), [(USER, "wrong-password"), ("mallory", PASSWORD)]
)
async def test_worker_with_a_wrong_login_fails_fast_in_one_line(sasl_topics, username, password):
    """A wrong password or an unknown user: the worker exits non-zero, soon, with one line on
    standard error that says authentication failed, and no traceback."""
    env = sasl_topics.env(**_login_env(username, password))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "service",
        "worker",
        env=os.environ | env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(FAILURE_DEADLINE_S):
            _, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode != 0
    lines = [line for line in stderr.decode().splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"crawlstream: Kafka authentication failed for user '{username}'")
    assert SCRAM_MECHANISM in lines[0]
