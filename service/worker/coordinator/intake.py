"""Turn a record of the requests topic into a `CrawlRequest`, or say exactly why not."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Final

from pydantic import ValidationError
from pydantic_core import to_json

from service.contracts import SCHEMA_VERSION, CrawlRequest, DeadLetterCode
from service.errors import RejectedMessageError
from service.sealing.echo import sealed_echo
from service.sealing.targets import Sealer

if TYPE_CHECKING:
    from service.settings import Settings

_REQUEST_ID: Final = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

TOO_DEEP: Final = "nested too deeply to parse"

INVALID_SELECTOR: Final = "invalid_selector"
"""pydantic's error type for a CSS selector that does not parse (`css_problem`): its request is
rejected with `DeadLetterCode.INVALID_SELECTOR`."""

INSECURE_TLS_REFUSED: Final = (
    "this worker verifies every certificate (CRAWL_ALLOW_INSECURE_TLS is off)"
)

MAX_ERROR_MESSAGE: Final = 1000
"""Longest error message put in a dead letter's headers."""


def parse_request(value: bytes | None, settings: Settings) -> CrawlRequest:
    """The request in `value`; raises `RejectedMessageError` with a code and a message."""
    if value is None:
        raise RejectedMessageError(DeadLetterCode.EMPTY, "the message has no value")
    if len(value) > settings.max_request_bytes:
        raise RejectedMessageError(
            DeadLetterCode.TOO_LARGE, f"{len(value)} bytes, more than {settings.max_request_bytes}"
        )
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RejectedMessageError(DeadLetterCode.NOT_UTF8, str(exc)) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RejectedMessageError(DeadLetterCode.NOT_JSON, str(exc)) from None
    except RecursionError:
        raise RejectedMessageError(DeadLetterCode.INVALID_REQUEST, TOO_DEEP) from None
    if not isinstance(document, dict):
        raise RejectedMessageError(
            DeadLetterCode.NOT_OBJECT, f"a JSON {type(document).__name__}, not an object"
        )
    request_id = _readable_id(document)
    version = document.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise RejectedMessageError(
            DeadLetterCode.UNSUPPORTED_SCHEMA_VERSION,
            f"schema_version {version!r}, this worker reads {SCHEMA_VERSION}",
            request_id,
        )
    try:
        request = CrawlRequest.model_validate(
            document,
            context={
                "max_urls": settings.max_urls_per_request,
                "max_crawl_pages": settings.max_crawl_pages,
                "lenient_schemes": True,
                "proxy_pools": frozenset(settings.proxies),
            },
        )
    except ValidationError as exc:
        raise RejectedMessageError(_code_of(exc), _describe(exc), request_id) from None
    except RecursionError:
        raise RejectedMessageError(DeadLetterCode.INVALID_REQUEST, TOO_DEEP, request_id) from None
    request = sealed_echo(request, Sealer.from_settings(settings))
    _check_metadata(request, settings)
    _check_tls(request, settings)
    return request


def _check_tls(request: CrawlRequest, settings: Settings) -> None:
    """Certificates go unverified only where the operator allows it."""
    if request.options.skip_tls_verification and not settings.allow_insecure_tls:
        raise RejectedMessageError(
            DeadLetterCode.INVALID_REQUEST,
            f"options.skip_tls_verification: {INSECURE_TLS_REFUSED}",
            request.request_id,
        )


def _check_metadata(request: CrawlRequest, settings: Settings) -> None:
    """The metadata is echoed on every message: measured as it will be echoed, not as sent
    (`1e5` is echoed as `100000.0`)."""
    echoed = len(to_json(request.metadata))
    if echoed > settings.max_metadata_bytes:
        raise RejectedMessageError(
            DeadLetterCode.INVALID_REQUEST,
            f"metadata: {echoed} bytes as echoed, more than {settings.max_metadata_bytes}",
            request.request_id,
        )


def _readable_id(document: dict[str, object]) -> str | None:
    candidate = document.get("request_id")
    if isinstance(candidate, str) and _REQUEST_ID.match(candidate):
        return candidate
    return None


def _code_of(exc: ValidationError) -> DeadLetterCode:
    """`invalid_selector` when a selector is what is wrong, else `invalid_request`."""
    if any(error["type"] == INVALID_SELECTOR for error in exc.errors()):
        return DeadLetterCode.INVALID_SELECTOR
    return DeadLetterCode.INVALID_REQUEST


def _describe(exc: ValidationError) -> str:
    parts = [
        f"{'.'.join(str(part) for part in error['loc']) or 'request'}: {error['msg']}"
        for error in exc.errors()
    ]
    return "; ".join(parts)[:MAX_ERROR_MESSAGE]
