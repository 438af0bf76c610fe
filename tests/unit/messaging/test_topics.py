"""A key's partition is the one Java's default partitioner picks (murmur2), not CRC32's."""

from __future__ import annotations

import zlib

import pytest

from service.messaging.topics import partition_for, wanted_topics
from service.settings import Settings

JAVA_MURMUR2 = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}
"""`Utils.murmur2` of these keys, as Kafka's own `UtilsTest` expects them (signed 32 bits)."""


@pytest.mark.parametrize(("key", "java_hash"), JAVA_MURMUR2.items())
@pytest.mark.parametrize("partitions", [1, 7, 12, 1000])
def test_partition_is_javas_positive_murmur2_modulo_the_count(key, java_hash, partitions):
    """`(murmur2(key) & 0x7fffffff) % partitions`, for str and bytes keys alike."""
    expected = (java_hash & 0x7FFFFFFF) % partitions
    assert partition_for(key, partitions) == expected
    assert partition_for(key.encode(), partitions) == expected


def test_the_readmes_example_differs_from_librdkafkas_default():
    """`r-1` of 12 partitions is 11 by murmur2, where CRC32 (librdkafka's default) gives 1."""
    assert partition_for("r-1", 12) == 11
    assert zlib.crc32(b"r-1") % 12 == 1


def test_wanted_topics_lists_the_requests_topic_first_with_the_configured_counts():
    """Requests, the frontier and the monitors topics (co-partitioned with them) with
    CRAWL_REQUESTS_PARTITIONS,
    the outputs and the change topics with CRAWL_OUTPUT_PARTITIONS, the pages, the page cache
    and the change history (co-partitioned with them) with CRAWL_PAGE_PARTITIONS, the host
    directory in one partition (its order decides placements)."""
    settings = Settings(requests_partitions=3, output_partitions=5, page_partitions=7)
    assert wanted_topics(settings) == {
        "crawl.requests": 3,
        "crawl.results": 5,
        "crawl.progress": 5,
        "crawl.dead-letter": 5,
        "crawl.control": 5,
        "crawl.changes": 5,
        "crawl.changes.crawls": 5,
        "crawl.frontier": 3,
        "crawl.monitors": 3,
        "crawl.monitor.ticks": 3,
        "crawl.pages": 7,
        "crawl.cache.index": 7,
        "crawl.cache.bodies": 7,
        "crawl.changes.history": 7,
        "crawl.hosts": 1,
    }
    assert next(iter(wanted_topics(settings))) == "crawl.requests"
