"""A client-side redirect loop is `http_error` also when its whole chain ran while the reader
waited (seen in CI on a busy machine: `/nav/hops/15` came back `ok` on its final page)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from service.browser import settle
from service.browser.failures import PageFailedError
from service.browser.settle import MAX_OWN_NAVIGATIONS, Reading
from service.contracts import CrawlOptions, ErrorCode

FINAL = Reading(html="<p>final</p>", url="http://127.0.0.1/nav/hops/0", status=200)


async def _read_stable(monkeypatch: pytest.MonkeyPatch, loaded_while_reading: int) -> Reading:
    watch = SimpleNamespace(
        loaded_documents=1, committed=[f"{FINAL.url[:-1]}{n}" for n in (2, 1, 0)]
    )

    async def read(*_: object) -> Reading:
        watch.loaded_documents = loaded_while_reading  # the chain ran during the reading
        return FINAL

    monkeypatch.setattr(settle, "_read", read)
    return await settle._read_stable(  # noqa: SLF001
        None,  # type: ignore[arg-type]
        watch,  # type: ignore[arg-type]
        CrawlOptions(),
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        settle.SettleLimits(),
    )


async def test_a_chain_that_ended_before_the_reading_is_a_redirect_loop(monkeypatch):
    """Sixteen documents loaded (fifteen of the page's own) by the time the final one is
    read: `http_error`, not the final page."""
    with pytest.raises(PageFailedError) as failed:
        await _read_stable(monkeypatch, loaded_while_reading=16)
    assert failed.value.code == ErrorCode.HTTP_ERROR
    assert "16 documents loaded" in failed.value.message
    assert failed.value.message.endswith(
        "/nav/hops/2 -> http://127.0.0.1/nav/hops/1 -> " + FINAL.url + ")"
    )


async def test_a_chain_within_the_limit_is_read_on_its_final_page(monkeypatch):
    """`MAX_OWN_NAVIGATIONS` of the page's own (script hops, meta refreshes) end ok."""
    reading = await _read_stable(monkeypatch, loaded_while_reading=MAX_OWN_NAVIGATIONS + 1)
    assert reading == FINAL
