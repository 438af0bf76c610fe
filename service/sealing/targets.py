"""Where a job's webhook goes and which key signs it. The gateway seals each job's target (URL,
headers) with its tenant; the dispatcher opens it and signs the events with that tenant's own
secret. Pure: the seal key and the secrets come from the settings and the keys file."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from service.contracts_webhook import SealedWebhook, WebhookConfig
from service.errors import ConfigurationError
from service.sealing.seal import SealError, derive, open_sealed, seal

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pydantic import JsonValue, SecretStr

    from service.contracts_webhook import Hook
    from service.settings import Settings

SEAL_KEY_SETTING: Final = "CRAWL_WEBHOOK_SEAL_KEY"


class TenantKey(Protocol):
    """One entry of the gateway's keys file, as far as webhooks care."""

    @property
    def tenant(self) -> str: ...
    @property
    def webhook_secret(self) -> SecretStr | None: ...


class KeyRing(Protocol):
    """The gateway's keys file (`gateway.keys.KeyRing`): its entries, and whether it is open."""

    @property
    def entries(self) -> Sequence[TenantKey]: ...
    @property
    def open(self) -> bool: ...


class TargetError(ValueError):
    """A webhook that cannot be used: a seal that does not open, or one of another job."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One job's webhook, ready to deliver to."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    metadata: dict[str, JsonValue] = field(default_factory=dict)
    events: tuple[Hook, ...] = ()
    tenant: str | None = None
    """The gateway tenant the seal names; None for a Kafka producer's plain webhook."""

    @property
    def origin(self) -> str:
        """`scheme://host:port`: the receiver, as lanes and log lines name it (never the
        path or query, which may carry a token)."""
        return origin_of(self.url)


def origin_of(url: str) -> str:
    """`scheme://host:port` of a URL; `invalid` when it does not parse."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname or ""
    except ValueError:
        return "invalid"
    shown = f"[{host}]" if ":" in host else host
    return f"{parts.scheme.lower()}://{shown}:{port}"


class _SealedTarget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    job: str
    tenant: str | None = None
    """None: a Kafka producer's webhook, sealed by the worker that took the request."""
    url: str = Field(min_length=1, max_length=4096)
    headers: dict[str, str] = Field(default_factory=dict)


def carries_credentials(config: WebhookConfig) -> bool:
    """Whether echoing the webhook as given would echo a credential: custom headers, or a URL
    with user info, a query or a fragment."""
    parts = urlsplit(config.url)
    return bool(config.headers or parts.username or parts.password or parts.query or parts.fragment)


@dataclass(frozen=True, slots=True)
class Sealer:
    """Seals (gateway) and opens (dispatcher) job webhook targets; `key` None: no seal key is
    configured, so only webhooks without credentials are accepted, as given."""

    key: bytes | None

    @classmethod
    def from_settings(cls, settings: Settings) -> Sealer:
        """The key of `CRAWL_WEBHOOK_SEAL_KEY`, else of `CRAWL_WEBHOOK_SECRET`."""
        material = settings.webhook_seal_key or settings.webhook_secret
        return cls(None if material is None else derive(material.get_secret_value().encode()))

    def check(self, keys: KeyRing) -> None:
        """ConfigurationError when tenants have their own webhook secrets but nothing can
        say which tenant a webhook is of (no seal key)."""
        if self.key is None and any(e.webhook_secret for e in keys.entries):
            message = f"keys with a webhook_secret need {SEAL_KEY_SETTING} (or a webhook secret)"
            raise ConfigurationError(message)

    def refusal(self, config: WebhookConfig) -> str | None:
        """Why the gateway cannot take this webhook (credentials it could not seal)."""
        if self.key is None and carries_credentials(config):
            return (
                f"a webhook with headers or a URL query needs {SEAL_KEY_SETTING} on this "
                "gateway (credentials are never echoed)"
            )
        return None

    def record(
        self, job_id: str, tenant: str | None, config: WebhookConfig
    ) -> dict[str, JsonValue]:
        """What the gateway writes as the request's `metadata.webhook` (checked first with
        `refusal`)."""
        refusal = self.refusal(config)
        if refusal is not None:
            raise TargetError(refusal)
        if self.key is None:
            return config.model_dump(mode="json")
        inner = _SealedTarget(job=job_id, tenant=tenant, url=config.url, headers=config.headers)
        token = seal(self.key, inner.model_dump_json().encode())
        sealed = SealedWebhook(sealed=token, metadata=config.metadata, events=config.events)
        return sealed.model_dump(mode="json")

    def open(self, job_id: str, hook: WebhookConfig | SealedWebhook) -> Target:
        """The target of a request's webhook; TargetError when a seal cannot be used."""
        if isinstance(hook, WebhookConfig):
            return Target(
                url=hook.url, headers=hook.headers, metadata=hook.metadata, events=hook.events
            )
        if self.key is None:
            raise TargetError(f"a sealed webhook, but no {SEAL_KEY_SETTING} here")
        try:
            inner = _SealedTarget.model_validate(json.loads(open_sealed(self.key, hook.sealed)))
        except (SealError, ValidationError, ValueError) as exc:
            raise TargetError(str(exc)) from None
        if inner.job != job_id:
            raise TargetError("the sealed webhook is another job's")
        return Target(
            url=inner.url,
            headers=inner.headers,
            metadata=hook.metadata,
            events=hook.events,
            tenant=inner.tenant,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SigningKeys:
    """Which secret signs a target's events: its tenant's own (keys file `webhook_secret`);
    the shared `CRAWL_WEBHOOK_SECRET` for a gateway without keys and for Kafka producers'
    plain webhooks; none (unsigned) for a tenant without a secret of its own."""

    shared: str | None = None
    tenants: Mapping[str, str] = field(default_factory=dict)
    keyed: bool = False

    @classmethod
    def of(cls, settings: Settings, keys: KeyRing) -> SigningKeys:
        shared = settings.webhook_secret
        tenants = {
            e.tenant: e.webhook_secret.get_secret_value()
            for e in reversed(keys.entries)  # a tenant's first key's secret wins
            if e.webhook_secret is not None
        }
        return cls(
            shared=None if shared is None else shared.get_secret_value(),
            tenants=tenants,
            keyed=not keys.open,
        )

    def secret_for(self, target: Target) -> str | None:
        if target.tenant is None or not self.keyed:
            return self.shared
        return self.tenants.get(target.tenant)
