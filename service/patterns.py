"""URL patterns of a deep crawl's `include` and `exclude`: checked and compiled (the `regex`
module, so a search can time out), with a bound on what their counted repeats unroll into.

Pure: the contract checks a request's patterns with it, the frontier's scope matches with them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import regex

if TYPE_CHECKING:
    from collections.abc import Sequence

MAX_PATTERNS: Final = 32
"""Patterns in one list (include or exclude)."""

MAX_PATTERN_LENGTH: Final = 512
"""Characters of one pattern."""

MAX_REPEAT_WEIGHT: Final = 50_000
"""Items the counted repeats of one list may unroll into when compiled, by the conservative
count of `unrolled_weight` (`(a{100}){100}` counts 20,100); about 13 MB at worst."""

_SHOWN_CHARS: Final = 60
"""Characters of a pattern quoted in an error message."""

_COUNTED_REPEAT: Final = re.compile(r"\{(?:(\d+)(?:,(\d*))?|,(\d+))\}")
"""`{m}`, `{m,}`, `{m,n}` or `{,n}`, wherever it stands (escaped or in a set too)."""


def unrolled_weight(pattern: str, *, cap: int) -> int:
    """An upper bound of the items that compiling `pattern` unrolls, or more than `cap`.

    Each character weighs the product of the bounds of all counted repeats written after it.
    A group's repeat always follows the group, so this counts at least the real product of
    nested repeats without parsing the pattern, and no escape or set can make it count less.
    """
    weight, factor, end = 0, 1, len(pattern)
    for repeat in reversed(list(_COUNTED_REPEAT.finditer(pattern))):
        weight += factor * (end - repeat.end())
        factor = min(factor * _largest_count(repeat), cap + 1)
        end = repeat.start()
    return min(weight + factor * end, cap + 1)


def _largest_count(repeat: re.Match[str]) -> int:
    return max(int(count) for count in repeat.groups() if count)


def compile_patterns(patterns: Sequence[str]) -> tuple[regex.Pattern[str], ...]:
    """The patterns compiled; ValueError saying which pattern (counted from 0) and why when
    there are too many, one is too long, would unroll too much, or does not compile."""
    if len(patterns) > MAX_PATTERNS:
        raise ValueError(f"{len(patterns)} patterns; at most {MAX_PATTERNS} are allowed")
    weights = [_checked_weight(index, pattern) for index, pattern in enumerate(patterns)]
    if sum(weights) > MAX_REPEAT_WEIGHT:
        heaviest = max(range(len(patterns)), key=weights.__getitem__)
        raise ValueError(
            f"the counted repeats ({{m,n}}) of these patterns may unroll into more than "
            f"{MAX_REPEAT_WEIGHT:,} items when compiled; pattern {heaviest} "
            f"{_shown(patterns[heaviest])} alone counts {weights[heaviest]:,}: use fewer or "
            f"smaller counts, or `+` and `*`"
        )
    return tuple(_compiled(index, pattern) for index, pattern in enumerate(patterns))


def _checked_weight(index: int, pattern: str) -> int:
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(
            f"pattern {index} {_shown(pattern)} is {len(pattern)} characters long; "
            f"at most {MAX_PATTERN_LENGTH} are allowed"
        )
    return unrolled_weight(pattern, cap=MAX_REPEAT_WEIGHT)


def _compiled(index: int, pattern: str) -> regex.Pattern[str]:
    try:
        return regex.compile(pattern)
    except regex.error as exc:
        raise ValueError(f"pattern {index} {_shown(pattern)} does not compile: {exc}") from exc


def _shown(pattern: str) -> str:
    shown = pattern if len(pattern) <= _SHOWN_CHARS else pattern[:_SHOWN_CHARS] + "..."
    return repr(shown)
