"""The gateway's v2 API as the tools call it: in process (the gateway's own FastAPI app through
an ASGI transport), so a tool call runs the very code of the HTTP route, with its checks, its
tenant limits and its answers."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

import httpx2

from service.mcp._errors import ToolCallError

if TYPE_CHECKING:
    from starlette.types import ASGIApp

BASE_URL: Final = "http://gateway"
"""The in-process requests' base URL (no network: the ASGI transport calls the app)."""

CALL_ALLOWANCE_S: Final = 30.0
"""How much longer than the gateway's own wait a call may take before it is given up (the
gateway answers 408 itself when a scrape or a map runs out of its time)."""


class V2Api:
    """POST, GET and DELETE on `/v2/...`; an answer other than success is a `ToolCallError`
    carrying Firecrawl's message."""

    def __init__(self, app: ASGIApp, *, wait_s: float) -> None:
        self._client = httpx2.AsyncClient(
            # an unhandled error of a route is its 500 answer here, hence a tool error
            transport=httpx2.ASGITransport(app=app, raise_app_exceptions=False),
            base_url=BASE_URL,
        )
        self._deadline_s = wait_s + CALL_ALLOWANCE_S

    async def aclose(self) -> None:
        await self._client.aclose()

    async def call(
        self,
        method: str,
        path: str,
        *,
        authorization: str | None,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        wait_s: float | None = None,
    ) -> dict[str, Any]:
        """The JSON answer of one request; `wait_s` the longest the gateway may work on it."""
        headers = {"Authorization": authorization} if authorization else {}
        deadline_s = self._deadline_s if wait_s is None else wait_s + CALL_ALLOWANCE_S
        try:
            async with asyncio.timeout(deadline_s):
                response = await self._client.request(
                    method, path, json=body, params=params, headers=headers
                )
        except TimeoutError:
            raise ToolCallError("Request timed out") from None
        answer = _json(response)
        if response.status_code >= 400 or answer.get("success") is False:  # noqa: PLR2004
            raise ToolCallError(_message(response.status_code, answer, response.headers))
        return answer


def _json(response: httpx2.Response) -> dict[str, Any]:
    try:
        answer = response.json()
    except ValueError:
        return {"success": False, "error": response.text[:500]}
    return answer if isinstance(answer, dict) else {"success": True, "data": answer}


def _message(status: int, answer: dict[str, Any], headers: httpx2.Headers) -> str:
    """Firecrawl's message (the answer's `error`); a 429 also says when to try again."""
    message = str(answer.get("error") or f"Request failed with status code {status}")
    retry_after = headers.get("retry-after")
    if status == 429 and retry_after:  # noqa: PLR2004
        message += f" (retry after {retry_after} s)"
    return message
