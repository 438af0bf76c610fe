"""POSTs one webhook event: signed, retried with backoff, only to addresses the egress
policy allows (resolved once and connected to as checked: no DNS rebinding)."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import TYPE_CHECKING, Any, Final, Self

import aiohttp
import structlog
from aiohttp.abc import AbstractResolver, ResolveResult

from service.backoff import backoff_s
from service.net.policy import BlockedUrlError, UnresolvableHostError, UrlPolicy
from service.webhooks.payloads import EVENT_ID_HEADER, SIGNATURE_HEADER, signature

if TYPE_CHECKING:
    from service.contracts_webhook import WebhookConfig
    from service.settings import Settings
    from service.webhooks.payloads import WebhookEvent

log = structlog.get_logger(__name__)

RETRY_BASE_S: Final = 0.5
RETRY_MAX_S: Final = 30.0

PERMANENT_STATUSES: Final = frozenset({400, 401, 403, 404, 405, 410, 413, 422})
"""Answers that another try will not change: the event is dropped at once."""


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
        secret = settings.webhook_secret
        self._secret = secret.get_secret_value() if secret is not None else None
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

    def check(self, url: str) -> None:
        """Raise BlockedUrlError for a URL the policy forbids (without DNS)."""
        self._policy.check_url(url)

    async def deliver(self, config: WebhookConfig, event: WebhookEvent) -> bool:
        """True once the receiver answered 2xx; False when it was given up (logged)."""
        raw = json.dumps(event.body, separators=(",", ":")).encode()
        headers = self._headers(config, event, raw)
        for attempt in range(self._attempts):
            outcome = await self._post(config.url, raw, headers)
            if outcome == "ok":
                return True
            if outcome == "permanent":
                break
            await asyncio.sleep(backoff_s(attempt, base_s=RETRY_BASE_S, max_s=RETRY_MAX_S))
        log.warning("webhook.dropped", url=config.url, event=event.id)
        return False

    def _headers(self, config: WebhookConfig, event: WebhookEvent, raw: bytes) -> dict[str, str]:
        headers = {**config.headers, "Content-Type": "application/json", EVENT_ID_HEADER: event.id}
        if self._secret is not None:
            headers[SIGNATURE_HEADER] = signature(self._secret, raw)
        return headers

    async def _post(self, url: str, raw: bytes, headers: dict[str, Any]) -> str:
        if self._session is None:
            raise RuntimeError("Deliverer used outside its context")
        try:
            self._policy.check_url(url)
            async with self._session.post(url, data=raw, headers=headers) as response:
                if response.status < 300:  # noqa: PLR2004
                    return "ok"
                return "permanent" if response.status in PERMANENT_STATUSES else "retry"
        except (BlockedUrlError, ValueError) as exc:
            log.warning("webhook.blocked", url=url, error=str(exc))
            return "permanent"
        except (aiohttp.ClientError, TimeoutError, UnresolvableHostError, OSError) as exc:
            log.info("webhook.retry", url=url, error=repr(exc))
            return "retry"
