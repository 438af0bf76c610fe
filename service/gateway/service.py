"""What the routes call: start jobs, answer for them, scrape one page. Holds the Kafka client,
the job view and the result reader; keeps nothing that another replica would not know."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import math
import time
import uuid
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Self

from pydantic_core import to_json

from service.client import CrawlClient, FollowTimeoutError
from service.contracts import EventType, PageResult, ProgressEvent, utc_now
from service.contracts_webhook import WEBHOOK_KEY
from service.frontier.log import read_job
from service.gateway.errors import ApiError, not_found, refused
from service.gateway.jobs import MARKER_KEY, JobKind, JobMarker, JobStatus, JobView
from service.gateway.keys import BEARER, CONCURRENCY_RETRY_AFTER_S, KeyEntry, KeyRing, admit
from service.gateway.maplinks import map_links
from service.gateway.mapping import Limits
from service.gateway.metrics import GatewayMetrics
from service.gateway.monitor_view import MonitorView
from service.gateway.results import Page, ResultReader
from service.gateway.view_reader import ViewReader
from service.monitors.writer import MonitorWriter
from service.net.policy import BlockedUrlError, UnresolvableHostError, UrlPolicy
from service.sealing.marker_auth import marker_secret, sealed
from service.sealing.targets import Sealer

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from pydantic import JsonValue

    from service.client import Submission
    from service.contracts import CrawlOptions, CrawlSpec
    from service.contracts_webhook import WebhookConfig
    from service.gateway.maplinks import MapPlan
    from service.gateway.options import ScrapeChoices
    from service.gateway.paging import Cursor
    from service.settings import Settings

OPEN_TENANT: Final = "open"
"""The tenant of every job when the gateway runs without API keys."""

MAP_TIMEOUT_MS: Final = 60_000
"""How long `POST /v2/map` waits without a `timeout` of its own."""

MAX_DELAY_MS: Final = 60_000
"""The contract's longest `delay_ms` (a crawl paced for fewer pages a minute gets this)."""

POLLED: Final = frozenset({"crawl", "batch"})
"""Job kinds whose results are read from their partition (the others are answered inline)."""

SETTLE_S: Final = 0.5
"""A job counted against its tenant's `max_concurrent_jobs` is held (its replica reads the
topics to their ends) no sooner than this after its marker was made; a job whose own produce
took longer gives up its rank and counts every running job of its tenant as ahead. So a job
ranked earlier but produced later than another replica's hold is either seen by that hold
or gives way (normal produces take milliseconds)."""


