"""No request sees browser state an earlier request on the same worker left: not in a fresh
context, nor in a context wiped after an earlier request and handed to this one.

The test site's `/isolation/write` leaves every kind of state a page can (cookies, local and
session storage, IndexedDB, CacheStorage, `window.name`, history, an HTTP-cached script) and
`/isolation/read` reports each kind it finds (see `tests/support/_isolation.py`). Both are
reached through a redirect from the site's second name, `localhost`, which leaves a cookie
there on the writer's way and reports that host's cookies on the reader's: a cookie of a host
no frame of the context ever showed. A control proves the reader sees what a shared
(`session`) context keeps.

What a context's network stack keeps beside storage (`tests/support/_isolation_net.py`): the
HTTP auth cache (a URL with credentials, and a page that plants a login for another host by
navigating to `http://mallory:planted@127.0.0.2:.../`), cookies set by answers to keepalive
fetches and beacons that come after the writer's request ended, and client-hint opt-ins. Each
such case runs with default reuse and with `CRAWL_CONTEXT_REUSE=0`; the reader of each comes
after the writer's context was wiped or closed.

The tests share a worker per setting (`_share`): the session controls and the wiped-context
test one, the network-state cases one per reuse mode; each of those starts once the contexts
of the earlier tests are wiped or closed (`_settled`), so the pool hands its reader what a
worker of its own would. The reuse-off test that stops its worker has one of its own."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest
from _isolation import CLEAN_TITLE, bounce_path, written_title
from _isolation_net import secret_title
from harness import produce

from service.contracts import CrawlOptions, CrawlRequest, EventType, Format, dump

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from conftest import SharedRun
    from harness import Collector, Topics, WorkerProcess
    from testsite import TestSite

    from service.contracts import PageResult

pytestmark = pytest.mark.integration

DEADLINE_S = 60.0
"""Per request."""

WIPED_DEADLINE_S = 15.0
"""How long after the last request a wipe may still be logged (wipes run in the background)."""

WRITERS = 6
"""Writer requests of the wiped-context test, then as many readers."""

SEEN_PREFIX = "isolation: seen "

SHARED_KINDS = frozenset({"cookie", "bounce-cookie", "local", "indexeddb", "cachestorage"})
"""Kinds of state every page of one context shares, so a shared context must show them.
sessionStorage, `window.name` and the history belong to one tab: a request of the same
session sees them only when it gets the tab the earlier request used. The HTTP cache is
shared by a context's pages too, but the worker's pages never use it: Playwright disables
it (`Network.setCacheDisabled`) in every page of a browser given proxy credentials, as the
worker's is for its egress proxy. The readers still check it (their `httpcache` kind and the
site's fetch counts), for the day it is on."""

WIPED = "browser.context_wiped"

TAKEN = "browser.context_taken"
"""What the worker logs (debug) when a request without a session takes its context."""

DONE_EVENTS = frozenset({WIPED, "browser.context_closed"})
"""What the worker logs (debug) when a request's context has been wiped or closed."""

REUSE_MODES = [
    pytest.param({}, id="default-reuse"),
    pytest.param({"CRAWL_CONTEXT_REUSE": "0"}, id="reuse-off"),
]
"""The isolation modes every network-state case runs under."""


def _hosts(site: TestSite, other: TestSite | None = None) -> str:
    """The test site under both its names (and `other`)."""
    hosts = f"127.0.0.1:{site.port},localhost:{site.port}"
    if other is not None:
        hosts += f",127.0.0.2:{other.port}"
    return hosts


async def _start(
    start_worker, site: TestSite, other: TestSite | None = None, **env: str
) -> WorkerProcess:
    """A worker of this test's own that may reach the test site under both its names (and
    `other`)."""
    return await start_worker(
        **{"CRAWL_ALLOWED_HOSTS": _hosts(site, other), "CRAWL_LOG_LEVEL": "debug", **env}
    )


