"""Upstream proxies (issue 21) against the real broker, worker, egress proxy and Chromium:
a request's `proxy` (a URL, or a pool of `CRAWL_PROXIES`) carries all of its pages and no
other request's, on both paths; the URL policy still blocks first; a proxy rejecting its
credentials is `proxy_error`; no password is in the worker's log or any published message."""

from __future__ import annotations

import json

import pytest
from harness import Topics, WorkerProcess, collecting, produce, wait_for_leaders
from upstream_proxy import upstream_proxy

from service.contracts import CrawlOptions, CrawlRequest, ErrorCode, EventType, dump
from service.messaging.topics import ensure_topics

pytestmark = pytest.mark.integration

DEADLINE_S = 240.0

PATHS = ("browser", "http")

NAMED_PASSWORD = "named-s3cret-Pw9"  # noqa: S105 (the test proxy's)

POOL_PASSWORD = "pool-s3cret-Qz7"  # noqa: S105

WRONG_PASSWORD = "wrong-s3cret-Xy1"  # noqa: S105

PASSWORDS = (NAMED_PASSWORD, POOL_PASSWORD, WRONG_PASSWORD)


@pytest.fixture(scope="module")
async def named():
    async with upstream_proxy("127.0.0.2", "alice", NAMED_PASSWORD) as running:
        yield running


@pytest.fixture(scope="module")
async def pooled():
    async with upstream_proxy("127.0.0.3", "bob", POOL_PASSWORD) as running:
        yield running


@pytest.fixture(scope="module")
async def proxy_topics(kafka, site, named) -> Topics:
    """The test site and the named proxy are allow-listed (loopback), as tests do."""
    allowed = f"127.0.0.1:{site.port},127.0.0.2:{named.port}"
    made = Topics(bootstrap=kafka, extra_env={"CRAWL_ALLOWED_HOSTS": allowed})
    await ensure_topics(made.settings())
    await wait_for_leaders(made)
    return made


@pytest.fixture(scope="module")
async def proxy_collector(proxy_topics):
    async with collecting(proxy_topics) as running:
        yield running


@pytest.fixture(scope="module")
async def proxy_worker(proxy_topics, pooled, tmp_path_factory):
    log = tmp_path_factory.mktemp("upstream") / "worker.log"
    pools = json.dumps({"office": [pooled.url()]})
    worker = WorkerProcess(proxy_topics.env(CRAWL_PROXIES=pools), log, "upstream")
    try:
        await worker.start()
        yield worker
    finally:
        await worker.close()


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest(request_id=request_id, urls=urls, options=CrawlOptions(**options))
    return request_id.encode(), dump(request)


async def _crawl(topics, collector, messages) -> dict[str, list[object]]:
    await produce(topics, messages)
    ids = [key.decode() for key, _ in messages]
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in ids), deadline_s=DEADLINE_S
    )
    return {rid: collector.seen.results_of(rid) for rid in ids}


async def test_a_named_proxy_and_a_pool_carry_every_page_of_their_request_and_no_other(
    proxy_topics, proxy_collector, proxy_worker, site, named, pooled
):
    """Both paths: the named proxy sees each page of the request naming it, the pool's proxy
    each page of the request naming the pool; neither sees the plain request's pages."""

    def urls(rid: str) -> list[str]:
        return [site.url(f"/identity/seen?page={rid}-{n}") for n in (1, 2)]

    messages = []
    for path in PATHS:
        messages += [
            _request(f"via-named-{path}", urls(f"named-{path}"), render=path, proxy=named.url()),
            _request(f"via-pool-{path}", urls(f"pool-{path}"), render=path, proxy="office"),
            _request(f"direct-{path}", urls(f"direct-{path}"), render=path),
        ]
    results = await _crawl(proxy_topics, proxy_collector, messages)
    for rid, pages in results.items():
        assert len(pages) == 2, rid
        assert all(page.ok for page in pages), [page.error for page in pages]
    for path in PATHS:
        for proxy, kind in ((named, "named"), (pooled, "pool")):
            seen = [p for p in proxy.paths() if f"-{path}-" in p and p.startswith("/identity")]
            assert sorted(seen) == [f"/identity/seen?page={kind}-{path}-{n}" for n in (1, 2)]
        every = named.paths() + pooled.paths()
        assert not [p for p in every if "direct-" in p], every
    assert not [p for p in named.paths() if "pool-" in p]
    assert not [p for p in pooled.paths() if "named-" in p]


async def test_the_url_policy_still_blocks_a_target_through_the_proxy(
    proxy_topics, proxy_collector, proxy_worker, site, named
):
    """A loopback port that is not allow-listed is `blocked` before the proxy is asked."""
    before = len(named.tunnels)
    blocked_url = "http://127.0.0.1:9/secret"
    results = await _crawl(
        proxy_topics,
        proxy_collector,
        [_request(f"blocked-{p}", [blocked_url], render=p, proxy=named.url()) for p in PATHS],
    )
    for path in PATHS:
        [page] = results[f"blocked-{path}"]
        assert page.error.code == ErrorCode.BLOCKED, (path, page.error)
    assert not [t for t, _ in named.tunnels[before:] if t.endswith(":9")]


async def test_a_proxy_that_rejects_its_credentials_is_proxy_error_and_no_password_leaks(
    proxy_topics, proxy_collector, proxy_worker, site, named
):
    """A wrong password gives `proxy_error` naming the proxy by host only, on both paths
    (after the retries); no password is in the worker's log or any result or event."""
    results = await _crawl(
        proxy_topics,
        proxy_collector,
        [
            _request(
                f"wrong-{p}",
                [site.url(f"/identity/seen?page=wrong-{p}")],
                render=p,
                proxy=named.url(WRONG_PASSWORD),
            )
            for p in PATHS
        ],
    )
    for path in PATHS:
        [page] = results[f"wrong-{path}"]
        assert page.error.code == ErrorCode.PROXY_ERROR, (path, page.error)
        assert f"127.0.0.2:{named.port}" in page.error.message
        assert "407" in page.error.message
    assert named.rejected >= 2
    for rid in results:
        [terminal] = proxy_collector.seen.terminal(rid)
        assert terminal.type == EventType.COMPLETED
    published = [r.model_dump_json() for r, _ in proxy_collector.seen.results]
    published += [e.model_dump_json() for e, _ in proxy_collector.seen.events]
    log_text = proxy_worker.log_path.read_text(errors="replace")
    assert "page.fetched" in log_text or "request." in log_text  # the log is the worker's
    for password in PASSWORDS:
        assert password not in log_text
        assert not [message for message in published if password in message]