class Gateway:
    """The gateway's state: only connections and the view rebuilt from the topics."""

    def __init__(self, settings: Settings, metrics: GatewayMetrics | None = None) -> None:
        self.settings = settings
        self.limits = Limits.from_settings(settings)
        self.secret = marker_secret(settings)
        self.view = JobView(secret=self.secret)
        self.keys = KeyRing.load(settings.gateway_keys_file)
        self._sealer = Sealer.from_settings(settings)
        self._sealer.check(self.keys)
        self._policy = UrlPolicy.from_settings(settings)
        self._reads: dict[str, asyncio.Semaphore] = {}
        """Per tenant: its result reads running on this replica (`gateway_tenant_reads`)."""
        self._admitting: dict[str, asyncio.Lock] = {}
        """Per tenant: one admission at a time on this replica, so two concurrent starts
        cannot both pass a limit the first one fills."""
        self._stack = AsyncExitStack()
        self._client = CrawlClient(settings)
        self.monitors = MonitorView(secret=self.secret)
        """Monitors and their checks (`monitor_service.py` answers for them)."""
        self.monitor_writer = MonitorWriter(settings)
        self._reader = ViewReader(settings, self.view, self.monitors)
        failures = (metrics or GatewayMetrics()).reader_failures
        self._results = ResultReader(settings, on_failure=failures.inc)

    async def __aenter__(self) -> Self:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self._client)
            await stack.enter_async_context(self._reader)
            await stack.enter_async_context(self._results)
            await stack.enter_async_context(self.monitor_writer)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    @property
    def sealer(self) -> Sealer:
        """Seals webhook targets with their tenant (jobs' and monitors')."""
        return self._sealer

    @property
    def client(self) -> CrawlClient:
        return self._client

    @property
    def results(self) -> ResultReader:
        return self._results

    async def caught_up(self) -> None:
        """Every topic the view reads, read up to its end as it is now."""
        await self._reader.caught_up_all()

    async def check_webhook(self, webhook: WebhookConfig) -> None:
        await self._check_webhook(webhook)

    def max_concurrency(self, tenant: str) -> int:
        """The tenant's limit of jobs at once (without one: the cluster's in-flight limit)."""
        entry = self.entry_of(tenant)
        if entry is None or entry.max_concurrent_jobs is None:
            return self.settings.max_requests_in_flight
        return entry.max_concurrent_jobs

    def entry_of(self, tenant: str) -> KeyEntry | None:
        """The limits of `tenant` (its first key's, when it has several)."""
        return next((e for e in self.keys.entries if e.tenant == tenant), None)

    async def admit(self, tenant: str) -> None:
        """429 with `Retry-After` when the tenant is over a limit, counted over every replica:
        the view first reads the requests and progress topics up to their ends. Each check
        of the tenant's monitors still running counts as one of its jobs."""
        entry = self.entry_of(tenant)
        if entry is None:
            return
        await self._reader.caught_up_all()
        verdict = admit(
            entry,
            active=len(self.view.active(tenant=tenant)) + self.monitors.running_checks(tenant),
            recent_pages=self.view.recent_pages(tenant),
            now=utc_now(),
        )
        if not verdict.allowed:
            raise _over_limit(verdict.reason, verdict.retry_after_s)

    async def _hold(self, tenant: str, job_id: str, made_at: float) -> None:
        """After the job's request is on the topic (its marker made at `made_at`, monotonic):
        read every partition up to its end, no sooner than `SETTLE_S` after `made_at`, and
        keep the job only if fewer than the limit of the tenant's jobs rank before it (by
        creation, then id: every replica ranks alike). Two replicas that admitted at once
        see each other's jobs here, and the later one cancels its own with a 429. A job whose
        produce took longer than `SETTLE_S` ranks after every running job: another replica
        may have held a later one without seeing it."""
        entry = self.entry_of(tenant)
        if entry is None or entry.max_concurrent_jobs is None:
            return
        late = time.monotonic() - made_at > SETTLE_S
        await asyncio.sleep(max(0.0, made_at + SETTLE_S - time.monotonic()))
        await self._reader.caught_up_all()
        ahead = self.view.ahead_of(job_id, tenant, forfeit=late)
        if ahead >= entry.max_concurrent_jobs:
            await self._client.cancel(job_id, reason="over the tenant's concurrent jobs")
            self.view.withdrawn(job_id)
            raise _over_limit(
                f"{ahead} jobs running, the limit is {entry.max_concurrent_jobs}",
                CONCURRENCY_RETRY_AFTER_S,
            )

    def operator(self, authorization: str | None) -> bool:
        """Whether a caller may read `/metrics`: the operator's key, or an open gateway."""
        key = self.settings.gateway_metrics_key
        if key is None:
            return self.keys.open
        if not authorization or not authorization.lower().startswith(BEARER):
            return False
        token = authorization[len(BEARER) :].strip().encode()
        return hmac.compare_digest(key.get_secret_value().encode(), token)

    @property
    def ready(self) -> bool:
        """The job view is rebuilt and live, and every result reader serves."""
        return self._reader.ready.is_set() and self._reader.live and self._results.live

    async def start(
        self,
        kind: JobKind,
        urls: Sequence[str],
        options: CrawlOptions,
        choices: ScrapeChoices,
        *,
        tenant: str = OPEN_TENANT,
        crawl: CrawlSpec | None = None,
        echo: dict[str, JsonValue] | None = None,
        webhook: WebhookConfig | None = None,
    ) -> str:
        """Produce the job's request and return its id (the request_id); 429 over a limit."""
        if webhook is not None:
            await self._check_webhook(webhook)
        if crawl is not None:
            crawl = self._paced(tenant, crawl)
        job = _Job(
            kind=kind, id=str(uuid.uuid4()), urls=tuple(urls), options=options, tenant=tenant,
            choices=choices, crawl=crawl, echo=echo or {}, webhook=webhook,
        )  # fmt: skip
        await self._admitted(job)
        return job.id

    def _paced(self, tenant: str, crawl: CrawlSpec) -> CrawlSpec:
        """A crawl of a tenant with `pages_per_minute`, its pages of a host spaced so that its
        `max_concurrent_jobs` crawls of one host each stay within that rate as pages are
        rendered (not only at the next start); a slower `delay` asked for is kept."""
        entry = self.entry_of(tenant)
        if entry is None or entry.pages_per_minute is None:
            return crawl
        jobs = entry.max_concurrent_jobs or 1
        spacing_ms = min(MAX_DELAY_MS, math.ceil(60_000 * jobs / entry.pages_per_minute))
        return crawl.model_copy(update={"delay_ms": max(crawl.delay_ms, spacing_ms)})

    async def _admitted(self, job: _Job) -> Submission:
        """Admit, produce and hold `job` (one admission of a tenant at a time per replica)."""
        async with self._admitting.setdefault(job.tenant, asyncio.Lock()):
            await self.admit(job.tenant)
            submission, made_at = await self._submit(job)
            await self._hold(job.tenant, job.id, made_at)
            return submission

    async def _submit(self, job: _Job) -> tuple[Submission, float]:
        """Produce the job's request; its submission and when its marker was made
        (monotonic)."""
        partition, offset = 0, 0
        if job.kind in POLLED:
            positions = await self._client.output_positions(job.id)
            partition, offset = positions[self.settings.results_topic]
        made_at = time.monotonic()
        choices = job.choices
        marker = JobMarker(
            kind=job.kind,
            url=job.urls[0],
            tenant=job.tenant,
            created_at=utc_now(),
            results_partition=partition,
            results_offset=offset,
            formats=choices.formats if choices else (),
            full_page=choices.full_page if choices else False,
            remove_base64_images=choices.remove_base64_images if choices else True,
            warning=choices.warning if choices else None,
            options=job.echo,
        )
        metadata: dict[str, JsonValue] = {
            MARKER_KEY: sealed(self.secret, job.id, marker.model_dump(mode="json"))
        }
        if job.webhook is not None:
            metadata[WEBHOOK_KEY] = self._sealer.record(job.id, job.tenant, job.webhook)
        self._fits(metadata)
        submission = await self._client.submit(
            job.urls, job.options, request_id=job.id, metadata=metadata, crawl=job.crawl
        )
        self.view.submitted(job.id, marker)
        return submission, made_at

    def _fits(self, metadata: dict[str, JsonValue]) -> None:
        """400 when the request's metadata (the options echoed on every result and event)
        is over what a worker accepts: refused here rather than rejected there."""
        size = len(to_json(metadata))
        if size > self.settings.max_metadata_bytes:
            raise refused(
                ("body",),
                f"the options take {size} bytes as echoed on every result, more than the "
                f"{int(self.settings.max_metadata_bytes)} this cluster accepts",
            )

    async def _check_webhook(self, webhook: WebhookConfig) -> None:
        """400 for a webhook URL the egress policy forbids (a private address, a port), and
        for credentials this gateway could not keep out of the echo (no seal key)."""
        try:
            await self._policy.check_target(webhook.url)
        except (BlockedUrlError, UnresolvableHostError) as exc:
            raise refused(("webhook", "url"), f"refused by the egress policy: {exc}") from None
        refusal = self._sealer.refusal(webhook)
        if refusal is not None:
            raise refused(("webhook",), refusal)

    async def status(self, job_id: str, kind: JobKind, tenant: str) -> JobStatus:
        """The job as the view knows it; the view first catches up with the job's requests
        partition when the id is new to it (started through another replica just now)."""
        status = self.view.status(job_id)
        if status is None:
            await self._reader.caught_up(job_id)
            status = self.view.status(job_id)
        if status is None or status.marker.kind != kind or not self._sees(tenant, status):
            raise not_found("Job")
        return status

    def _sees(self, tenant: str, status: JobStatus) -> bool:
        return self.keys.open or status.marker.tenant == tenant

    async def page(self, status: JobStatus, cursor: Cursor, *, ok_only: bool = True) -> Page:
        """A page of the job's results, read in one of the tenant's turns (`reading`)."""
        async with self.reading(status, cursor, ok_only=ok_only) as page:
            return page

    @contextlib.asynccontextmanager
    async def reading(
        self, status: JobStatus, cursor: Cursor, *, ok_only: bool = True
    ) -> AsyncIterator[Page]:
        """A page of the job's results, in one of the tenant's turns, held until the block
        ends (the page encoded and sent): a tenant runs at most `gateway_tenant_reads` reads
        and answers at once on this replica (429 when its turn does not come in time), so
        its big pages take turns with each other, not with other tenants' calls."""
        async with self._read_turn(status.marker.tenant):
            yield await self._results.page(
                status.id,
                status.marker.results_partition,
                cursor,
                start=status.marker.results_offset,
                ok_only=ok_only,
            )

    @contextlib.asynccontextmanager
    async def _read_turn(self, tenant: str) -> AsyncIterator[None]:
        turns = self._reads.setdefault(
            tenant, asyncio.Semaphore(self.settings.gateway_tenant_reads)
        )
        try:
            async with asyncio.timeout(self.settings.kafka_timeout.total_seconds()):
                await turns.acquire()
        except TimeoutError:
            raise _over_limit("too many result reads of this tenant at once", 1) from None
        try:
            yield
        finally:
            turns.release()

    async def cancel(self, job_id: str) -> None:
        await self._client.cancel(job_id, reason="cancelled through the gateway")

    async def map(self, plan: MapPlan, *, tenant: str) -> list[str]:
        """Render the seed once (its links), read the sitemap, answer from the crawl's
        frontier records; 408 (and a cancel) after the plan's timeout. Counts as a job."""
        since_ms = int(time.time() * 1000)
        job = _Job(
            kind="map", id=str(uuid.uuid4()), urls=(plan.url,), options=plan.options,
            tenant=tenant, crawl=plan.spec,
        )  # fmt: skip
        submission = await self._admitted(job)
        timeout_s = (plan.timeout_ms or MAP_TIMEOUT_MS) / 1000
        try:
            async for _ in self._client.follow(submission, timeout_s=timeout_s):
                pass
        except FollowTimeoutError:
            await self.cancel(job.id)
            raise ApiError(status=408, message="Map timed out") from None
        records = await read_job(self.settings, job.id, submission.source, since_ms=since_ms)
        return map_links(plan, records)

    async def scrape(
        self, url: str, options: CrawlOptions, *, tenant: str, timeout_s: float
    ) -> PageResult:
        """Submit one URL and wait for its result; 408 (and a cancel) after `timeout_s`.
        Counts as a one-page job against the tenant's limits while it runs."""
        job = _Job(kind="scrape", id=str(uuid.uuid4()), urls=(url,), options=options, tenant=tenant)
        submission = await self._admitted(job)
        ended: ProgressEvent | None = None
        try:
            async for message in self._client.follow(submission, timeout_s=timeout_s):
                if isinstance(message, PageResult):
                    return message
                if message.is_terminal:
                    ended = message
        except FollowTimeoutError:
            await self.cancel(job.id)
            raise ApiError(status=408, message="Request timed out") from None
        if ended is not None and ended.type == EventType.REJECTED:
            raise refused(("body",), f"the worker rejected the request: {ended.detail}")
        raise ApiError(status=500, message="the request ended without a result")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Job:
    """A call to produce: a polled job (crawl, batch) or a synchronous one (scrape, map)."""

    kind: JobKind
    id: str
    urls: tuple[str, ...]
    options: CrawlOptions
    tenant: str
    choices: ScrapeChoices | None = None
    crawl: CrawlSpec | None = None
    echo: dict[str, JsonValue] = field(default_factory=dict)
    webhook: WebhookConfig | None = None


def _over_limit(reason: str, retry_after_s: int) -> ApiError:
    return ApiError(
        status=429,
        message=f"Rate limit exceeded: {reason}",
        headers={"Retry-After": str(retry_after_s)},
    )
