"""The wire contract's ground: limits, timestamps, formats, the untrusted-input base model
and the selector schema of `extract`."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    model_validator,
)
from pydantic_core import PydanticCustomError

from service.selectors import MAX_SELECTOR_CHARS, css_problem

SCHEMA_VERSION: Final = 1
"""The version every message of this module carries; a reader rejects any other."""


DEFAULT_MAX_URLS: Final = 100
"""URLs per request when the validation context names no other limit."""


DEFAULT_MAX_CRAWL_PAGES: Final = 10_000
"""`crawl.max_pages` ceiling when the validation context names no other limit."""


MAX_CRAWL_DEPTH: Final = 100
"""Deepest `crawl.max_depth` accepted."""


MAX_URL_LENGTH: Final = 4096
"""Longest URL accepted; longer ones are not URLs a browser will load."""


ALLOWED_SCHEMES: Final = frozenset({"http", "https"})


RequestId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]


SessionKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]


EARLIEST_TIMESTAMP: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""No timestamp of any contract is earlier (the Unix epoch)."""


LATEST_TIMESTAMP: Final = datetime(3000, 1, 1, tzinfo=UTC)
"""Every timestamp of every contract is earlier: far enough for any real deadline, far
enough from `datetime.max` that adding a retention or a deadline cannot overflow."""


def utc_now() -> datetime:
    return datetime.now(tz=UTC)


def _aware_bounded_utc(value: datetime) -> datetime:
    """`value` in UTC; a clear error when it has no offset or lies outside
    [EARLIEST_TIMESTAMP, LATEST_TIMESTAMP)."""
    if value.utcoffset() is None:
        raise ValueError(
            f"{value.isoformat()} has no time zone: add `Z` (UTC) or an offset such as `+01:00`"
        )
    if not EARLIEST_TIMESTAMP <= value < LATEST_TIMESTAMP:  # compares offsets: cannot overflow
        raise ValueError(
            f"must be from {EARLIEST_TIMESTAMP.isoformat()} and before"
            f" {LATEST_TIMESTAMP.isoformat()}, got {value.isoformat()}"
        )
    return value.astimezone(UTC)


Timestamp = Annotated[
    datetime,
    AfterValidator(_aware_bounded_utc),
    Field(
        description="RFC 3339 with its offset (`Z` or `+hh:mm`); a time without an offset is"
        " rejected, as is one before 1970-01-01 or from 3000-01-01 (UTC)."
    ),
]
"""Every instant of every contract: time-zone aware (a naive time is rejected, never
guessed), bounded (so arithmetic on it cannot overflow), normalised to UTC."""


def result_id_for(request_id: str, url: str) -> str:
    """The deterministic ID of the result of `url` within `request_id` (redeliveries share it)."""
    return hashlib.sha256(f"{request_id}\n{url}".encode()).hexdigest()[:32]


class Format(StrEnum):
    """What a request asks to get back for each page."""

    MARKDOWN = "markdown"
    TEXT = "text"
    HTML = "html"
    LINKS = "links"
    METADATA = "metadata"
    SCREENSHOT = "screenshot"
    STRUCTURED_DATA = "structured_data"
    """JSON-LD, microdata and Open Graph, parsed (`PageResult.structured_data`)."""
    PDF = "pdf"
    """The rendered page printed to PDF (`PageResult.pdf`); the browser only."""


class ResourceType(StrEnum):
    """Browser resource types a request may block to save time and memory."""

    IMAGE = "image"
    FONT = "font"
    MEDIA = "media"
    STYLESHEET = "stylesheet"


DEFAULT_FORMATS: Final = (Format.LINKS, Format.MARKDOWN, Format.METADATA)


def _sorted_unique(values: tuple[StrEnum, ...]) -> tuple[StrEnum, ...]:
    return tuple(sorted(set(values)))


class _Untrusted(BaseModel):
    """Base of messages written by other teams' producers: strict about unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


MAX_SHAPING_SELECTORS: Final = 32
"""Selectors in each of `include_tags` and `exclude_tags`."""


MAX_EXTRACT_FIELDS: Final = 200
"""Fields in one `extract` schema, nested ones included."""


MAX_EXTRACT_DEPTH: Final = 5
"""Levels of `nested` and `list` fields with `fields` inside one another."""


def _css_selector(selector: str) -> str:
    """`selector` when lexbor (the engine that applies it) parses it; else `invalid_selector`."""

    problem = css_problem(selector)
    if problem is not None:
        raise PydanticCustomError(
            "invalid_selector",
            "{selector} is not a CSS selector: {problem}",
            {"selector": repr(selector), "problem": problem},
        )
    return selector


CssSelector = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_SELECTOR_CHARS),
    AfterValidator(_css_selector),
]
"""A CSS selector that lexbor parses; a request with one that does not is rejected with
`invalid_selector`."""


ExtractType = Literal["text", "html", "attribute", "number", "list", "nested"]


class ExtractField(_Untrusted):
    """One field of an `extract` schema, read from the elements `selector` matches within
    the object's element."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    """The key in the object."""
    selector: CssSelector | None = None
    """Where the value is, within the object's element; absent: the element itself."""
    type: ExtractType = "text"
    """`text` (whitespace collapsed), `html` (outer HTML), `attribute` (`attribute`'s value,
    as written), `number` (the first number in the text; `,` groups thousands), `list` (every
    match: strings of their text, or objects of `fields`), `nested` (an object of `fields`
    read within the first match). The others read the first match."""
    attribute: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = None
    """The attribute read by `type: attribute`."""
    fields: tuple[ExtractField, ...] | None = Field(default=None, min_length=1)
    """The fields of each object of a `nested` or `list` field."""
    default: JsonValue = None
    """The value when the selector matches nothing (or the attribute or number is absent)."""

    @model_validator(mode="after")
    def _consistent(self) -> ExtractField:
        if self.type == "attribute" and self.attribute is None:
            raise ValueError(f"field {self.name!r}: type `attribute` needs `attribute`")
        if self.type == "nested" and self.fields is None:
            raise ValueError(f"field {self.name!r}: type `nested` needs `fields`")
        if self.fields is not None and self.type not in {"nested", "list"}:
            raise ValueError(f"field {self.name!r}: only `nested` and `list` take `fields`")
        return self


def _size_of(fields: tuple[ExtractField, ...], depth: int = 1) -> int:
    if depth > MAX_EXTRACT_DEPTH:
        raise ValueError(f"extract: fields nested more than {MAX_EXTRACT_DEPTH} deep")
    return sum(1 + _size_of(field.fields or (), depth + 1) for field in fields)


class ExtractSchema(_Untrusted):
    """A selector schema: the page's data as a list of objects (one per `base_selector`
    match) or one object (without it), on the result's `json`."""

    base_selector: CssSelector | None = None
    """One object per element it matches, in document order; absent: one object, the page."""
    fields: tuple[ExtractField, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _bounded(self) -> ExtractSchema:
        if _size_of(self.fields) > MAX_EXTRACT_FIELDS:
            raise ValueError(f"extract: more than {MAX_EXTRACT_FIELDS} fields")
        return self
