"""The README is a front door and the docs hang together: every page of docs/ is linked from
the README, the README stays short, and every relative link (and its #anchor) resolves."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import pytest

REPO: Final = Path(__file__).resolve().parents[2]
README: Final = REPO / "README.md"
DOCS: Final = REPO / "docs"
OPERATIONS: Final = REPO / "deploy" / "README.md"

README_MAX_LINES: Final = 300
"""A front door: what it is, the two commands, the ways in, the guarantees, the index."""

PAGES_BEING_WRITTEN: Final = frozenset[str]()
"""Pages the README's index already links that land with other branches. A link to one may
not resolve until it lands; once it exists, `test_pages_being_written_have_not_landed` fails
until its name is taken out of this set."""

LINK: Final = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE: Final = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
HEADING: Final = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _prose(path: Path) -> str:
    """The file's Markdown without its fenced code blocks."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in HEADING.findall(_prose(path)):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _relative_links(path: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(_prose(path))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def _broken(path: Path, target: str) -> str | None:
    """Why `target`, linked from `path`, does not resolve (None when it does)."""
    file_part, _, anchor = target.partition("#")
    linked = (path.parent / file_part).resolve() if file_part else path
    if not linked.exists():
        if file_part and linked.parent == DOCS and linked.name in PAGES_BEING_WRITTEN:
            return None
        return f"{path.relative_to(REPO)}: {target}: no such file"
    if anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
        return f"{path.relative_to(REPO)}: {target}: no heading with that anchor"
    return None


def test_the_readme_is_at_most_300_lines():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {
        (REPO / target.partition("#")[0]).resolve()
        for target in _relative_links(README)
        if target.partition("#")[0]
    }
    missing = [str(page.relative_to(REPO)) for page in _pages() if page.resolve() not in linked]
    assert missing == []


@pytest.mark.parametrize(
    "path", [README, OPERATIONS, *_pages()], ids=lambda path: str(path.relative_to(REPO))
)
def test_relative_links_resolve(path: Path):
    broken = [why for target in _relative_links(path) if (why := _broken(path, target))]
    assert broken == []


def test_pages_being_written_have_not_landed():
    """Once one of them exists, its link is checked like any other: drop it from the set."""
    assert sorted(name for name in PAGES_BEING_WRITTEN if (DOCS / name).exists()) == []


def test_the_readme_index_links_the_pages_being_written():
    links = {target.partition("#")[0] for target in _relative_links(README)}
    assert {f"docs/{name}" for name in PAGES_BEING_WRITTEN} <= links


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Scaling out: the page is the unit of work", "scaling-out-the-page-is-the-unit-of-work"),
        ("Design choices, and why", "design-choices-and-why"),
        ("`auto` and the HTTP path", "auto-and-the-http-path"),
    ],
)
def test_anchors_are_githubs(heading: str, anchor: str):
    assert _slug(heading) == anchor
