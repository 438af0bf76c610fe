"""Firecrawl's scrape options (the body of `/v2/scrape`, `scrapeOptions` of a crawl, the top
level of a batch): which are mapped, which are accepted at the values the SDKs send, which
are refused. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from service.contracts import Format
from service.gateway.errors import Detail, bad_request, refused

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

Path = tuple[str | int, ...]

FORMATS: Final[dict[str, Format]] = {
    "markdown": Format.MARKDOWN,
    "html": Format.HTML,
    "rawHtml": Format.HTML,
    "links": Format.LINKS,
    "screenshot": Format.SCREENSHOT,
}
"""Firecrawl formats the cluster produces, and the contract format each comes from."""

DEFAULT_FORMATS: Final = ("markdown",)
"""Firecrawl's formats when a request names none."""

SCREENSHOT_KEYS: Final = frozenset({"type", "fullPage"})
"""Keys of a `{"type": "screenshot", ...}` format the cluster honours."""

PROXIES: Final = frozenset({"basic", "auto"})
"""`proxy` values that mean a direct fetch: the cluster has no proxy pools yet."""

NOT_APPLIED: Final = ("onlyMainContent", "blockAds")
"""Options the SDKs send by default that the cluster accepts without applying them; a
document names them in its `warning` when they are on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScrapeChoices:
    """What the caller asked of each page, in Firecrawl's terms."""

    formats: tuple[str, ...]
    """Firecrawl format names, in the order given (`markdown`, `html`, `rawHtml`, ...)."""
    full_page: bool = False
    timeout_ms: int | None = None
    remove_base64_images: bool = True
    warning: str | None = None

    @property
    def contract_formats(self) -> set[Format]:
        return {FORMATS[name] for name in self.formats}


def _is_false(value: object) -> bool:
    return value in (None, False)


def _is_empty(value: object) -> bool:
    return value in (None, [], {}, "")


def _is_zero(value: object) -> bool:
    return value in (None, 0)


def _any(_: object) -> bool:
    return True


_ACCEPTED: Final[dict[str, tuple[Callable[[object], bool], str]]] = {
    "onlyMainContent": (_any, ""),
    "blockAds": (_any, ""),
    "maxAge": (_any, ""),  # nothing is cached: every answer is fresh, within any maxAge
    "storeInCache": (_any, ""),
    "removeBase64Images": (_any, ""),
    "timeout": (_any, ""),
    "formats": (_any, ""),
    "proxy": (lambda v: v is None or v in PROXIES, "no proxy pools: only basic or auto"),
    "mobile": (_is_false, "no mobile emulation yet"),
    "fastMode": (_is_false, "no fast mode"),
    "skipTlsVerification": (_is_false, "certificates are always verified"),
    "lockdown": (_is_false, "not supported"),
    "checkPromptInjection": (_is_false, "no LLM checks on this cluster"),
    "redactPII": (_is_false, "no PII redaction on this cluster"),
    "domainTools": (_is_false, "not supported"),
    "waitFor": (_is_zero, "no fixed delay: the worker waits for the page to settle itself"),
    "minAge": (_is_zero, "nothing is cached: no answer is older than the request"),
    "headers": (_is_empty, "request headers are not in the crawl contract yet"),
    "includeTags": (_is_empty, "tag filters are not in the crawl contract yet"),
    "excludeTags": (_is_empty, "tag filters are not in the crawl contract yet"),
    "actions": (_is_empty, "page actions are not in the crawl contract yet"),
    "location": (_is_empty, "no geolocated proxies on this cluster"),
    "parsers": (_is_empty, "documents other than HTML are not parsed"),
    "useMock": (_is_empty, "not supported"),
    "threatProtection": (_is_empty, "not supported"),
    "profile": (_is_empty, "not supported"),
    "toolDetail": (_is_empty, "not supported"),
}
"""Each scrape option, with the test its value must pass and why otherwise it is refused."""


def scrape_choices(options: Mapping[str, Any], path: Path) -> ScrapeChoices:
    """Check every option (400 naming the first one refused) and collect what is asked."""
    for key, value in options.items():
        rule = _ACCEPTED.get(key)
        if rule is None:
            raise bad_request(Detail(path=(*path, key), message="unrecognized key"))
        ok, why = rule
        if not ok(value):
            raise refused((*path, key), f"{value!r} cannot be honoured: {why}")
    formats, full_page = _formats(options.get("formats"), (*path, "formats"))
    return ScrapeChoices(
        formats=formats,
        full_page=full_page,
        timeout_ms=_timeout(options.get("timeout"), (*path, "timeout")),
        remove_base64_images=options.get("removeBase64Images", True) is not False,
        warning=_warning(options),
    )


def _warning(options: Mapping[str, Any]) -> str | None:
    on = [key for key in NOT_APPLIED if options.get(key, key == "onlyMainContent") is True]
    if not on:
        return None
    return (
        f"not applied by this cluster: {', '.join(on)} (markdown holds the page's whole "
        "readable content; no ad blocking)"
    )


def _timeout(value: object, path: Path) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1000:  # noqa: PLR2004
        raise bad_request(Detail(path=path, message="milliseconds, at least 1000"))
    return value


def _formats(value: object, path: Path) -> tuple[tuple[str, ...], bool]:
    if value is None:
        return DEFAULT_FORMATS, False
    if not isinstance(value, list):
        raise bad_request(Detail(path=path, message="a list of formats is expected"))
    names: list[str] = []
    full_page = False
    for index, item in enumerate(value):
        name, full = _format(item, (*path, index))
        names.append(name)
        full_page = full_page or full
    return tuple(dict.fromkeys(names)), full_page


def _format(item: object, path: Path) -> tuple[str, bool]:
    if isinstance(item, dict):
        name = item.get("type")
        extra = set(item) - SCREENSHOT_KEYS
        if name == "screenshot" and extra:
            raise refused((*path, min(extra)), "only fullPage is supported for screenshots")
        full = item.get("fullPage") is True
    else:
        name, full = item, False
    if not isinstance(name, str):
        raise bad_request(Detail(path=path, message="a format name or object is expected"))
    if name not in FORMATS:
        raise refused(path, f"format {name!r} is not produced by this cluster")
    return name, full
