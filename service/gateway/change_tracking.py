"""Firecrawl's `changeTracking` format: the request's format object as the contract's
`change_tracking`, and a result's `change_tracking` as Firecrawl's document field. Pure.

`modes: ["git-diff"]` asks for the diff; the `json` mode (a structured comparison made by an
LLM from a schema or a prompt) is refused with a 400 naming it: no structured extraction
feeds it on this cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from service.gateway.errors import Detail, bad_request, refused

if TYPE_CHECKING:
    from service.contracts import PageChange

Path = tuple[str | int, ...]

NAME: Final = "changeTracking"
"""The format's name on the wire (the SDKs turn `change_tracking` into it)."""

KEYS: Final = frozenset({"type", "modes", "tag", "schema", "prompt"})
"""Keys of a `{"type": "changeTracking", ...}` format object."""

MODES: Final = frozenset({"git-diff", "json"})


def contract_tracking(item: object, path: Path) -> dict[str, Any]:
    """The contract's `change_tracking` of a `changeTracking` format (a name or an object)."""
    if not isinstance(item, dict):
        return {"tag": None, "diff": False}
    extra = sorted(set(item) - KEYS)
    if extra:
        raise bad_request(Detail(path=(*path, extra[0]), message="unrecognized key"))
    modes = item.get("modes", [])
    if not isinstance(modes, list) or not set(modes) <= MODES:
        raise bad_request(Detail(path=(*path, "modes"), message="a list of git-diff and json"))
    if "json" in modes:
        raise refused(
            (*path, "modes"),
            "the json mode is not supported: no structured extraction feeds it on this "
            "cluster (use git-diff)",
        )
    for key in ("schema", "prompt"):
        if item.get(key) is not None:
            raise refused((*path, key), "only the json mode takes it, and it is not supported")
    tag = item.get("tag")
    if tag is not None and not isinstance(tag, str):
        raise bad_request(Detail(path=(*path, "tag"), message="a string is expected"))
    return {"tag": tag, "diff": "git-diff" in modes}


def document_tracking(change: PageChange | None) -> dict[str, Any] | None:
    """Firecrawl's `changeTracking` of a document (None: the page was not compared)."""
    if change is None:
        return None
    out: dict[str, Any] = {
        "previousScrapeAt": (
            None if change.previous_fetched_at is None else change.previous_fetched_at.isoformat()
        ),
        "changeStatus": change.status,
        "visibility": change.visibility,
    }
    if change.diff is not None:
        out["diff"] = {"text": change.diff}
    return out