async def _share(
    shared_worker_with: Callable[..., Awaitable[SharedRun]],
    site: TestSite,
    other: TestSite | None = None,
    **env: str,
) -> SharedRun:
    """The module's worker with `env` that may reach the test site under both its names (and
    `other`): started by the first test that asks, on topics and a group of its own. For tests
    that neither restart, stop nor read all of its log (each tells its requests apart by id)."""
    hosts = _hosts(site, other)
    return await shared_worker_with(
        **{"CRAWL_ALLOWED_HOSTS": hosts, "CRAWL_LOG_LEVEL": "debug", **env}
    )


async def _settled(run: SharedRun) -> None:
    """Wait until the context of every earlier request of the shared worker (each of those
    that took one of its own) has been wiped or closed: then no context of an earlier test is
    in use or being wiped, and as on a worker of this test's own the context this test's
    first request leaves is the one its next request takes (wiped contexts are taken newest
    first), or a fresh one when it was closed."""

    def settled(_: object) -> bool:
        events = run.worker.events()
        taken = {entry.get("request_id") for entry in events if entry.get("event") == TAKEN}
        done = {entry.get("request_id") for entry in events if entry.get("event") in DONE_EVENTS}
        return taken <= done

    await run.collector.wait_until(settled, WIPED_DEADLINE_S)


def _bounced(
    site: TestSite, to: str, set_tag: str | None = None, back: TestSite | None = None
) -> str:
    """The URL that reaches `to` on 127.0.0.1 (or on `back`) by a redirect from `localhost`."""
    back_host = "127.0.0.2" if back is not None else "127.0.0.1"
    back_port = back.port if back is not None else site.port
    path = bounce_path(to, back=f"{back_host}:{back_port}", set_tag=set_tag)
    return f"http://localhost:{site.port}{path}"


def _run_id() -> str:
    """A prefix of this test's tags: the site (and its fetch counts) lives for the session."""
    return uuid.uuid4().hex[:8]


async def _crawl(
    topics: Topics, collector: Collector, request_id: str, url: str, **options: object
) -> PageResult:
    """Crawl one URL as its own request, which must complete; its result, which must be ok."""
    wanted = CrawlOptions(**{"formats": [Format.TEXT], **options})
    request = CrawlRequest(request_id=request_id, urls=[url], options=wanted)
    await produce(topics, [(request_id.encode(), dump(request))])
    await collector.wait_until(lambda seen: seen.terminal(request_id), deadline_s=DEADLINE_S)
    [terminal] = collector.seen.terminal(request_id)
    assert terminal.type is EventType.COMPLETED, terminal
    [result] = collector.seen.results_of(request_id)
    assert result.ok, result.error
    return result


async def _write(
    topics: Topics, collector: Collector, site: TestSite, tag: str, **options: object
) -> None:
    """One request whose page leaves every kind of state, tagged `tag` (its redirect leaves a
    cookie on `localhost`)."""
    url = _bounced(site, f"/isolation/write?tag={tag}", set_tag=tag)
    result = await _crawl(topics, collector, f"write-{tag}", url, wait_for="#written", **options)
    assert result.title == written_title(tag), result.text


async def _read(
    topics: Topics,
    collector: Collector,
    site: TestSite,
    name: str,
    tags: list[str],
    back: TestSite | None = None,
    **options: object,
) -> tuple[set[str], str]:
    """One request whose page (on 127.0.0.1, or on `back`) looks for state, and loads the
    cacheable script of each of `tags`; the kinds of state it saw, and its report."""
    query = "&".join(f"tag={tag}" for tag in tags)
    url = _bounced(site, f"/isolation/read?{query}", back=back)
    result = await _crawl(topics, collector, f"read-{name}", url, wait_for="#read", **options)
    report = result.text or ""
    if result.title == CLEAN_TITLE:
        return set(), report
    assert result.title is not None, report
    assert result.title.startswith(SEEN_PREFIX), (result.title, report)
    return set(result.title.removeprefix(SEEN_PREFIX).split(",")), report


