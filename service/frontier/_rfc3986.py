"""RFC 3986 syntax-based normalisation of URL components: percent-encoding and dot segments."""

from __future__ import annotations

import re
import string
from typing import Final

UNRESERVED: Final = frozenset(string.ascii_letters + string.digits + "-._~")
"""Characters whose percent-escapes mean the same as the character itself (RFC 3986 2.3)."""

_SUB_DELIMS: Final = "!$&'()*+,;="

_ALLOWED_RAW: Final = {
    "userinfo": _SUB_DELIMS + ":",
    "path": _SUB_DELIMS + ":@/",
    "query": _SUB_DELIMS + ":@/?",
}
"""Characters, besides the unreserved ones, that may stand unescaped in each component."""


def _escape_or_char(extra: str) -> re.Pattern[str]:
    """Matches a `%XX` escape, or one character that must be escaped (a lone `%` included)."""
    allowed = re.escape("".join(sorted(UNRESERVED)) + extra)
    return re.compile(f"%[0-9A-Fa-f]{{2}}|[^{allowed}]")


_MATCHERS: Final = {component: _escape_or_char(extra) for component, extra in _ALLOWED_RAW.items()}


def normalise_escapes(text: str, component: str) -> str:
    """`text` with escapes of unreserved characters decoded, other escapes in upper-case hex,
    and characters not allowed in `component` escaped as UTF-8 (a lone `%` becomes `%25`).

    UnicodeEncodeError (a ValueError) for a lone surrogate, which has no UTF-8 form.
    """
    return _MATCHERS[component].sub(_normalised_escape, text)


def _normalised_escape(match: re.Match[str]) -> str:
    found = match.group()
    if len(found) == 1:
        return "".join(f"%{byte:02X}" for byte in found.encode("utf-8"))
    char = chr(int(found[1:], 16))
    return char if char in UNRESERVED else found.upper()


def remove_dot_segments(path: str) -> str:
    """`path` with `.` and `..` segments resolved (RFC 3986 5.2.4); `..` never climbs above `/`."""
    if "." not in path:
        return path
    output: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        is_last = index == len(segments) - 1
        if segment == "..":
            if len(output) > 1:
                output.pop()
        elif segment != ".":
            output.append(segment)
            continue
        if is_last:
            output.append("")
    return "/".join(output)
