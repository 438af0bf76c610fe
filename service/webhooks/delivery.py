"""POSTs one webhook event: signed, retried with backoff, only to addresses the egress
policy allows (resolved once and connected to as checked: no DNS rebinding). Redirects are
never followed: a 3xx is a failed delivery, so nothing signed goes where it was not aimed."""

from __future__ import annotations

import asyncio
import json
import socket
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Self

import aiohttp
import structlog
from aiohttp.abc import AbstractResolver, ResolveResult

from service.backoff import backoff_s
from service.net.policy import BlockedUrlError, UnresolvableHostError, UrlPolicy
from service.webhooks.payloads import EVENT_ID_HEADER, SIGNATURE_HEADER, signature

if TYPE_CHECKING:
    from service.sealing.targets import Target
    from service.settings import Settings
    from service.webhooks.payloads import WebhookEvent

log = structlog.get_logger(__name__)

RETRY_BASE_S: Final = 0.5
RETRY_MAX_S: Final = 30.0

PERMANENT_STATUSES: Final = frozenset({400, 401, 403, 404, 405, 410, 413, 422})
"""Answers that another try will not change: the event is dropped at once."""


class Outcome(StrEnum):
    """What one attempt came to."""

    OK = "ok"
    RETRY = "retry"
    PERMANENT = "permanent"
    """An answer another try will not change (see PERMANENT_STATUSES)."""
    REDIRECT = "redirect"
    """A 3xx: never followed (a signed POST is not re-aimed), the event is dropped."""
    BLOCKED = "blocked"
    """The egress policy forbids the target."""


class _PolicyResolver(AbstractResolver):
    """Resolves through the URL policy: a name that resolves to a forbidden address fails."""

    def __init__(self, policy: UrlPolicy) -> None:
        self._policy = policy

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        del family
        addresses = await self._policy.resolve_and_check(host, port)
        return [
            ResolveResult(
                hostname=host,
                host=str(address),
                port=port,
                family=socket.AF_INET6 if address.version == 6 else socket.AF_INET,  # noqa: PLR2004
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in addresses
        ]

    async def close(self) -> None:
        return None


class Deliverer:
    """Delivers events; an async context manager holding one HTTP session."""

    def __init__(self, settings: Settings) -> None:
        self._policy = UrlPolicy.from_settings(settings)
        self._attempts = settings.webhook_attempts
        self._timeout = aiohttp.ClientTimeout(total=settings.webhook_timeout.total_seconds())
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        connector = aiohttp.TCPConnector(resolver=_PolicyResolver(self._policy))
        self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def deliver(self, target: Target, event: WebhookEvent, *, secret: str | None) -> bool:
        """True once the receiver answered 2xx; False when it was given up (logged)."""
        raw = json.dumps(event.body, separators=(",", ":")).encode()
        headers = _headers(target, event, raw, secret)
        outcome = Outcome.RETRY
        for attempt in range(self._attempts):
            if attempt:
                await asyncio.sleep(backoff_s(attempt - 1, base_s=RETRY_BASE_S, max_s=RETRY_MAX_S))
            outcome = await self._post(target, raw, headers)
            if outcome is Outcome.OK:
                return True
            if outcome is not Outcome.RETRY:
                break
        log.warning(
            "webhook.dropped", receiver=target.origin, event_id=event.id, reason=str(outcome)
        )
        return False

    async def _post(self, target: Target, raw: bytes, headers: dict[str, Any]) -> Outcome:
        if self._session is None:
            raise RuntimeError("Deliverer used outside its context")
        try:
            self._policy.check_url(target.url)
            async with self._session.post(
                target.url, data=raw, headers=headers, allow_redirects=False
            ) as response:
                return _outcome(response.status)
        except (BlockedUrlError, ValueError) as exc:
            log.warning("webhook.blocked", receiver=target.origin, error=_scrubbed(exc, target))
            return Outcome.BLOCKED
        except (aiohttp.ClientError, TimeoutError, UnresolvableHostError, OSError) as exc:
            log.info("webhook.retry", receiver=target.origin, error=_scrubbed(exc, target))
            return Outcome.RETRY


def _scrubbed(exc: Exception, target: Target) -> str:
    """The error as a log line may show it: the target's URL (its path and query may carry
    a token) replaced by its origin."""
    return repr(exc).replace(target.url, target.origin)


def _outcome(status: int) -> Outcome:
    if status < 300:  # noqa: PLR2004
        return Outcome.OK
    if status < 400:  # noqa: PLR2004
        return Outcome.REDIRECT
    return Outcome.PERMANENT if status in PERMANENT_STATUSES else Outcome.RETRY


def _headers(target: Target, event: WebhookEvent, raw: bytes, secret: str | None) -> dict[str, str]:
    headers = {**target.headers, "Content-Type": "application/json", EVENT_ID_HEADER: event.id}
    if secret is not None:
        headers[SIGNATURE_HEADER] = signature(secret, raw)
    return headers