def _wipes(worker: WorkerProcess, request_ids: set[str]) -> list[dict[str, object]]:
    """The wipes after the requests of `request_ids` (the worker may serve other tests)."""
    return [
        entry
        for entry in worker.events()
        if entry.get("event") == WIPED and entry.get("request_id") in request_ids
    ]


def _reused_by_a_reader(worker: WorkerProcess, readers: set[str]) -> bool:
    """Whether a reader (of the request ids `readers`) ran in a context wiped after an earlier
    request: the wipe after a request is logged under its `request_id`, `served` counting that
    request."""
    return any(
        str(entry.get("request_id", "")).startswith("read-") and int(entry.get("served", 0)) >= 2
        for entry in _wipes(worker, readers)
    )


async def test_the_reader_sees_what_a_writer_left_in_a_shared_session_context(
    site: TestSite, shared_worker_with
):
    """The control: two requests of one `session` share a context on purpose, so the reader
    reports what the writer left; a reader that saw nothing could not prove isolation."""
    run = await _share(shared_worker_with, site)
    topics, collector = run.topics, run.collector
    tag = _run_id()
    await _write(topics, collector, site, tag, session="iso")
    seen, report = await _read(topics, collector, site, tag, [tag], session="iso")
    assert seen >= SHARED_KINDS, report
    assert not {kind for kind in seen if kind.endswith("-error")}, report


async def test_no_request_sees_state_an_earlier_request_left_even_in_a_wiped_context(
    site: TestSite, shared_worker_with
):
    """Writers one after another, then readers: each reader finds nothing and fetches every
    writer's cacheable script from the network again, though contexts were wiped and reused
    (the debug log says so: the wipe after a reader says its context served an earlier
    request)."""
    shared = await _share(shared_worker_with, site, CRAWL_LOG_LEVEL="debug")
    topics, collector, worker = shared.topics, shared.collector, shared.worker
    await _settled(shared)
    run = _run_id()
    tags = [f"{run}-{n}" for n in range(WRITERS)]
    readers = {f"read-{tag}" for tag in tags}
    for tag in tags:
        await _write(topics, collector, site, tag)
    for tag in tags:
        seen, report = await _read(topics, collector, site, tag, tags)
        assert seen == set(), report
    # each tag's script: once by its writer, once by every reader
    assert {tag: site.cached_fetches[tag] for tag in tags} == dict.fromkeys(tags, 1 + WRITERS)
    try:
        await collector.wait_until(lambda _: _reused_by_a_reader(worker, readers), WIPED_DEADLINE_S)
    except TimeoutError:
        ids = {f"write-{tag}" for tag in tags} | readers
        wipes = [(entry.get("request_id"), entry.get("served")) for entry in _wipes(worker, ids)]
        pytest.fail(f"no reader ran in a wiped context ({WIPED} request_id, served: {wipes})")


async def test_with_context_reuse_off_every_request_gets_a_new_context(
    topics, collector, site: TestSite, start_worker
):
    """`CRAWL_CONTEXT_REUSE=0`: a writer and a reader are isolated and no context is wiped."""
    worker = await _start(start_worker, site, CRAWL_LOG_LEVEL="debug", CRAWL_CONTEXT_REUSE="0")
    tag = _run_id()
    await _write(topics, collector, site, tag)
    seen, report = await _read(topics, collector, site, tag, [tag])
    assert seen == set(), report
    assert site.cached_fetches[tag] == 2
    assert await worker.terminate() == 0  # the log is complete: no wipe can come later
    events = worker.events()
    assert any(entry.get("level") == "debug" for entry in events)  # a wipe would be logged
    assert [entry for entry in events if entry.get("event") == WIPED] == []


