"""The wire contracts: round trips, rejections, and the checked-in schemas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from service import schema_export
from service.contracts import (
    CrawlRequest,
    EventType,
    Format,
    PageResult,
    ProgressEvent,
    dump,
    result_id_for,
    utc_now,
)

SCHEMAS = Path(__file__).parents[2] / "schemas"


def test_request_round_trips_through_json():
    """A request survives dump and parse unchanged, with defaults filled in."""
    request = CrawlRequest(request_id="r-1", urls=["https://example.com/"], metadata={"k": [1]})
    parsed = CrawlRequest.model_validate_json(dump(request))
    assert parsed == request
    assert set(parsed.options.formats) == {Format.MARKDOWN, Format.LINKS, Format.METADATA}


def test_duplicate_urls_are_crawled_once():
    """Repeated URLs collapse to one, keeping the first position."""
    request = CrawlRequest(request_id="r", urls=["http://a/", "http://b/", "http://a/"])
    assert request.urls == ["http://a/", "http://b/"]


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({"request_id": "r", "urls": ["http://a/"], "colour": "red"}, "colour"),
        ({"request_id": "bad id!", "urls": ["http://a/"]}, "request_id"),
        ({"request_id": "x" * 129, "urls": ["http://a/"]}, "request_id"),
        ({"request_id": "r", "urls": []}, "urls"),
        ({"request_id": "r", "urls": ["ftp://a/"]}, "only http and https"),
        ({"request_id": "r", "urls": ["http://a/"], "options": {"formats": ["docx"]}}, "formats"),
        ({"request_id": "r", "urls": ["http://a/"], "schema_version": 2}, "schema_version"),
        ({"request_id": "r", "urls": ["http://a/"], "options": {"timeout_ms": 5}}, "timeout_ms"),
    ],
)
def test_bad_requests_are_rejected(document, fragment):
    """Unknown fields, bad ids, empty or non-http URL lists, bad options are rejected."""
    with pytest.raises(ValidationError, match=fragment):
        CrawlRequest.model_validate(document)


def test_too_many_urls_are_rejected_at_the_configured_limit():
    """The URL limit comes from the validation context (the worker's setting)."""
    urls = [f"http://a/{i}" for i in range(4)]
    with pytest.raises(ValidationError, match="at most 3 URLs"):
        CrawlRequest.model_validate({"request_id": "r", "urls": urls}, context={"max_urls": 3})
    assert len(CrawlRequest.model_validate({"request_id": "r", "urls": urls}).urls) == 4


def test_worker_side_parsing_lets_other_schemes_through_to_be_blocked():
    """With `lenient_schemes` a file: URL parses, so the worker can answer it `blocked`."""
    document = {"request_id": "r", "urls": ["file:///etc/passwd", "http://a/"]}
    parsed = CrawlRequest.model_validate(document, context={"lenient_schemes": True})
    assert parsed.urls[0] == "file:///etc/passwd"


def test_result_id_is_deterministic_and_distinct():
    """The same request and URL give the same id; another URL or request does not."""
    first = result_id_for("r", "http://a/")
    assert first == result_id_for("r", "http://a/")
    assert len({first, result_id_for("r", "http://b/"), result_id_for("s", "http://a/")}) == 3


def test_result_and_event_round_trip():
    """Results and events parse back to equal models."""
    result = PageResult(
        request_id="r",
        result_id="x",
        run_id="u",
        url="http://a/",
        ok=True,
        elapsed_ms=3,
        fetched_at=utc_now(),
        worker="w",
    )
    event = ProgressEvent(
        request_id="r",
        run_id="u",
        seq=0,
        type=EventType.COMPLETED,
        total=1,
        succeeded=1,
        failed=0,
        at=utc_now(),
        worker="w",
    )
    assert PageResult.model_validate_json(dump(result)) == result
    parsed = ProgressEvent.model_validate_json(dump(event))
    assert parsed == event
    assert parsed.is_terminal


def test_checked_in_schemas_match_the_models():
    """`schemas/` is what `crawlstream schemas` generates from the models now."""
    assert schema_export.differences(SCHEMAS) == []
    assert {p.name for p in SCHEMAS.iterdir()} == set(schema_export.rendered_files())


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"only_main_content": True, "surprise": 1}, "Extra inputs are not permitted"),
        ({"extract": {"fields": [{"name": "a", "type": "attribute"}]}}, "needs `attribute`"),
        ({"extract": {"fields": [{"name": "a", "type": "nested"}]}}, "needs `fields`"),
        ({"extract": {"fields": [{"name": "a", "fields": [{"name": "b"}]}]}}, "only `nested`"),
        ({"extract": {"fields": [{"name": "a", "kind": "text"}]}}, "Extra inputs"),
        ({"extract": {"fields": []}}, "at least 1 item"),
        ({"render": "http", "formats": ["pdf"]}, "cannot print pages to PDF"),
        ({"include_tags": ["p"] * 33}, "at most 32 items"),
    ],
)
def test_content_options_are_checked(options, fragment):
    """The content options reject unknown fields and inconsistent schemas."""
    with pytest.raises(ValidationError, match=fragment):
        CrawlRequest.model_validate({"request_id": "r", "urls": ["http://a/"], "options": options})


def test_extract_schemas_nest_at_most_five_deep():
    field: dict[str, object] = {"name": "leaf"}
    for depth in range(6):
        field = {"name": f"n{depth}", "selector": "div", "type": "nested", "fields": [field]}
    with pytest.raises(ValidationError, match="nested more than 5 deep"):
        CrawlRequest.model_validate(
            {"request_id": "r", "urls": ["http://a/"], "options": {"extract": {"fields": [field]}}}
        )


def test_a_result_carries_json_under_its_wire_name():
    """`json` is the wire name (the attribute is `json_data`) both ways."""
    result = PageResult(
        request_id="r",
        result_id="x",
        run_id="run",
        url="http://a/",
        ok=True,
        elapsed_ms=1,
        fetched_at=utc_now(),
        worker="w",
        json_data=[{"title": "Kettle"}],
    )
    wire = dump(result)
    assert b'"json":[{"title":"Kettle"}]' in wire
    assert PageResult.model_validate_json(wire).json_data == [{"title": "Kettle"}]


def test_a_request_is_produced_without_its_defaults_so_earlier_workers_accept_it():
    """`dump_request` leaves out every field at its default (a worker of an earlier version
    rejects fields it does not know, e.g. `only_main_content`), keeps `schema_version`, and
    reads back as the same request."""
    from service.contracts import CrawlOptions, CrawlRequest, dump_request  # noqa: PLC0415

    request = CrawlRequest(
        request_id="r-1", urls=["https://example.com/"], options=CrawlOptions(render="http")
    )
    document = json.loads(dump_request(request))
    assert document == {
        "schema_version": 1,
        "request_id": "r-1",
        "urls": ["https://example.com/"],
        "options": {"render": "http"},
    }
    assert CrawlRequest.model_validate(document) == request
    with_new_option = request.model_copy(update={"options": CrawlOptions(only_main_content=True)})
    assert json.loads(dump_request(with_new_option))["options"] == {"only_main_content": True}
