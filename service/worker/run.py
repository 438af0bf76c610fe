"""One run of one request: every URL gets exactly one result, then one terminal event."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Final

import structlog

from service.browser import SettleLimits
from service.browser.render import fetch_page
from service.content.page import PageContent, failed
from service.contracts import ErrorCode, EventType, PageResult, result_id_for, utc_now
from service.errors import BrowserUnavailableError
from service.http.robots import USER_AGENT
from service.logs import get_logger
from service.messaging.failures import root_cause
from service.net.hosts import host_key
from service.net.policy import BlockedUrlError, UnresolvableHostError
from service.worker.outputs import RunOutputs
from service.worker.retry import PageDeadline, RetryPolicy, retry_reason
from service.worker.scheduler import PageTicket
from service.worker.stop import Stop

if TYPE_CHECKING:
    from service.browser.pool import RequestContext
    from service.content.extract import FollowRules
    from service.contracts import CrawlRequest, RecordSource
    from service.control import Cancel
    from service.worker.deps import WorkerDeps

log = get_logger(__name__)

BROWSER_ATTEMPTS: Final = 3
"""Tries per page when the browser dies under it; then the page fails `browser_crash`."""


class RequestRun:
    """Crawls the URLs of one request through the shared page slots, publishing as it goes."""

    def __init__(
        self,
        deps: WorkerDeps,
        request: CrawlRequest,
        *,
        source: RecordSource,
        priority: int = 0,
        owned: asyncio.Event | None = None,
        since_ms: int = 0,
    ) -> None:
        self._deps = deps
        self._request = request
        self._priority = priority
        self.run_id = uuid.uuid4().hex
        self._outputs = RunOutputs(
            deps.publisher,
            deps.settings,
            request_id=request.request_id,
            run_id=self.run_id,
            total=len(request.urls),
            request_metadata=request.metadata,
            source=source,
            on_resend=deps.metrics.publish_retries.inc,
            owned=owned,
        )
        self._context: RequestContext | None = None
        self._context_lock = asyncio.Lock()
        self._published: set[str] = set()
        self._pending = 0
        """Pages of this run counted in the scheduler's backlog and not yet published."""
        self._timeout_s = min(
            request.options.timeout_ms / 1000, deps.settings.max_page_timeout.total_seconds()
        )
        self._retry = RetryPolicy.from_settings(deps.settings)
        self._follow: FollowRules | None = None
        """Set by a deep crawl: extract the links it may follow."""
        self._stop: Stop | None = None
        self._stopped = asyncio.Event()
        self._since_ms = since_ms
        """When the request record was produced (its Kafka timestamp)."""
        self._marks: dict[str, float] = {}
        """Wall-clock milliseconds of the run's steps, logged at debug level (`run.timing`)."""

    def _urls(self) -> list[str]:
        """The URLs that get a result: the request's own."""
        return self._request.urls

    def _counted_at_start(self) -> int:
        """Pages put in the scheduler's count when the run starts: all of a list crawl's."""
        return len(self._urls())

    def _placement(self, url: str) -> tuple[int, str | None]:  # noqa: ARG002 (deep crawls use it)
        """The page's `depth` and `parent_url`: a list crawl's pages are all seeds."""
        return 0, None

    def _completion(self) -> str | None:
        """The `detail` of the `completed` event."""
        return None

    def cancel(self, cancel: Cancel) -> None:
        """Stop now: close running pages, start no more; the rest get `cancelled` results."""
        self._halt(Stop.cancelled(cancel))

    def _halt(self, stop: Stop) -> None:
        if self._stop is None:
            self._stop = stop
            self._stopped.set()
            log.info("run.stopping", reason=stop.code.value, detail=stop.detail)

    def _budget_s(self) -> float | None:
        """The request's whole budget (`deadline_ms`), clamped to the worker's maximum."""
        deadline_ms = self._request.options.deadline_ms
        if deadline_ms is None:
            return None
        return min(deadline_ms / 1000, self._deps.settings.max_request_deadline.total_seconds())

    async def execute(self) -> None:
        """Run to the terminal event and wait until all of it is acknowledged."""
        with structlog.contextvars.bound_contextvars(run_id=self.run_id):
            await self._execute()

    def _mark(self, step: str) -> None:
        self._marks.setdefault(step, time.time() * 1000)

    def _log_timing(self) -> None:
        """How long after the record was produced each step of the run happened."""
        since = self._since_ms or self._marks.get("started", 0.0)
        log.debug("run.timing", **{f"{k}_ms": round(v - since) for k, v in self._marks.items()})

    async def _execute(self) -> None:
        self._mark("started")
        expires_at = self._request.expires_at
        if expires_at is not None and expires_at <= utc_now():
            await self._finish(EventType.EXPIRED, f"expired at {expires_at.isoformat()}")
            return
        scheduler = self._deps.scheduler
        self._pending = self._counted_at_start()
        scheduler.accept(self._pending)  # before any await: the next poll sees these pages
        deadline: asyncio.TimerHandle | None = None
        try:
            cancel = await self._deps.control.cancel_for(self._request.request_id)
            self._mark("control_synced")
            if cancel is not None:
                self.cancel(cancel)
            budget_s = self._budget_s()
            if budget_s is not None:
                loop = asyncio.get_running_loop()
                deadline = loop.call_later(budget_s, self._halt, Stop.deadline(budget_s))
            await self._outputs.event(EventType.ACCEPTED)
            self._mark("accepted_sent")
            await self._crawl_or_fail()
        finally:
            if deadline is not None:
                deadline.cancel()
            scheduler.finished(self._pending)

    async def _crawl_or_fail(self) -> None:
        try:
            await self._crawl_all()
        except Exception as exc:  # loop boundary: the request fails, the worker goes on
            cause = root_cause(exc)
            log.exception("request.failed", error=repr(cause), exc_info=cause)
            message = f"{type(cause).__name__}: {cause}"
            await self._fail_remaining(ErrorCode.INTERNAL, message)
            await self._finish(EventType.FAILED, message)
            return
        finally:
            await self._close_context()
        stop = self._stop
        if stop is None:
            await self._finish(EventType.COMPLETED, self._completion())
            return
        await self._fail_remaining(stop.code, stop.detail)
        await self._finish(stop.terminal, stop.detail)

    async def _crawl_all(self) -> None:
        """Every page as a task; results are published as pages finish. A stop (cancel,
        deadline) cancels the pages still running or waiting, which closes their pages."""
        if self._stopped.is_set():
            return
        async with asyncio.TaskGroup() as group:
            pending = {group.create_task(self._page(url)) for url in self._request.urls}
            stopped = group.create_task(self._stopped.wait())
            while pending:
                await asyncio.wait({*pending, stopped}, return_when=asyncio.FIRST_COMPLETED)
                for finished in [task for task in pending if task.done()]:
                    pending.discard(finished)
                    await self._publish(finished.result())
                    self._deps.scheduler.finished()
                    self._pending -= 1
                if stopped.done():
                    break
            for task in (*pending, stopped):
                task.cancel()
        for late in pending:  # finished before it could be cancelled: it keeps its result
            if not late.cancelled():
                await self._publish(late.result())
                self._deps.scheduler.finished()
                self._pending -= 1

    async def _publish(self, result: PageResult) -> None:
        self._mark("first_result")
        await self._outputs.result(result)
        self._published.add(result.url)
        outcome = "ok" if result.ok else (result.error.code if result.error else "failed")
        self._deps.metrics.pages.labels(str(outcome)).inc()

    async def _finish(self, kind: EventType, detail: str | None) -> None:
        self._mark("finishing")
        await self._outputs.event(kind, detail=detail)
        await self._outputs.acknowledged()
        self._mark("acknowledged")
        self._log_timing()
        self._deps.metrics.requests.labels(kind.value).inc()
        log.info(
            "request.finished",
            outcome=kind.value,
            total=self._outputs.total,
            succeeded=self._outputs.succeeded,
            failed=self._outputs.failed,
            cancelled=self._outputs.cancelled,
        )

    async def fail_all(self, code: ErrorCode, message: str) -> None:
        """Crawl nothing: every URL gets a failed result with `code`, then `failed`."""
        with structlog.contextvars.bound_contextvars(run_id=self.run_id):
            await self._outputs.event(EventType.ACCEPTED)
            await self._fail_remaining(code, message)
            await self._finish(EventType.FAILED, f"{code.value}: {message}")

    async def _fail_remaining(self, code: ErrorCode, message: str) -> None:
        for url in self._urls():
            if url not in self._published:
                await self._publish(self._result(url, failed(code, message), time.monotonic()))

    async def _page(self, url: str) -> PageResult:
        return (await self._page_content(url))[0]

    async def _page_content(self, url: str) -> tuple[PageResult, PageContent]:
        structlog.contextvars.bind_contextvars(url=url)  # this page's own task context
        started = time.monotonic()
        content = await self._check_policy(url) or await self._check_robots(url)
        if content is None:
            content = await self._fetch_with_retries(url)
        result = self._result(url, content, started)
        self._deps.metrics.page_seconds.observe(time.monotonic() - started)
        log.debug("page.fetched", url=url, ok=result.ok, status=result.status_code)
        return result, content

    async def _check_policy(self, url: str) -> PageContent | None:
        try:
            await self._deps.policy.check_target(url)
        except BlockedUrlError as exc:
            return failed(ErrorCode.BLOCKED, str(exc))
        except UnresolvableHostError as exc:
            return failed(ErrorCode.DNS, str(exc))
        except ValueError as exc:
            return failed(ErrorCode.INVALID_URL, str(exc))
        return None

    async def _check_robots(self, url: str) -> PageContent | None:
        if not self._request.options.respect_robots or await self._deps.robots.allowed(url):
            return None
        return failed(ErrorCode.ROBOTS, f"robots.txt disallows {url} for {USER_AGENT}")

    async def _fetch_with_retries(self, url: str) -> PageContent:
        """Try the page until it succeeds, fails for good, or its retries or time run out.

        The wait between tries happens here, outside every slot, so other pages run meanwhile.
        """
        deadline = PageDeadline(self._timeout_s)
        attempt = 0
        while True:
            content = await self._attempt(url, deadline)
            reason = retry_reason(content)
            if reason is None:
                return content
            wait_s = self._retry.delay_s(
                attempt, retry_after_s=content.retry_after_s, remaining_s=deadline.remaining_s()
            )
            if wait_s is None:
                return content
            attempt += 1
            self._deps.metrics.page_retries.labels(reason).inc()
            log.info("page.retrying", url=url, reason=reason, attempt=attempt, wait_s=wait_s)
            await asyncio.sleep(wait_s)

    async def _attempt(self, url: str, deadline: PageDeadline) -> PageContent:
        """One try in a page slot; the scheduler applies this request's share and the host's
        limit, and hands a slot to no page that would only wait in it for its host."""
        ticket = PageTicket(request=self.run_id, priority=self._priority, host=host_key(url))
        return await self._deps.scheduler.run(
            lambda: self._render(url, deadline.attempt_s()), ticket
        )

    async def _render(self, url: str, timeout_s: float) -> PageContent:
        """The page by the request's `render` path (the browser, HTTP, or HTTP first)."""
        self._deps.metrics.pages_in_flight.inc()
        try:
            return await self._deps.renderer.render(
                url,
                self._request.options,
                host=host_key(url),
                timeout_s=timeout_s,
                max_bytes=int(self._deps.settings.max_result_bytes),
                follow=self._follow,
                browser=lambda browser_s: self._browser(url, browser_s),
            )
        finally:
            self._deps.metrics.pages_in_flight.dec()

    async def _browser(self, url: str, timeout_s: float) -> PageContent:
        for _attempt in range(BROWSER_ATTEMPTS):
            try:
                self._mark("slot_granted")
                context = await self._open_context()
                self._mark("context_ready")
                return await fetch_page(
                    context,
                    url,
                    self._request.options,
                    timeout_s=timeout_s,
                    max_result_bytes=int(self._deps.settings.max_result_bytes),
                    refusals=self._deps.refusals,
                    follow=self._follow,
                    settle=SettleLimits.from_settings(self._deps.settings),
                )
            except BrowserUnavailableError as exc:
                log.warning("page.browser_lost", url=url, error=str(exc))
                self._deps.metrics.page_retries.labels("browser").inc()
                last = exc
        return failed(ErrorCode.BROWSER_CRASH, str(last))

    async def _open_context(self) -> RequestContext:
        async with self._context_lock:
            if self._context is None or not self._context.browser_alive:
                await self._close_context()
                self._context = await self._deps.pool.open_context(self._request.options)
            return self._context

    async def _close_context(self) -> None:
        context, self._context = self._context, None
        if context is not None:
            await context.close()

    def _result(self, url: str, content: PageContent, started: float) -> PageResult:
        request = self._request
        depth, parent_url = self._placement(url)
        return PageResult(
            request_id=request.request_id,
            result_id=result_id_for(request.request_id, url),
            run_id=self.run_id,
            url=url,
            **content.result_fields(),
            elapsed_ms=int((time.monotonic() - started) * 1000),
            fetched_at=utc_now(),
            worker=self._deps.settings.worker_name,
            request_metadata=request.metadata,
            source=self._outputs.source,
            depth=depth,
            parent_url=parent_url,
        )
