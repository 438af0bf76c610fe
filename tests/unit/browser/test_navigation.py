"""What the page's probe answers is read defensively: it comes from inside the page."""

from __future__ import annotations

import asyncio

import pytest

from service.browser.deadline import StepDeadline
from service.browser.navigation import (
    READ_PROBE,
    SETTLED_READ_SCRIPT,
    NavigationWatch,
    Probe,
    _parse_probe,
    is_http,
)

URL = "http://site.example/a"


def test_a_well_formed_answer():
    probe = _parse_probe(
        [1234.5, 200, URL, ["http://site.example/b", "file:///etc/passwd", "https://x.example/"]],
        failures=2,
        url="ignored",
    )
    assert probe == Probe(
        origin=1234.5,
        status=200,
        url=URL,
        leaving=("http://site.example/b", "https://x.example/"),
        failures=2,
    )


@pytest.mark.parametrize(
    "answer",
    [None, "text", [], [1, 2, 3], {"origin": 1}, ["x", "200", None, "not a list"], [1, 2, 3, [7]]],
)
def test_garbage_is_an_unknown_document(answer):
    probe = _parse_probe(answer, failures=0, url=URL)
    assert probe.leaving == ()
    assert isinstance(probe.origin, float)
    assert isinstance(probe.status, int)
    assert isinstance(probe.url, str)


def test_chromium_error_pages_are_failures_and_another_document():
    page = _parse_probe([1.0, 200, URL, []], failures=0, url=URL)
    error = _parse_probe([1.0, 0, "chrome-error://chromewebdata/", []], failures=1, url=URL)
    assert error.failed
    assert not page.failed
    assert not error.same_document(page)


@pytest.mark.parametrize(
    ("url", "expected"),
    [(URL, True), ("HTTPS://x/", True), ("data:,x", False), ("http://[::1/", False), ("", False)],
)
def test_is_http(url, expected):
    assert is_http(url) is expected


class _BusyToSettle:
    """A page whose settle wait never answers, and which answers a plain read."""

    main_frame = object()
    url = URL

    def __init__(self) -> None:
        self.scripts: list[str] = []

    async def evaluate(self, script: str, arg: object) -> object:
        self.scripts.append(script)
        if script == SETTLED_READ_SCRIPT:
            await asyncio.Event().wait()
        assert (script, arg) == (READ_PROBE, True)
        return [1.0, 200, URL, [], "<html>read</html>"]


async def test_a_settled_read_that_gets_no_answer_reads_the_page_on_its_own():
    page = _BusyToSettle()
    watch = NavigationWatch(page)  # type: ignore[arg-type]

    probe, html = await watch.settled_read(0.25, max_s=3.0, deadline=StepDeadline(0.2))

    assert page.scripts == [SETTLED_READ_SCRIPT, READ_PROBE]
    assert (probe.url, probe.status, html) == (URL, 200, "<html>read</html>")


def test_the_probe_script_has_every_mark_filled():
    """probe.js's `@NAME@` marks are all replaced by navigation.py's values."""
    from service.browser import navigation  # noqa: PLC0415

    script = navigation.PROBE_SCRIPT
    assert "@" not in script.replace("'@'", "")
    assert script.startswith("(() => {")
    for value in (navigation.PROBE_NAME, navigation.SETTLE_NAME, navigation.CHANGE_NAME):
        assert f"'{value}'" in script
    assert f"<= {navigation.TIMER_HORIZON_MS})" in script
