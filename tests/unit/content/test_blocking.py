"""Challenge and block pages are told from the pages they stand in for."""

from __future__ import annotations

import pytest

from service.content.blocking import challenge_seen

CLOUDFLARE = """<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>
<div id="challenge-error-title">Enable JavaScript and cookies to continue</div>
<script src="/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1?ray=1"></script>
</body></html>"""

AKAMAI = """<HTML><HEAD><TITLE>Access Denied</TITLE></HEAD><BODY><H1>Access Denied</H1>
You don't have permission to access "http://www.example.com/" on this server.<P>
Reference #18.6b2f1002.1700000000.1a2b3c<P>https&#58;&#47;&#47;errors&#46;edgesuite&#46;net&#47;
</BODY></HTML>"""

PERIMETERX = """<html><head><title>Access to this page has been denied</title></head><body>
<div id="px-captcha"></div><script src="//client.perimeterx.net/PXabc/main.min.js"></script>
</body></html>"""

DATADOME = """<html><head><title>example.com</title></head><body>
<iframe src="https://geo.captcha-delivery.com/captcha/?initialCid=x"></iframe></body></html>"""

RECAPTCHA = """<html><body><form action="/verify"><div class="g-recaptcha" data-sitekey="k">
</div></form><script src="https://www.google.com/recaptcha/api.js"></script></body></html>"""

HCAPTCHA = '<html><body><div class="h-captcha" data-sitekey="k"></div></body></html>'

TURNSTILE = """<html><body><div class="cf-turnstile" data-sitekey="k"></div>
<script src="https://challenges.cloudflare.com/turnstile/v0/api.js"></script></body></html>"""


@pytest.mark.parametrize(
    ("status", "headers", "html", "vendor"),
    [
        (403, {"cf-mitigated": "challenge"}, CLOUDFLARE, "Cloudflare challenge"),
        (503, {}, CLOUDFLARE, "Cloudflare challenge"),
        (403, {}, AKAMAI, "Akamai block page"),
        (403, {}, PERIMETERX, "PerimeterX block page"),
        (403, {"x-datadome": "protected"}, DATADOME, "DataDome block page"),
        (429, {}, RECAPTCHA, "reCAPTCHA form"),
        (403, {}, HCAPTCHA, "hCaptcha form"),
        (403, {}, TURNSTILE, "Turnstile form"),
    ],
)
def test_challenge_pages_are_named_with_what_was_seen(
    status: int, headers: dict[str, str], html: str, vendor: str
):
    seen = challenge_seen(status, headers, html)
    assert seen is not None
    assert seen.startswith(f"{vendor} (")


def test_the_marks_seen_are_in_the_message():
    seen = challenge_seen(503, {"cf-mitigated": "challenge"}, CLOUDFLARE)
    assert seen == (
        "Cloudflare challenge (title 'just a moment...';"
        " '/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1?ray=1' loaded;"
        " element #challenge-error-title)"
    )


@pytest.mark.parametrize(
    ("status", "html"),
    [
        (200, CLOUDFLARE),  # a page that shows a challenge with 200 is a page
        (200, RECAPTCHA),  # a login form with a CAPTCHA is a page
        (404, CLOUDFLARE),
        (403, "<html><head><title>403 Forbidden</title></head><body>nginx</body></html>"),
        (403, "<html><head><title>Access Denied</title></head><body>Sign in</body></html>"),
        (503, "<html><body>Down for maintenance</body></html>"),
    ],
)
def test_other_answers_are_not_challenges(status: int, html: str):
    assert challenge_seen(status, {}, html) is None
