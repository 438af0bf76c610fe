"""Internal records: named after their deployment and tagged; a reader takes only its own."""

from __future__ import annotations

from contextlib import AsyncExitStack

from pydantic import SecretStr

from service.messaging.publisher import Publisher
from service.messaging.seal import Seal, SealCheck
from service.settings import Settings

TOPIC = "crawl.pages"


def _seal(**settings: object) -> Seal:
    return Seal.from_settings(Settings(**settings))  # type: ignore[arg-type]


def test_a_record_tagged_by_the_deployment_is_authentic():
    seal = _seal(cluster_secret=SecretStr("s3cret"))
    headers = seal.headers(TOPIC, b"host", b"value")
    assert seal.check(TOPIC, b"host", b"value", headers) is SealCheck.AUTHENTIC
    assert seal.authenticated


def test_a_changed_value_key_or_topic_is_forged():
    seal = _seal(cluster_secret=SecretStr("s3cret"))
    headers = seal.headers(TOPIC, b"host", b"value")
    assert seal.check(TOPIC, b"host", b"other", headers) is SealCheck.FORGED
    assert seal.check(TOPIC, b"elsewhere", b"value", headers) is SealCheck.FORGED
    assert seal.check("crawl.frontier", b"host", b"value", headers) is SealCheck.FORGED


def test_a_record_without_a_tag_or_with_another_secrets_tag_is_forged():
    seal = _seal(cluster_secret=SecretStr("s3cret"))
    other = _seal(cluster_secret=SecretStr("guess"))
    assert seal.check(TOPIC, b"k", b"v", []) is SealCheck.FORGED
    assert seal.check(TOPIC, b"k", b"v", other.headers(TOPIC, b"k", b"v")) is SealCheck.FORGED


def test_another_deployments_record_is_foreign():
    ours = _seal(group_id="a", pages_topic=TOPIC)
    theirs = _seal(group_id="b", pages_topic=TOPIC)
    headers = theirs.headers(TOPIC, b"k", b"v")
    assert ours.check(TOPIC, b"k", b"v", headers) is SealCheck.FOREIGN


def test_without_a_secret_the_seal_says_it_is_not_authenticated():
    assert not _seal().authenticated


def test_a_rejected_record_is_counted_each_time_and_logged_once():
    counted: list[tuple[str, SealCheck]] = []
    seal = Seal.from_settings(Settings(), on_rejected=lambda t, r: counted.append((t, r)))
    assert not seal.admits(TOPIC, b"k", b"v", [])
    assert not seal.admits(TOPIC, b"k", b"v", [])
    assert counted == [(TOPIC, SealCheck.FORGED)] * 2


async def test_the_publisher_tags_internal_topics_only_and_every_chunk():
    settings = Settings(max_message_bytes=20_000)  # type: ignore[arg-type]
    seal = Seal.from_settings(settings)
    value = b"x" * 50_000
    async with AsyncExitStack() as stack:
        publisher = Publisher(settings)
        stack.push_async_exit(publisher)  # closes the unstarted producer
        chunks = publisher.messages(settings.frontier_topic, "r", value, chunk_id="c")
        [result] = publisher.messages(settings.results_topic, "r", b"v")
    assert len(chunks) > 1
    for chunk in chunks:
        assert seal.check(settings.frontier_topic, b"r", value, chunk.headers) is (
            SealCheck.AUTHENTIC
        )
    assert "crawlstream-tag" not in dict(result.headers)


def test_internal_names_follow_the_deployment():
    default = Settings()
    assert (default.pages_topic, default.fetcher_group_id) == (
        "crawl.pages",
        "crawlstream-fetchers",
    )
    other = Settings(group_id="team-b")
    assert other.pages_topic == "crawl.team-b.pages"
    assert other.frontier_topic == "crawl.team-b.frontier"
    assert other.hosts_topic == "crawl.team-b.hosts"
    assert other.cache_index_topic == "crawl.team-b.cache.index"
    assert (other.fetcher_group_id, other.webhook_group_id) == (
        "team-b-fetchers",
        "team-b-webhooks",
    )
    assert Settings(group_id="team-b", pages_topic="mine").pages_topic == "mine"
