"""Retries of transient page failures: which ones, how long to wait, and when to give up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from service.backoff import backoff_s
from service.content.page import PageContent, failed, parse_retry_after
from service.contracts import ErrorCode
from service.settings import Settings
from service.worker.fetcher.retry import MIN_ATTEMPT_S, PageDeadline, RetryPolicy, retry_reason

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def _policy(rand: float = 1.0, retries: int = 2) -> RetryPolicy:
    return RetryPolicy(retries=retries, base_s=0.5, max_s=30.0, rand=lambda: rand)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (failed(ErrorCode.HTTP_ERROR, "HTTP 503", status_code=503), "http_503"),
        (failed(ErrorCode.HTTP_ERROR, "HTTP 429", status_code=429), "http_429"),
        (failed(ErrorCode.CONNECTION, "ERR_CONNECTION_RESET"), "connection"),
        (failed(ErrorCode.BLOCKED_BY_SITE, "Cloudflare", status_code=403), "blocked_by_site"),
        (failed(ErrorCode.HTTP_ERROR, "HTTP 404", status_code=404), None),
        (failed(ErrorCode.HTTP_ERROR, "HTTP 500", status_code=500), None),
        (failed(ErrorCode.TIMEOUT, "slow"), None),
        (failed(ErrorCode.BLOCKED, "private"), None),
        (failed(ErrorCode.BLOCKED, "https://10.0.0.1/: refused by the URL policy"), None),
        (failed(ErrorCode.INVALID_SELECTOR, "wait_for '##'"), None),
        (failed(ErrorCode.DNS, "nxdomain"), None),
        (PageContent(ok=True, status_code=200), None),
    ],
)
def test_only_transient_failures_are_retried(content, reason):
    """429, 503, challenge pages and connection failures are retried; 404, 500, timeouts,
    blocked, dns and invalid selectors not."""
    assert retry_reason(content) == reason


def test_backoff_bound_doubles_up_to_the_cap():
    """With the largest draw the wait is base * 2**attempt, never above the cap."""
    waits = [backoff_s(n, base_s=0.5, max_s=3.0, rand=lambda: 1.0) for n in range(5)]
    assert waits == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff_s(10_000, base_s=0.5, max_s=3.0, rand=lambda: 1.0) == 3.0


def test_backoff_jitter_spans_zero_to_the_bound():
    """Full jitter: every draw lies in [0, bound], and the draws are spread over it."""
    waits = [backoff_s(2, base_s=0.5, max_s=30.0) for _ in range(2000)]
    assert all(0.0 <= wait <= 2.0 for wait in waits)
    assert min(waits) < 0.2
    assert max(waits) > 1.8
    assert backoff_s(2, base_s=0.5, max_s=30.0, rand=lambda: 0.0) == 0.0


def test_retries_are_bounded():
    """After `retries` retries the failure is kept."""
    policy = _policy(retries=2)
    assert policy.delay_s(0, retry_after_s=None, remaining_s=60) == 0.5
    assert policy.delay_s(1, retry_after_s=None, remaining_s=60) == 1.0
    assert policy.delay_s(2, retry_after_s=None, remaining_s=60) is None
    assert _policy(retries=0).delay_s(0, retry_after_s=None, remaining_s=60) is None


def test_retry_after_is_honoured_and_capped_by_the_maximum():
    """The server's wait replaces the backoff, but never exceeds the configured maximum."""
    policy = _policy(rand=0.0)
    assert policy.delay_s(0, retry_after_s=3.0, remaining_s=60) == 3.0
    assert policy.delay_s(0, retry_after_s=0.0, remaining_s=60) == 0.0
    assert policy.delay_s(0, retry_after_s=45.0, remaining_s=60) == 30.0


def test_retry_after_beyond_the_deadline_gives_up():
    """When the asked-for wait leaves no time for another attempt, the page does not wait."""
    policy = _policy()
    assert policy.delay_s(0, retry_after_s=5.0, remaining_s=5.0 + MIN_ATTEMPT_S) == 5.0
    assert policy.delay_s(0, retry_after_s=5.0, remaining_s=5.0) is None
    assert policy.delay_s(0, retry_after_s=None, remaining_s=MIN_ATTEMPT_S / 2) is None


def test_own_backoff_is_shortened_to_fit_the_deadline():
    """A jittered backoff longer than what is left is cut to leave time for one attempt."""
    policy = RetryPolicy(retries=5, base_s=10.0, max_s=30.0, rand=lambda: 1.0)
    assert policy.delay_s(0, retry_after_s=None, remaining_s=4.0) == 4.0 - MIN_ATTEMPT_S


def test_policy_from_default_settings():
    """Defaults: 2 retries, 0.5 s base, 30 s cap."""
    policy = RetryPolicy.from_settings(Settings())
    assert (policy.retries, policy.base_s, policy.max_s) == (2, 0.5, 30.0)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        (" 0 ", 0.0),
        (format_datetime(NOW + timedelta(seconds=90), usegmt=True), 90.0),
        ("Sat, 01 Mar 2025 12:00:30 GMT", 30.0),
        (format_datetime(NOW - timedelta(hours=1), usegmt=True), 0.0),
        ("soon", None),
        ("-5", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_parses_seconds_and_http_dates(value, seconds):
    """Delay-seconds and HTTP-dates both give seconds from now; past dates give 0."""
    assert parse_retry_after(value, now=NOW) == seconds


def test_page_deadline_starts_with_the_first_attempt():
    """Time before the first attempt is not counted; afterwards it runs down to zero."""
    now = [100.0]
    deadline = PageDeadline(10.0, clock=lambda: now[0])
    now[0] += 50
    assert deadline.remaining_s() == 10.0
    assert deadline.attempt_s() == 10.0
    now[0] += 4
    assert deadline.remaining_s() == 6.0
    assert deadline.attempt_s() == 6.0
    now[0] += 20
    assert deadline.remaining_s() == 0.0
    assert deadline.attempt_s() == MIN_ATTEMPT_S


def test_an_upstream_proxy_s_failure_is_retried_like_a_connection_error_and_actions_are_not():
    assert retry_reason(failed(ErrorCode.PROXY_ERROR, "proxy office refused")) == "proxy_error"
    assert retry_reason(failed(ErrorCode.ACTION_FAILED, "action 1 (click '#a'): ...")) is None
