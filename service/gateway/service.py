"""What the routes call: start jobs, answer for them, scrape one page. Holds the Kafka client,
the job view and the result reader; keeps nothing that another replica would not know."""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Final, Self

from service.client import CrawlClient, FollowTimeoutError
from service.contracts import PageResult, utc_now
from service.contracts_webhook import WEBHOOK_KEY
from service.frontier.log import read_job
from service.gateway.errors import ApiError, not_found, refused
from service.gateway.jobs import MARKER_KEY, JobKind, JobMarker, JobStatus, JobView
from service.gateway.keys import KeyEntry, KeyRing, admit
from service.gateway.maplinks import map_links
from service.gateway.mapping import Limits
from service.gateway.results import Page, ResultReader
from service.gateway.view_reader import ViewReader
from service.net.policy import BlockedUrlError, UnresolvableHostError, UrlPolicy
from service.webhooks.targets import Sealer

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pydantic import JsonValue

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

SCRAPE_KEY: Final = "firecrawl_scrape"
"""The metadata key of a synchronous scrape's request (its tenant): not a job of the view."""


class Gateway:
    """The gateway's state: only connections and the view rebuilt from the topics."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.limits = Limits.from_settings(settings)
        self.view = JobView()
        self.keys = KeyRing.load(settings.gateway_keys_file)
        self._sealer = Sealer.from_settings(settings)
        self._sealer.check(self.keys)
        self._policy = UrlPolicy.from_settings(settings)
        self._admitting: dict[str, asyncio.Lock] = {}
        """Per tenant: one admission at a time on this replica, so two concurrent starts
        cannot both pass a limit the first one fills."""
        self._stack = AsyncExitStack()
        self._client = CrawlClient(settings)
        self._reader = ViewReader(settings, self.view)
        self._results = ResultReader(settings)

    async def __aenter__(self) -> Self:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self._client)
            await stack.enter_async_context(self._reader)
            await stack.enter_async_context(self._results)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

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
        the view first reads the requests and progress topics up to their ends."""
        entry = self.entry_of(tenant)
        if entry is None:
            return
        await self._reader.caught_up_all()
        verdict = admit(
            entry,
            active=len(self.view.active(tenant=tenant)),
            recent_pages=self.view.recent_pages(tenant),
            now=utc_now(),
        )
        if not verdict.allowed:
            raise ApiError(
                status=429,
                message=f"Rate limit exceeded: {verdict.reason}",
                headers={"Retry-After": str(verdict.retry_after_s)},
            )

    @property
    def ready(self) -> bool:
        return self._reader.ready.is_set()

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
        async with self._admitting.setdefault(tenant, asyncio.Lock()):
            await self.admit(tenant)
            return await self._start(
                kind, urls, options, choices, tenant=tenant, crawl=crawl, echo=echo,
                webhook=webhook,
            )  # fmt: skip

    async def _start(
        self,
        kind: JobKind,
        urls: Sequence[str],
        options: CrawlOptions,
        choices: ScrapeChoices,
        *,
        tenant: str,
        crawl: CrawlSpec | None,
        echo: dict[str, JsonValue] | None,
        webhook: WebhookConfig | None,
    ) -> str:
        job_id = str(uuid.uuid4())
        partition, offset = (await self._client.output_positions(job_id))[
            self.settings.results_topic
        ]
        marker = JobMarker(
            kind=kind,
            url=urls[0],
            tenant=tenant,
            created_at=utc_now(),
            results_partition=partition,
            results_offset=offset,
            formats=choices.formats,
            full_page=choices.full_page,
            remove_base64_images=choices.remove_base64_images,
            warning=choices.warning,
            options=echo or {},
        )
        metadata: dict[str, JsonValue] = {MARKER_KEY: marker.model_dump(mode="json")}
        if webhook is not None:
            metadata[WEBHOOK_KEY] = self._sealer.record(job_id, tenant, webhook)
        await self._client.submit(urls, options, request_id=job_id, metadata=metadata, crawl=crawl)
        self.view.submitted(job_id, marker)
        return job_id

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
        return await self._results.page(
            status.id, status.marker.results_partition, cursor, ok_only=ok_only
        )

    async def cancel(self, job_id: str) -> None:
        await self._client.cancel(job_id, reason="cancelled through the gateway")

    async def map(self, plan: MapPlan, *, tenant: str) -> list[str]:
        """Render the seed once (its links), read the sitemap, answer from the crawl's
        frontier records; 408 (and a cancel) after the plan's timeout."""
        job_id = str(uuid.uuid4())
        since_ms = int(time.time() * 1000)
        metadata: dict[str, JsonValue] = {SCRAPE_KEY: {"tenant": tenant, "kind": "map"}}
        submission = await self._client.submit(
            [plan.url], plan.options, request_id=job_id, metadata=metadata, crawl=plan.spec
        )
        timeout_s = (plan.timeout_ms or MAP_TIMEOUT_MS) / 1000
        try:
            async for _ in self._client.follow(submission, timeout_s=timeout_s):
                pass
        except FollowTimeoutError:
            await self.cancel(job_id)
            raise ApiError(status=408, message="Map timed out") from None
        records = await read_job(self.settings, job_id, submission.source, since_ms=since_ms)
        return map_links(plan, records)

    async def scrape(
        self, url: str, options: CrawlOptions, *, tenant: str, timeout_s: float
    ) -> PageResult:
        """Submit one URL and wait for its result; 408 (and a cancel) after `timeout_s`."""
        job_id = str(uuid.uuid4())
        metadata: dict[str, JsonValue] = {SCRAPE_KEY: {"tenant": tenant}}
        submission = await self._client.submit([url], options, request_id=job_id, metadata=metadata)
        try:
            async for message in self._client.follow(submission, timeout_s=timeout_s):
                if isinstance(message, PageResult):
                    return message
        except FollowTimeoutError:
            await self.cancel(job_id)
            raise ApiError(status=408, message="Request timed out") from None
        raise ApiError(status=500, message="the request ended without a result")
