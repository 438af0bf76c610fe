"""A request's identity options as a browser context, and the key contexts are reused by."""

from __future__ import annotations

import pytest
from playwright.async_api import async_playwright

from service.browser.identity import VIEWPORT, context_arguments, context_key
from service.browser.pool import _reuse_key, _session_key
from service.contracts import CrawlOptions
from service.devices import descriptor, device_names


def test_a_request_without_identity_options_keeps_the_pools_it_always_had() -> None:
    plain = CrawlOptions()
    assert context_key(plain) == ""
    assert _reuse_key(plain) == ""
    assert _reuse_key(CrawlOptions(block_resources=("image",))) == "image"
    assert context_arguments(plain) == {"viewport": VIEWPORT}


def test_equal_identities_share_a_key_and_different_ones_do_not() -> None:
    one = CrawlOptions(locale="de-DE", headers={"A": "1", "B": "2"})
    same = CrawlOptions(headers={"B": "2", "A": "1"}, locale="de-DE", formats=("text",))
    other = CrawlOptions(locale="de-DE", headers={"A": "1"})
    assert context_key(one) == context_key(same) != ""
    assert context_key(one) != context_key(other)
    assert _reuse_key(one) != _reuse_key(CrawlOptions())
    assert context_key(CrawlOptions(javascript=False)) != ""


def test_a_device_is_applied_under_the_request_s_own_viewport_and_user_agent() -> None:
    arguments = context_arguments(
        CrawlOptions(device="iPhone 15", viewport={"width": 500, "height": 600}, user_agent="UA")
    )
    assert arguments["viewport"] == {"width": 500, "height": 600}
    assert arguments["user_agent"] == "UA"
    assert arguments["is_mobile"] is True
    assert arguments["has_touch"] is True


@pytest.mark.asyncio
async def test_the_device_table_is_the_installed_playwright_s() -> None:
    """`service/devices.json` equals `playwright.devices` (less the browser type)."""
    async with async_playwright() as playwright:
        devices = playwright.devices
    assert device_names() == frozenset(devices)
    for name, given in devices.items():
        wanted = {key: value for key, value in given.items() if key != "default_browser_type"}
        assert descriptor(name) == wanted, name


def test_an_unverified_request_never_shares_a_context_with_a_verified_one() -> None:
    """`skip_tls_verification` makes the context with `ignore_https_errors` and keys it apart
    (wiped contexts, sessions); a verified request's context ignores no certificate error."""
    unverified = CrawlOptions(skip_tls_verification=True)
    assert context_arguments(unverified)["ignore_https_errors"] is True
    assert "ignore_https_errors" not in context_arguments(CrawlOptions())
    assert context_key(unverified) != ""
    assert _reuse_key(unverified) != _reuse_key(CrawlOptions())
    assert _session_key(CrawlOptions(session="s", skip_tls_verification=True)) != _session_key(
        CrawlOptions(session="s")
    )
