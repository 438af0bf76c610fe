"""How much compiling a regular expression may unroll its counted repeats, bounded from above.

The `regex` engine unrolls counted repeats of groups and sets when it compiles them:
`(a{1000}){1000}` takes 275 MB before anything is matched, and `(a{100}b){65535}`, 17
characters, fails with MemoryError after taking 1.4 GB. A match timeout does not help, so the
size is bounded before compiling.
"""

from __future__ import annotations

import re
from typing import Final

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
