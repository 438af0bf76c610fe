"""One page's result within `CRAWL_MAX_RESULT_BYTES` as a whole, whatever made it large.

`html`, `markdown` and `text` can be cut and still mean something: they share the room the
other fields leave, the smallest keeping all of itself when it fits, and `truncated` says
so. The other fields (`json`, `actions`' script values and screenshots, a screenshot, links,
structured data) would be wrong cut anywhere: a result whose other fields alone are larger
than the cap ends `too_large`, naming them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pydantic_core

from service.content.page import cut, failed
from service.contracts import ErrorCode

if TYPE_CHECKING:
    from service.content.page import PageContent

CUT_FIELDS: Final = ("markdown", "text", "html")
"""Fields cut to fit (on a character boundary)."""

WHOLE_FIELDS: Final = (
    "json_data",
    "actions",
    "screenshot",
    "pdf",
    "links",
    "structured_data",
    "metadata",
    "document",
    "title",
)
"""Fields that are kept whole or not at all."""

CUT_STEP_PERCENT: Final = 98
"""A cut whose JSON is still too long is tried again this much shorter."""

_RESULT_NAMES: Final = {"json_data": "json"}


def bounded(content: PageContent, max_bytes: int) -> PageContent:
    """`content` whose fields take at most `max_bytes` in the result's JSON, or a `too_large`
    failure when the fields that cannot be cut take more."""
    whole = {name: _size(getattr(content, name)) for name in WHOLE_FIELDS}
    if sum(whole.values()) > max_bytes:
        return _too_large(content, whole, max_bytes)
    sizes = {name: _size(getattr(content, name)) for name in CUT_FIELDS}
    room = max_bytes - sum(whole.values())
    if sum(sizes.values()) <= room:
        return content
    kept: dict[str, object] = {}
    for index, name in enumerate(sorted(sizes, key=sizes.__getitem__)):
        allowance = room // (len(sizes) - index)
        kept[name] = _cut_json(getattr(content, name), sizes[name], allowance)
        room -= min(sizes[name], allowance)
    return content.replaced(truncated=True, **kept)


def _cut_json(value: str | None, size: int, allowance: int) -> str | None:
    """`value` cut so that its JSON (escapes included) takes at most `allowance` bytes."""
    if value is None or size <= allowance:
        return value
    target = allowance * len(value.encode()) // size  # escapes spread evenly, at first
    while True:
        kept, _ = cut(value, target)
        if kept is None or _size(kept) <= allowance:
            return kept
        target = target * CUT_STEP_PERCENT // 100


def _too_large(content: PageContent, whole: dict[str, int], max_bytes: int) -> PageContent:
    largest = sorted((size, name) for name, size in whole.items() if size)[::-1][:3]
    named = ", ".join(f"`{_RESULT_NAMES.get(name, name)}` {size:,}" for size, name in largest)
    message = f"the result is larger than the worker's {max_bytes:,} bytes ({named} bytes)"
    return failed(
        ErrorCode.TOO_LARGE,
        message,
        final_url=content.final_url,
        status_code=content.status_code,
        rendered_by=content.rendered_by,
    )


def _size(value: object) -> int:
    """Bytes of `value` in the result's JSON."""
    return 0 if value is None else len(pydantic_core.to_json(value))
