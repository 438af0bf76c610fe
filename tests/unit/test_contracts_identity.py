"""Identity options that cannot work in a browser are refused at intake, naming the field."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from service.contracts import CrawlRequest


def _request(options: str) -> str:
    return '{"request_id": "r", "urls": ["http://a.test/"], "options": ' + options + "}"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ('{"geolocation": {"latitude": 1, "longitude": 2, "accuracy": Infinity}}', "accuracy"),
        ('{"geolocation": {"latitude": NaN, "longitude": 2}}', "latitude"),
        (
            '{"cookies": [{"name": "a", "value": "b", "url": "http://a.test/", "expires": 1e999}]}',
            "expires",
        ),
        ('{"timezone": "right/UTC"}', "timezone"),
        ('{"timezone": "posix/Europe/Berlin"}', "timezone"),
        ('{"timezone": "localtime"}', "timezone"),
        ('{"timezone": "Nowhere/Bogus"}', "timezone"),
    ],
)
def test_floats_and_time_zones_a_browser_refuses_are_invalid(options: str, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        CrawlRequest.model_validate(json.loads(_request(options)))
    assert any(field in ".".join(map(str, error["loc"])) for error in caught.value.errors())


@pytest.mark.parametrize("zone", ["Europe/Berlin", "UTC", "America/Argentina/Buenos_Aires"])
def test_iana_time_zones_are_accepted(zone: str) -> None:
    request = CrawlRequest.model_validate(json.loads(_request(json.dumps({"timezone": zone}))))
    assert request.options.timezone == zone
