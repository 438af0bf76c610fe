"""Firecrawl's error answers: `{"success": false, "error": ..., "details": [...]}`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.errors import CrawlstreamError


@dataclass(frozen=True, slots=True, kw_only=True)
class Detail:
    """One problem of a request body, as Firecrawl's zod issues name it: a path and a message."""

    path: tuple[str | int, ...]
    message: str
    code: str = "custom"

    def wire(self) -> dict[str, Any]:
        return {"code": self.code, "path": list(self.path), "message": self.message}


class ApiError(CrawlstreamError):
    """An answer other than success: its HTTP status, message and the details behind it."""

    def __init__(
        self,
        *,
        status: int,
        message: str,
        details: tuple[Detail, ...] = (),
        headers: dict[str, str] | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.code = code
        """Firecrawl's machine-readable error code (`SCRAPE_NO_CACHED_DATA`), when it has one."""

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"success": False, "error": self.message}
        if self.code is not None:
            body["code"] = self.code
        if self.details:
            body["details"] = [detail.wire() for detail in self.details]
        return body


def bad_request(*details: Detail) -> ApiError:
    """Firecrawl's 400: the message names every offending option (`scrapeOptions.mobile: ...`)."""
    named = "; ".join(f"{_dotted(detail.path)}: {detail.message}" for detail in details)
    return ApiError(status=400, message=f"Bad Request: {named}", details=details)


def refused(path: tuple[str | int, ...], message: str) -> ApiError:
    """A 400 for one option the cluster cannot honour."""
    return bad_request(Detail(path=path, message=message, code="unsupported"))


def not_found(what: str) -> ApiError:
    return ApiError(status=404, message=f"{what} not found")


def _dotted(path: tuple[str | int, ...]) -> str:
    return ".".join(str(part) for part in path) or "body"
