"""Which requests `render: auto` sends straight to the browser, from the request alone."""

from __future__ import annotations

import pytest

from service.contracts import CrawlOptions
from service.paths.renderer import browser_asked


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({}, None),
        ({"headers": {"X-A": "1"}, "user_agent": "UA", "proxy": "http://p.test:1"}, None),
        ({"cookies": [{"name": "a", "value": "b", "url": "http://h.test/"}]}, None),
        ({"locale": "de-DE"}, "identity"),
        ({"timezone": "Asia/Tokyo"}, "identity"),
        ({"geolocation": {"latitude": 1, "longitude": 2}}, "identity"),
        ({"viewport": {"width": 800, "height": 600}}, "identity"),
        ({"device": "Pixel 7"}, "identity"),
        ({"javascript": False}, "identity"),
        ({"actions": [{"type": "press", "key": "End"}]}, "actions"),
        ({"formats": ["screenshot"], "locale": "de-DE"}, "screenshot"),
    ],
)
def test_only_what_http_cannot_honour_sends_auto_to_the_browser(options, reason) -> None:
    assert browser_asked(CrawlOptions(render="auto", **options)) == reason
