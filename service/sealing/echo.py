"""A Kafka producer's webhook as the worker echoes it. A request's metadata travels on every
result and progress event, so a webhook that carries credentials (custom headers, or a URL
with user info, a query or a fragment) is sealed at intake, as the gateway seals its jobs'
webhooks: the dispatcher opens it with the same key and signs with the shared secret. A
worker without a seal key rejects such a request rather than echo its credentials."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError

from service.contracts import DeadLetterCode
from service.contracts_webhook import WEBHOOK_KEY, WebhookConfig
from service.errors import RejectedMessageError
from service.sealing.targets import SEAL_KEY_SETTING, Sealer, carries_credentials

if TYPE_CHECKING:
    from service.contracts import CrawlRequest


def sealed_echo(request: CrawlRequest, sealer: Sealer) -> CrawlRequest:
    """`request` with its plain `metadata.webhook` sealed when it carries credentials; as
    given otherwise (no webhook, one without credentials, one already sealed, or one the
    dispatcher cannot read and skips). RejectedMessageError when it carries credentials
    and this worker has no seal key."""
    try:
        hook = WebhookConfig.of(request.metadata)
    except ValidationError:
        return request
    if not isinstance(hook, WebhookConfig) or not carries_credentials(hook):
        return request
    if sealer.key is None:
        raise RejectedMessageError(
            DeadLetterCode.INVALID_REQUEST,
            f"metadata.webhook: headers or a URL with a query or user info would be echoed "
            f"on every result and event; set {SEAL_KEY_SETTING} (or CRAWL_WEBHOOK_SECRET) on "
            "the workers and the dispatcher, or go through the gateway",
            request.request_id,
        )
    echoed = sealer.record(request.request_id, None, hook)
    return request.model_copy(update={"metadata": request.metadata | {WEBHOOK_KEY: echoed}})
