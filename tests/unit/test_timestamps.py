"""Every instant of every contract is time-zone aware and bounded: a naive or absurd time is
rejected with a clear message (never guessed, never an overflow later), an offset is
normalised to UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING

import pytest
from pydantic import RootModel, TypeAdapter, ValidationError

from service.contracts import MESSAGE_MODELS, CancelControl, PageChange
from service.contracts_changes import ChangeRecord
from service.errors import RejectedMessageError
from service.settings import Settings
from service.worker.coordinator.intake import parse_request

if TYPE_CHECKING:
    from pydantic import BaseModel

EXPECTED_INSTANTS = {
    "CrawlRequest.expires_at",
    "PageResult.fetched_at",
    "PageResult.cached_at",
    "ProgressEvent.at",
    "CancelControl.at",
    "PageTask.deadline_at",
    "PageChange.previous_fetched_at",
    "ChangeRecord.fetched_at",
    "ChangeRecord.previous_fetched_at",
}
"""The datetime fields of the contracts today: the walk below must find each."""

NAIVE = "2030-01-01T00:00:00"
ABSURD = [
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59-01:00",  # past datetime.max once in UTC
    "0001-01-01T00:00:00+01:00",  # before datetime.min once in UTC
    "1969-12-31T23:59:59Z",
    "3000-01-01T00:00:00Z",
]


def _instant_fields() -> dict[str, TypeAdapter[object]]:
    """`Model.field` -> a validator of that field alone, for every field that holds a time."""
    models: list[type[BaseModel]] = [
        *MESSAGE_MODELS.values(),
        CancelControl,
        PageChange,
        ChangeRecord,
    ]
    found = {}
    for model in models:
        if isinstance(model, type) and issubclass(model, RootModel):
            continue  # a union: its members are listed in `models` themselves
        for name, field in model.model_fields.items():
            adapter: TypeAdapter[object] = TypeAdapter(field.rebuild_annotation())
            schema = adapter.json_schema()
            if "date-time" in str(schema) and "$defs" not in schema:  # nested: listed itself
                found[f"{model.__name__}.{name}"] = adapter
    return found


def test_the_walk_finds_every_instant_of_the_contracts():
    """The fields checked below are all the datetime fields there are."""
    assert set(_instant_fields()) == EXPECTED_INSTANTS


@pytest.mark.parametrize("field", sorted(EXPECTED_INSTANTS))
def test_a_time_without_an_offset_is_rejected_with_a_clear_message(field: str):
    """A naive time is ambiguous: rejected, the message says to add `Z` or an offset."""
    with pytest.raises(ValidationError, match="has no time zone: add `Z`"):
        _instant_fields()[field].validate_python(NAIVE)


@pytest.mark.parametrize("value", ABSURD)
@pytest.mark.parametrize("field", sorted(EXPECTED_INSTANTS))
def test_an_absurd_year_is_rejected_never_an_overflow(field: str, value: str):
    """Before 1970 or from 3000 is a validation error (not an OverflowError, now or later)."""
    with pytest.raises(ValidationError, match="must be from 1970-01-01"):
        _instant_fields()[field].validate_json(f'"{value}"')


@pytest.mark.parametrize("field", sorted(EXPECTED_INSTANTS))
def test_an_offset_is_normalised_to_utc(field: str):
    """`+02:00` is kept as the same instant, in UTC; the bounds themselves are inside."""
    adapter = _instant_fields()[field]
    read = adapter.validate_json('"2030-01-01T02:00:00+02:00"')
    assert read == datetime(2030, 1, 1, tzinfo=UTC)
    assert isinstance(read, datetime)
    assert read.utcoffset() == timedelta(0)
    assert adapter.validate_json('"1970-01-01T00:00:00Z"') == datetime(1970, 1, 1, tzinfo=UTC)
    latest = datetime(2999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=5)))
    assert adapter.validate_python(latest) == latest


def test_a_request_with_a_naive_expires_at_is_rejected_with_its_id():
    """Intake rejects it as `invalid_request` naming the field and the request_id (so the
    worker sends a `rejected` event), instead of a run that crashes comparing it."""
    value = b'{"request_id": "naive-1", "urls": ["http://a/"], "expires_at": "%s"}' % NAIVE.encode()
    with pytest.raises(RejectedMessageError) as caught:
        parse_request(value, Settings())
    assert caught.value.code == "invalid_request"
    assert caught.value.request_id == "naive-1"
    assert caught.value.message.startswith("expires_at: ")
    assert "has no time zone" in caught.value.message
