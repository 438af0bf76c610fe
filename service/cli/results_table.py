"""The results table of `crawlstream submit --follow` and the demo, sized for the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from rich import box
from rich.cells import cell_len
from rich.table import Table

if TYPE_CHECKING:
    from service.contracts import PageResult

GAP: Final = 2
"""Characters between two columns (one of padding, one of separator: collapsed padding, no
vertical rules)."""

NARROWEST_TEXT: Final = 8
"""The least a path or a title column gets, however narrow the terminal: rich folds the rest."""

CAPTION: Final = "md: characters of markdown · links: internal+external · ms: time to result"


def _shown(url: str, *, one_host: bool) -> str:
    """The URL as the table shows it: its path and query when every result has one host."""
    if not one_host:
        return url
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _row(result: PageResult, *, one_host: bool) -> dict[str, str]:
    links = result.links
    return {
        "path" if one_host else "url": _shown(result.url, one_host=one_host),
        "depth": str(result.depth),
        "http": str(result.status_code or "-"),
        "outcome": result.error.code.value if result.error else "ok",
        "title": result.title or "",
        "md": str(len(result.markdown or "")),
        "links": f"{len(links.internal)}+{len(links.external)}" if links else "-",
        "ms": str(result.elapsed_ms),
    }


def _share(room: int, path: int, title: int) -> tuple[int, int]:
    """Split `room` between the path and the title: their own widths when both fit, else each
    at least half, the part one of them does not need to the other."""
    if path + title <= room:
        return path, title
    half = max(room // 2, NARROWEST_TEXT)
    if path <= half:
        return path, max(room - path, NARROWEST_TEXT)
    if title <= half:
        return max(room - title, NARROWEST_TEXT), title
    return half, max(room - half, NARROWEST_TEXT)


def summary_table(results: list[PageResult], width: int) -> Table:
    """One line per result within `width` columns; the path (or URL) and the title take what the
    short columns leave and end in an ellipsis when cut."""
    hosts = sorted({urlsplit(result.url).netloc for result in results})
    one_host = len(hosts) == 1
    rows = [_row(result, one_host=one_host) for result in results]
    headers = list(_row(results[0], one_host=one_host)) if results else ["url"]
    widths = {h: max([cell_len(h)] + [cell_len(row[h]) for row in rows]) for h in headers}
    first = headers[0]
    if "title" in widths:
        room = width - GAP * (len(headers) - 1)
        room -= sum(w for h, w in widths.items() if h not in {first, "title"})
        widths[first], widths["title"] = _share(room, widths[first], widths["title"])
    table = Table(
        title=f"Results from {hosts[0]}" if one_host else "Results",
        caption=CAPTION,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    for header in headers:
        table.add_column(header, width=widths[header], no_wrap=True, overflow="ellipsis")
    for row in rows:
        table.add_row(*row.values())
    return table
