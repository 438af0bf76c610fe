"""One tool call's context: the API, the caller's credentials, and the checks of the tools'
own arguments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from service.mcp._errors import ArgumentError

if TYPE_CHECKING:
    from service.mcp._api import V2Api


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """What a tool runs with: the v2 API and the `Authorization` of the agent (None over
    stdio, where the operator's settings apply)."""

    api: V2Api
    authorization: str | None

    async def post(self, path: str, body: dict[str, Any], wait_s: float | None = None) -> Any:  # noqa: ANN401
        return await self.api.call(
            "POST", path, body=body, authorization=self.authorization, wait_s=wait_s
        )

    async def get(self, path: str, params: dict[str, str] | None = None) -> Any:  # noqa: ANN401
        return await self.api.call("GET", path, params=params, authorization=self.authorization)

    async def delete(self, path: str) -> Any:  # noqa: ANN401
        return await self.api.call("DELETE", path, authorization=self.authorization)


def text_arg(args: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise ArgumentError(f"{name}: a non-empty string is required")
    return value


def job_path(prefix: str, args: dict[str, Any]) -> str:
    """`prefix/<id>` with the id quoted (it is a path segment, whatever the agent sent)."""
    return f"{prefix}/{quote(text_arg(args, 'id') or '', safe='')}"


def offset_arg(args: dict[str, Any]) -> int:
    value = args.get("offset", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ArgumentError("offset: a whole number of characters, 0 or more")
    return value


def without(args: dict[str, Any], *names: str) -> dict[str, Any]:
    """The arguments that go to the API as the request body (the tool's own ones removed)."""
    return {key: value for key, value in args.items() if key not in names}


def wait_of(args: dict[str, Any]) -> float | None:
    """The `timeout` (milliseconds) an agent gave, in seconds (None: the gateway's default)."""
    timeout = args.get("timeout")
    if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
        return float(timeout) / 1000
    return None