async def _context_done(collector: Collector, worker: WorkerProcess, request_id: str) -> None:
    """Wait until the context of `request_id` has been wiped for the next request or closed."""

    def done(_: object) -> bool:
        return any(
            entry.get("event") in DONE_EVENTS and entry.get("request_id") == request_id
            for entry in worker.events()
        )

    await collector.wait_until(done, WIPED_DEADLINE_S)


async def _write_secret(
    topics: Topics, collector: Collector, worker: WorkerProcess, url: str, user: str
) -> None:
    """One request whose page ends at `/isolation/secret` served to `user`; returns once its
    context is wiped or closed."""
    request_id = f"auth-{_run_id()}"
    result = await _crawl(topics, collector, request_id, url, wait_for="#secret")
    assert result.title == secret_title(user), result.text
    await _context_done(collector, worker, request_id)


@pytest.mark.parametrize("env", REUSE_MODES)
async def test_a_login_by_url_credentials_is_not_sent_for_a_later_request(
    site: TestSite, other_site: TestSite, shared_worker_with, env: dict[str, str]
):
    """A crawls `http://alice:s3cret@HOST/isolation/secret` (served as alice); B, after A's
    context was wiped or closed, crawls a page under `/isolation/` of HOST and its request
    carries no credential (before: A's, sent unasked from the auth cache)."""
    run = await _share(shared_worker_with, site, other_site, **env)
    topics, collector, worker = run.topics, run.collector, run.worker
    await _settled(run)
    url = f"http://alice:s3cret@127.0.0.1:{site.port}/isolation/secret"
    await _write_secret(topics, collector, worker, url, "alice")
    tag = _run_id()
    seen, report = await _read(topics, collector, site, tag, [tag])
    assert seen == set(), report


@pytest.mark.parametrize("env", REUSE_MODES)
async def test_a_login_a_page_planted_for_another_host_is_not_sent_for_a_later_request(
    site: TestSite, other_site: TestSite, shared_worker_with, env: dict[str, str]
):
    """A's page navigates to `http://mallory:planted@OTHER/isolation/secret` (served as
    mallory); B's crawl of OTHER carries no credential (before: mallory's)."""
    run = await _share(shared_worker_with, site, other_site, **env)
    topics, collector, worker = run.topics, run.collector, run.worker
    await _settled(run)
    plant = f"/isolation/plant?host=127.0.0.2:{other_site.port}&to=/isolation/secret"
    await _write_secret(topics, collector, worker, site.url(plant), "mallory")
    tag = _run_id()
    seen, report = await _read(topics, collector, site, tag, [tag], back=other_site)
    assert seen == set(), report


@pytest.mark.parametrize("env", REUSE_MODES)
async def test_late_cookies_of_keepalive_fetches_and_beacons_do_not_reach_a_later_request(
    site: TestSite, other_site: TestSite, shared_worker_with, env: dict[str, str]
):
    """A's page sends a keepalive fetch at load, and a keepalive fetch and a beacon on
    `pagehide`; the site answers each `LATE_DELAY_S` later with a cookie. Once every late
    request that reached the site has ended, B's request carries none of those cookies
    (before: all three)."""
    run = await _share(shared_worker_with, site, other_site, **env)
    topics, collector, worker = run.topics, run.collector, run.worker
    await _settled(run)
    tag = _run_id()
    request_id = f"late-{tag}"
    url = site.url(f"/isolation/late?tag={tag}")
    result = await _crawl(topics, collector, request_id, url, wait_for="#sent")
    assert result.title == "isolation: late", result.text
    await _context_done(collector, worker, request_id)
    every = 1  # the load one; a sealed or closed context's pagehide requests may never arrive

    def answered(_: object) -> bool:
        arrived = site.late_arrived[tag]
        return arrived >= every and site.late_ended[tag] == arrived

    await collector.wait_until(answered, DEADLINE_S)
    seen, report = await _read(topics, collector, site, tag, [tag])
    assert seen == set(), report


HOLD_MS = 6_000
"""How long the site holds the answers to A's pagehide requests: past B's start."""

