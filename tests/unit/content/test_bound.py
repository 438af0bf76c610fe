"""A result within `CRAWL_MAX_RESULT_BYTES` as a whole."""

from __future__ import annotations

import json

from service.content.bound import bounded
from service.content.page import PageContent
from service.contracts import ErrorCode


def test_a_result_within_the_cap_is_left_alone() -> None:
    content = PageContent(ok=True, markdown="m" * 10, text="t" * 10, html="h" * 10)
    assert bounded(content, 100) is content


def test_text_fields_share_what_the_other_fields_leave() -> None:
    """The smallest text field keeps all of itself; the others split the rest."""
    content = PageContent(
        ok=True, markdown="m" * 100, text="t" * 10, html="h" * 1000, json_data={"k": "v" * 40}
    )
    cut = bounded(content, 200)
    assert cut.truncated
    assert cut.ok
    assert cut.text == "t" * 10
    assert cut.json_data == content.json_data
    json_size = len('{"k":"' + "v" * 40 + '"}')
    assert len(cut.markdown or "") + len(cut.html or "") + 2 + 12 + json_size <= 200


def test_fields_that_cannot_be_cut_end_the_page_too_large_naming_them() -> None:
    content = PageContent(ok=True, final_url="http://a/", status_code=200, json_data=["x" * 50])
    failed = bounded(content, 20)
    assert not failed.ok
    assert failed.error is not None
    assert failed.error.code == ErrorCode.TOO_LARGE
    assert "`json`" in failed.error.message
    assert failed.final_url == "http://a/"


def test_text_is_counted_as_its_json_with_escapes() -> None:
    content = PageContent(ok=True, text='é"\n' * 100)
    cut = bounded(content, 50)
    assert cut.truncated
    assert len(json.dumps(cut.text, ensure_ascii=False).encode()) <= 50
