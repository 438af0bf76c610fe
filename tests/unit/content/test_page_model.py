"""The content model and the wire result agree: every field the fetcher builds reaches the
`PageResult` under the same name and type, or is named as the fetcher's own (pure)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from datetime import datetime

import pytest
from pydantic import JsonValue

from service import contracts_actions
from service.content import page as page_module
from service.content.page import FETCHER_ONLY, PageContent, failed
from service.contracts import ErrorCode, PageResult, base, messages, options, results

RESULT_ONLY = frozenset(
    {
        "request_id", "result_id", "run_id", "url", "elapsed_ms", "fetched_at", "worker",
        "request_metadata", "source", "depth", "parent_url", "schema_version", "attempts",
        "chunk", "chunks",
    }
)  # fmt: skip
"""Result fields the fetcher adds around the content (who, where, when)."""


def content_fields() -> dict[str, object]:
    names = {**vars(contracts_actions), **vars(base), **vars(options), **vars(results)}
    names |= {**vars(messages), **vars(page_module)}
    names |= {"JsonValue": JsonValue, "Mapping": Mapping, "datetime": datetime}
    hints = typing.get_type_hints(PageContent, names)
    return {field.name: hints[field.name] for field in dataclasses.fields(PageContent)}


def test_every_content_field_is_a_result_field_or_the_fetchers_own():
    on_wire = content_fields().keys() - FETCHER_ONLY
    assert on_wire <= PageResult.model_fields.keys(), on_wire - PageResult.model_fields.keys()
    assert FETCHER_ONLY.isdisjoint(PageResult.model_fields)


def test_every_result_field_comes_from_the_content_or_around_it():
    missing = PageResult.model_fields.keys() - content_fields().keys() - RESULT_ONLY
    assert not missing, f"PageResult fields no PageContent field fills: {sorted(missing)}"


def test_shared_fields_have_the_same_type_on_both_sides():
    hints = content_fields()
    wire = typing.get_type_hints(PageResult)  # without the validators' annotations
    for name in hints.keys() - FETCHER_ONLY:
        assert hints[name] == wire[name], (name, hints[name], wire[name])


def test_a_field_the_result_lacks_is_an_error_not_a_silent_loss(monkeypatch):
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Renamed(PageContent):
        markdown_text: str | None = None

    assert "markdown" in failed(ErrorCode.INTERNAL, "x").result_fields()
    with pytest.raises(TypeError, match="markdown_text"):
        Renamed(ok=True, markdown_text="words").result_fields()
