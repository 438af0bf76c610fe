"""Webhooks for every job, gateway or Kafka producer alike: `metadata.webhook` on a request
gets `started`, one `page` per document, then `completed` or `failed`, signed and retried.
"""

from __future__ import annotations

from service.contracts_webhook import WebhookConfig
from service.webhooks.dispatcher import Dispatcher
from service.webhooks.payloads import signature, verify

__all__ = ["Dispatcher", "WebhookConfig", "signature", "verify"]