LINGER_MS = 9_000
"""How long B's first page stays before it goes to the reader: past the held answers."""


async def test_answers_held_past_the_hand_over_do_not_land_in_the_next_request(
    site: TestSite, other_site: TestSite, shared_worker_with
):
    """A's page sends a keepalive fetch and a beacon on `pagehide` (as the wipe blanks it);
    the site holds their answers, with cookies, `HOLD_MS`. B takes A's wiped context at once
    and reads after those answers were due (its first page stays `LINGER_MS`, then replaces
    itself with the reader): its request carries none of the cookies, because
    the wipe sealed A's context at the egress proxy (its connections cut, new ones refused
    until B took it). Before the seal, the held answers landed in B's context after the
    cookies were cleared at hand-over, and B's reader sent them."""
    run = await _share(shared_worker_with, site, other_site)
    topics, collector, worker = run.topics, run.collector, run.worker
    await _settled(run)
    tag = _run_id()
    request_id = f"held-{tag}"
    url = site.url(f"/isolation/late?tag={tag}&hold_ms={HOLD_MS}")
    result = await _crawl(topics, collector, request_id, url, wait_for="#sent")
    assert result.title == "isolation: late", result.text
    await _context_done(collector, worker, request_id)
    reader = _bounced(site, f"/isolation/read?tag={tag}")
    lingering = site.url(f"/isolation/linger?ms={LINGER_MS}&to={quote(reader, safe='')}")
    read = await _crawl(topics, collector, f"read-{tag}", lingering, wait_for="#read")
    report = read.text or ""
    assert '"cookie"' in report, report  # the reader ran and reported its cookies
    assert f"iso_late_hide_{tag}" not in report, report
    assert f"iso_late_beacon_{tag}" not in report, report
    assert _wipes(worker, {request_id, f"read-{tag}"})


@pytest.mark.parametrize("env", REUSE_MODES)
async def test_client_hints_an_earlier_request_opted_in_to_are_not_sent_later(
    site: TestSite, other_site: TestSite, shared_worker_with, env: dict[str, str]
):
    """A's page answers with `Accept-CH` and `Critical-CH` for high-entropy client hints; B's
    request to the same origin carries none of them (before: Sec-CH-UA-Arch and more)."""
    run = await _share(shared_worker_with, site, other_site, **env)
    topics, collector, worker = run.topics, run.collector, run.worker
    await _settled(run)
    tag = _run_id()
    request_id = f"hints-{tag}"
    result = await _crawl(topics, collector, request_id, site.url(f"/isolation/hints?tag={tag}"))
    assert result.title == f"isolation: hints {tag}", result.text
    await _context_done(collector, worker, request_id)
    seen, report = await _read(topics, collector, site, tag, [tag])
    assert seen == set(), report


async def test_the_reader_sees_a_login_late_cookies_and_client_hints_in_a_shared_session_context(
    site: TestSite, shared_worker_with
):
    """The control of the network-state cases: in one `session` the reader's request carries
    the login, the late cookies and the client hints the writers left."""
    run = await _share(shared_worker_with, site)
    topics, collector = run.topics, run.collector
    tag = _run_id()
    url = f"http://alice:s3cret@127.0.0.1:{site.port}/isolation/secret"
    result = await _crawl(topics, collector, f"auth-{tag}", url, session=tag, wait_for="#secret")
    assert result.title == secret_title("alice"), result.text
    await _crawl(
        topics, collector, f"hints-{tag}", site.url(f"/isolation/hints?tag={tag}"), session=tag
    )
    await _crawl(
        topics,
        collector,
        f"late-{tag}",
        site.url(f"/isolation/late?tag={tag}"),
        session=tag,
        wait_for="#sent",
    )
    await collector.wait_until(lambda _: site.late_ended[tag] >= 1, DEADLINE_S)
    seen, report = await _read(topics, collector, site, tag, [tag], session=tag)
    assert {"auth", "hints", "cookie"} <= seen, report
