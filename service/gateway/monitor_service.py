"""What the monitor routes call: write monitors, run checks by hand, read a check's pages and
summary. Keeps only what another replica would rebuild (the view) and the summaries of ended
checks (they no longer change)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from service.contracts import utc_now
from service.contracts_monitors import MonitorRecord
from service.contracts_webhook import SealedWebhook, WebhookConfig
from service.gateway import monitor_bodies as bodies
from service.gateway.errors import Detail, bad_request, not_found
from service.gateway.paging import Cursor
from service.messaging.metadata import partitions_of
from service.messaging.topics import partition_for
from service.monitors.checks import MONITOR_HOOKS
from service.monitors.manual import run_by_hand
from service.monitors.schedule import Schedule
from service.monitors.signing import signed_record, webhook_job
from service.monitors.summary import Summary, summarise
from service.sealing.targets import TargetError

if TYPE_CHECKING:
    from datetime import datetime

    from service.contracts import PageResult
    from service.gateway.monitor_view import Check
    from service.gateway.service import Gateway


class MonitorDesk:
    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._settings = gateway.settings
        self._summaries: dict[str, Summary] = {}
        self._results_partitions = 0

    @property
    def _open(self) -> bool:
        return self._gateway.keys.open

    async def find(self, monitor_id: str, tenant: str) -> MonitorRecord:
        """The tenant's monitor (after catching up with the topics when unknown here); 404."""
        view = self._gateway.monitors
        if monitor_id not in view.monitors:
            await self._gateway.caught_up()
        record = view.monitors.get(monitor_id)
        if record is None or not (self._open or record.tenant == tenant):
            raise not_found("Monitor")
        return record

    def listed(self, tenant: str) -> list[MonitorRecord]:
        return self._gateway.monitors.of_tenant(tenant, open_gateway=self._open)

    async def create(self, body: dict[str, Any], tenant: str) -> MonitorRecord:
        bodies.refuse_unsupported(body)
        now = utc_now()
        monitor_id = uuid.uuid4().hex
        record = MonitorRecord(
            id=monitor_id,
            name=_name(body.get("name")),
            tenant=tenant,
            schedule=bodies.schedule_of(
                body.get("schedule"), minimum=self._settings.monitor_min_interval, now=now
            ),
            targets=bodies.targets_of(body.get("targets"), limits=self._gateway.limits),
            webhook=await self._webhook(body.get("webhook"), monitor_id, tenant),
            retention_days=bodies.retention_of(body, 30),
            tag=f"monitor:{monitor_id}",
            created_at=now,
            updated_at=now,
            schedule_since=now,
        )
        return await self._put(record)

    async def update(self, monitor_id: str, body: dict[str, Any], tenant: str) -> MonitorRecord:
        bodies.refuse_unsupported(body)
        record = await self.find(monitor_id, tenant)
        now = utc_now()
        changes: dict[str, Any] = {"updated_at": now}
        if body.get("name") is not None:
            changes["name"] = _name(body["name"])
        if body.get("schedule") is not None:
            minimum = self._settings.monitor_min_interval
            changes["schedule"] = bodies.schedule_of(body["schedule"], minimum=minimum, now=now)
            changes["schedule_since"] = now
        if body.get("targets") is not None:
            changes["targets"] = bodies.targets_of(body["targets"], limits=self._gateway.limits)
        if "webhook" in body:
            changes["webhook"] = await self._webhook(body["webhook"], record.id, tenant)
        if body.get("retentionDays") is not None:
            changes["retention_days"] = bodies.retention_of(body, record.retention_days)
        status = body.get("status")
        if status is not None:
            if status not in {"active", "paused"}:
                raise bad_request(Detail(path=("status",), message="`active` or `paused`"))
            changes["status"] = status
            if status == "active" and record.status == "paused":
                changes["schedule_since"] = now  # ticks missed while paused do not fire
        return await self._put(record.model_copy(update=changes))

    async def delete(self, monitor_id: str, tenant: str) -> None:
        await self.find(monitor_id, tenant)
        await self._gateway.monitor_writer.delete(monitor_id)
        self._gateway.monitors.monitors.pop(monitor_id, None)

    async def run(self, monitor_id: str, tenant: str) -> Check:
        """A check by hand: its requests produced now, as a scheduled tick's would be."""
        record = await self.find(monitor_id, tenant)
        await self._gateway.admit(tenant)
        client = self._gateway.client
        check, requests = await run_by_hand(client, record, self._settings)
        for request in requests:
            self._gateway.monitors.request(request.request_id, request.metadata, utc_now())
        return self._gateway.monitors.checks[check]

    async def check(self, monitor_id: str, check_id: str, tenant: str) -> Check:
        await self.find(monitor_id, tenant)
        found = self._gateway.monitors.checks.get(check_id)
        if found is None:
            await self._gateway.caught_up()
            found = self._gateway.monitors.checks.get(check_id)
        if found is None or found.monitor_id != monitor_id:
            raise not_found("Check")
        return found

    def checks(self, record: MonitorRecord) -> list[Check]:
        """The monitor's checks within its retention, newest first."""
        oldest = utc_now().timestamp() - record.retention_days * 86_400
        return [
            check
            for check in self._gateway.monitors.checks_of(record.id)
            if check.created_at.timestamp() >= oldest
        ]

    async def pages(self, check: Check) -> list[tuple[PageResult, str]]:
        """Every result of the check's requests so far, with its target id."""
        if not self._results_partitions:
            topic = self._settings.results_topic
            self._results_partitions = len(await partitions_of(self._settings, topic))
        found: list[tuple[PageResult, str]] = []
        for request in check.requests.values():
            partition = partition_for(request.request_id, self._results_partitions)
            cursor = Cursor(offset=request.results_offset)
            while True:
                page = await self._gateway.results.page(
                    request.request_id,
                    partition,
                    cursor,
                    start=request.results_offset,
                    ok_only=False,
                )
                found.extend((result, request.target_id) for result in page.results)
                if page.at_end:
                    break
                cursor = page.next
        return found

    async def summary(self, check: Check) -> Summary:
        if check.id in self._summaries:
            return self._summaries[check.id]
        snapshot = check.snapshot()
        return self.summary_of(snapshot, await self.pages(snapshot))

    def summary_of(self, snapshot: Check, pages: list[tuple[PageResult, str]]) -> Summary:
        """The summary of `pages`, read after `snapshot` was taken; kept once it is final."""
        summary = summarise(result for result, _ in pages)
        if snapshot.terminal:
            self._summaries[snapshot.id] = summary
        return summary

    def next_run(self, record: MonitorRecord) -> datetime | None:
        if record.status == "paused":
            return None
        spec = record.schedule
        schedule = Schedule.of(cron=spec.cron, text=spec.text, timezone=spec.timezone)
        return schedule.next_after(max(utc_now(), record.schedule_since))

    async def _webhook(self, raw: object, monitor_id: str, tenant: str) -> dict[str, Any] | None:
        """The webhook as the record keeps it: sealed with the tenant (as a job's), so the
        dispatcher signs its events with the tenant's own secret; plain without a seal key."""
        webhook = bodies.webhook_of(raw)
        if webhook is None:
            return None
        config = WebhookConfig(
            url=webhook["url"],
            metadata=webhook["metadata"],
            events=tuple(MONITOR_HOOKS[event] for event in webhook["events"]),
        )
        await self._gateway.check_webhook(config)
        if self._gateway.sealer.key is None:
            return webhook
        return self._gateway.sealer.record(webhook_job(monitor_id), tenant, config)

    def webhook_shown(self, record: MonitorRecord) -> dict[str, Any] | None:
        """The monitor's webhook as Firecrawl shows it (a sealed one opened)."""
        hook = record.webhook
        if hook is None or "sealed" not in hook:
            return hook
        try:
            target = self._gateway.sealer.open(
                webhook_job(record.id), SealedWebhook.model_validate(hook)
            )
        except (TargetError, ValidationError):
            return None
        events = [name for name, hooked in MONITOR_HOOKS.items() if hooked in target.events]
        return {"url": target.url, "metadata": dict(target.metadata), "events": events}

    async def _put(self, record: MonitorRecord) -> MonitorRecord:
        record = signed_record(self._gateway.secret, record)
        await self._gateway.monitor_writer.put(record)
        self._gateway.monitors.monitors[record.id] = record
        return record


def _name(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 256:  # noqa: PLR2004
        raise bad_request(Detail(path=("name",), message="1 to 256 characters"))
    return value
