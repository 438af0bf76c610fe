"""Which discovered URLs a deep crawl follows: the scope of its seeds and its URL patterns.

Include and exclude patterns are regular expressions of the `regex` package, searched in the
normalised URL with a timeout, so a hostile URL cannot make a user's pattern backtrack for
minutes. Their size is checked before they are compiled, as compiling can take memory too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

from service.logs import get_logger
from service.net.hosts import host_key, site_of
from service.patterns import compile_patterns

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import regex

MATCH_TIMEOUT_S: Final = 0.05
"""Longest search of one pattern in one URL; a search that takes longer does not admit it."""

ScopeKind = Literal["host", "domain", "prefix"]

_LOG = get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scope:
    """The URLs a job may follow: in the scope of any seed, matched by some include pattern
    (when there are any), and by no exclude pattern.

    Kinds: `host` admits the host name of a seed (any scheme and port; `www.` is not
    stripped). `domain` admits the registrable domain of a seed by the Public Suffix List
    (`blog.example.co.uk` for a seed on `www.example.co.uk`); for IP addresses, `localhost`
    and hosts with no registrable domain it admits the host itself. `prefix` admits URLs that
    start with a seed's directory: its normalised URL without query, up to and including the
    last `/` of its path (same scheme, user information, host and port).

    A pattern search that times out counts against admission: an include pattern that times
    out does not match, an exclude pattern that times out does. Each timed-out pattern is
    logged once per scope.
    """

    kind: ScopeKind
    anchors: tuple[str, ...]
    """Per kind: the seeds' hosts, registrable domains, or directories."""
    include: tuple[regex.Pattern[str], ...] = ()
    exclude: tuple[regex.Pattern[str], ...] = ()
    _timed_out: set[str] = field(default_factory=set, init=False, repr=False, compare=False)

    @classmethod
    def build(
        cls,
        kind: ScopeKind,
        seeds: Sequence[str],
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
    ) -> Scope:
        """The scope of normalised `seeds`; ValueError for an unknown kind or a bad pattern
        (naming its list)."""
        if kind not in _ANCHOR_OF:
            raise ValueError(f"unknown scope kind {kind!r}; one of {', '.join(_ANCHOR_OF)}")
        anchors = tuple(dict.fromkeys(_ANCHOR_OF[kind](seed) for seed in seeds))
        return cls(
            kind=kind,
            anchors=anchors,
            include=_compiled_list("include", include),
            exclude=_compiled_list("exclude", exclude),
        )

    def admits(self, url: str) -> bool:
        """Whether the job follows the normalised `url`."""
        if self.kind == "prefix":
            in_scope = url.startswith(self.anchors)
        else:
            in_scope = _ANCHOR_OF[self.kind](url) in self.anchors
        return in_scope and self._passes_patterns(url)

    def _passes_patterns(self, url: str) -> bool:
        if self.include and not any(self._found(p, url, timed_out=False) for p in self.include):
            return False
        return not any(self._found(p, url, timed_out=True) for p in self.exclude)

    def _found(self, pattern: regex.Pattern[str], url: str, *, timed_out: bool) -> bool:
        """Whether `pattern` is found in `url`; `timed_out` when the search takes too long."""
        try:
            return pattern.search(url, timeout=MATCH_TIMEOUT_S) is not None
        except TimeoutError:
            if pattern.pattern not in self._timed_out:
                self._timed_out.add(pattern.pattern)
                _LOG.warning(
                    "scope.pattern_timed_out",
                    pattern=pattern.pattern,
                    url=url,
                    timeout_s=MATCH_TIMEOUT_S,
                )
            return timed_out


def directory_of(url: str) -> str:
    """A normalised URL without its query, up to and including the last `/` of its path."""
    return url.partition("?")[0].rpartition("/")[0] + "/"


_ANCHOR_OF: Final[dict[ScopeKind, Callable[[str], str]]] = {
    "host": host_key,
    "domain": site_of,
    "prefix": directory_of,
}


def _compiled_list(name: str, patterns: Sequence[str]) -> tuple[regex.Pattern[str], ...]:
    try:
        return compile_patterns(patterns)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from exc
