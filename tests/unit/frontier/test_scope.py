"""Which discovered URLs a deep crawl follows."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from service.frontier import MAX_PATTERN_LENGTH, MAX_PATTERNS, Scope, compile_patterns
from service.patterns import unrolled_weight

CATASTROPHIC = r"(a|aa)+$"
"""Backtracks exponentially on a long run of `a` that does not end the URL."""

TRAP_URL = "http://example.com/" + "a" * 5000 + "!"


def _admitted(scope: Scope, urls: list[str]) -> list[str]:
    return [url for url in urls if scope.admits(url)]


def test_host_scope_admits_the_seed_host_on_any_scheme_and_port():
    """Only the seed's host name counts; `www.` is a different host."""
    scope = Scope.build("host", ["http://example.com/start"])
    urls = [
        "http://example.com/",
        "https://example.com:8443/deep/page?q=1",
        "http://www.example.com/",
        "http://sub.example.com/",
        "http://example.org/",
        "http://evil.com/http://example.com/",
    ]
    assert _admitted(scope, urls) == urls[:2]


def test_any_seed_puts_a_url_in_scope():
    """With several seeds, a URL in the scope of one of them is admitted."""
    scope = Scope.build("host", ["http://a.example/", "https://b.example/x"])
    assert scope.admits("http://b.example/y")
    assert scope.admits("https://a.example/z")
    assert not scope.admits("http://c.example/")


def test_domain_scope_admits_the_registrable_domain():
    """Subdomains of the seed's registrable domain are in; a sibling under the suffix is not."""
    scope = Scope.build("domain", ["https://www.example.co.uk/"])
    urls = [
        "http://example.co.uk/",
        "https://blog.example.co.uk/post",
        "http://a.b.example.co.uk:8080/",
        "http://other.co.uk/",
        "http://co.uk/",
        "http://example.com/",
    ]
    assert _admitted(scope, urls) == urls[:3]


def test_domain_scope_honours_private_suffixes():
    """`github.io` is a public suffix (private section): one user's site excludes another's."""
    scope = Scope.build("domain", ["https://alice.github.io/"])
    assert scope.admits("https://docs.alice.github.io/")
    assert not scope.admits("https://bob.github.io/")


def test_domain_scope_of_idn_hosts_uses_their_punycode():
    """IDN suffixes are matched in their ASCII form, as normalised URLs carry them."""
    scope = Scope.build("domain", ["http://www.xn--bcher-kva.xn--55qx5d.cn/"])
    assert scope.admits("http://shop.xn--bcher-kva.xn--55qx5d.cn/")
    assert not scope.admits("http://other.xn--55qx5d.cn/")


@pytest.mark.parametrize(
    ("seed", "same", "other"),
    [
        ("http://127.0.0.1:8000/", "https://127.0.0.1/x", "http://127.0.0.2/"),
        ("http://[::1]/", "http://[::1]:81/", "http://[::2]/"),
        ("http://localhost/", "http://localhost:3000/", "http://app.localhost/"),
        ("http://app.localhost/", "http://app.localhost/x", "http://other.localhost/"),
        ("http://co.uk/", "http://co.uk/x", "http://example.co.uk/"),
    ],
)
def test_domain_scope_without_a_registrable_domain_is_the_host(seed, same, other):
    """IP addresses, `localhost` and public suffixes fall back to exact host equality."""
    scope = Scope.build("domain", [seed])
    assert scope.admits(same)
    assert not scope.admits(other)


def test_prefix_scope_admits_urls_under_the_seed_directory():
    """The seed's directory is its URL up to the last `/` of the path, without the query."""
    scope = Scope.build("prefix", ["http://example.com/docs/guide.html?lang=en"])
    urls = [
        "http://example.com/docs/",
        "http://example.com/docs/guide.html",
        "http://example.com/docs/api/v2?x=1",
        "http://example.com/docs",
        "http://example.com/documents/",
        "https://example.com/docs/",
        "http://example.com:8080/docs/",
        "http://example.com.evil/docs/",
        "http://user@example.com/docs/",
    ]
    assert _admitted(scope, urls) == urls[:3]


def test_prefix_of_a_site_root_is_the_whole_origin():
    """A seed at `/` admits every path of its scheme, host and port."""
    scope = Scope.build("prefix", ["https://example.com/"])
    assert scope.admits("https://example.com/any/path?q")
    assert not scope.admits("http://example.com/")
    assert not scope.admits("https://example.com:444/")


def test_include_patterns_admit_what_any_of_them_finds():
    """With include patterns, a URL is admitted when one of them is found in it."""
    scope = Scope.build("host", ["http://h/"], include=[r"/blog/", r"\.html$"])
    assert scope.admits("http://h/blog/post")
    assert scope.admits("http://h/about.html")
    assert not scope.admits("http://h/shop/item")


def test_exclude_patterns_win_over_include_patterns():
    """A URL an exclude pattern finds is never admitted."""
    scope = Scope.build("host", ["http://h/"], include=["/blog/"], exclude=[r"[?&]page=\d+"])
    assert scope.admits("http://h/blog/post")
    assert not scope.admits("http://h/blog/?page=2")
    assert not scope.admits("http://other/blog/post")


def test_an_include_pattern_that_times_out_does_not_admit_and_is_logged_once():
    """A hostile URL makes the pattern time out: not followed, and one warning for the pattern."""
    scope = Scope.build("host", ["http://example.com/"], include=[CATASTROPHIC])
    with capture_logs() as logs:
        assert not scope.admits(TRAP_URL)
        assert not scope.admits(TRAP_URL + "!")
    timeouts = [entry for entry in logs if entry["event"] == "scope.pattern_timed_out"]
    assert [(entry["log_level"], entry["pattern"]) for entry in timeouts] == [
        ("warning", CATASTROPHIC)
    ]
    assert scope.admits("http://example.com/aa")


def test_another_include_pattern_can_still_admit_a_url_one_timed_out_on():
    """A timed-out include pattern counts as not found; the other patterns still count."""
    scope = Scope.build("host", ["http://example.com/"], include=[CATASTROPHIC, r"^http://"])
    with capture_logs():
        assert scope.admits(TRAP_URL)


def test_an_exclude_pattern_that_times_out_excludes_the_url():
    """A timed-out exclude pattern counts as found, so the URL is not followed."""
    scope = Scope.build("host", ["http://example.com/"], exclude=[CATASTROPHIC])
    with capture_logs() as logs:
        assert not scope.admits(TRAP_URL)
    assert [entry["event"] for entry in logs] == ["scope.pattern_timed_out"]
    assert scope.admits("http://example.com/b")


def test_realistic_patterns_compile():
    """Patterns users write for crawl filters pass every check."""
    patterns = [
        r"^https?://example\.com/docs/[a-z0-9-]{1,100}/",
        r"/blog/\d{4}/\d{2}/\d{2}/",
        r"^https://shop\.example\.com/(?:en|de)/products/[\w-]{3,80}(?:\?page=\d{1,3})?$",
        r"\.(?:pdf|zip|jpe?g|png|gif)$",
        r"[?&](?:utm_\w+|sessionid)=",
        r"\p{Han}",
        "",
    ]
    assert [compiled.pattern for compiled in compile_patterns(patterns)] == patterns


def test_too_many_patterns_are_refused():
    """The limit is per list."""
    assert len(compile_patterns(["a"] * MAX_PATTERNS)) == MAX_PATTERNS
    with pytest.raises(ValueError, match=f"33 patterns; at most {MAX_PATTERNS}"):
        compile_patterns(["a"] * (MAX_PATTERNS + 1))


def test_a_too_long_pattern_is_refused_by_position():
    """The message names the pattern's position and its length."""
    compile_patterns(["a" * MAX_PATTERN_LENGTH])
    with pytest.raises(ValueError, match=r"pattern 1 'aaa.*\.\.\.' is 513 characters long"):
        compile_patterns(["ok", "a" * (MAX_PATTERN_LENGTH + 1)])


def test_a_pattern_that_does_not_compile_is_refused_with_the_reason():
    """The message names the pattern and the engine's reason."""
    with pytest.raises(ValueError, match=r"pattern 2 '\(unclosed' does not compile: missing \)"):
        compile_patterns(["a", "b", "(unclosed"])


@pytest.mark.parametrize("pattern", [r"(a{1000}){1000}", r"(a{100}b){65535}", r"x{99999999999}"])
def test_a_pattern_whose_repeats_would_unroll_too_much_is_refused_before_compiling(pattern):
    """Compiling these would take hundreds of megabytes or more; they are refused first."""
    with pytest.raises(ValueError, match="may unroll into more than 50,000 items"):
        compile_patterns([pattern])


def test_the_repeat_budget_is_shared_by_a_list():
    """Patterns that each fit the budget can add up past it; the message names the heaviest."""
    medium, heavier = r"(?:[ab]{10}){100}", r"(?:[abc]{10}){100}"
    patterns = [medium] * 6 + [heavier]
    weights = [unrolled_weight(pattern, cap=10**9) for pattern in patterns]
    assert max(weights) < 50_000 < sum(weights)
    compile_patterns(patterns[1:])
    with pytest.raises(ValueError, match=r"pattern 6 '\(\?:\[abc\]\{10\}\)\{100\}' alone"):
        compile_patterns(patterns)


@pytest.mark.parametrize(
    ("pattern", "nested_product"),
    [
        (r"(a{1000}){1000}", 1_000_000),
        (r"[)](a{100}){100}", 10_000),
        (r"\((a{100}\)){100}", 10_000),
        (r"(?x)(a{10} # ) comment\n){10}", 100),
        (r"((ab){10,}c){5,20}", 200),
    ],
)
def test_the_unrolled_weight_is_at_least_the_nested_product(pattern, nested_product):
    """Escaped or bracketed parentheses cannot hide a nesting from the count."""
    assert unrolled_weight(pattern, cap=10**9) >= nested_product


def test_build_names_the_list_of_a_bad_pattern():
    """An error in the exclude list says so, as the request has two lists."""
    with pytest.raises(ValueError, match=r"^exclude: pattern 0 '\[' does not compile"):
        Scope.build("host", ["http://h/"], include=["ok"], exclude=["["])


def test_an_unknown_scope_kind_is_refused():
    """Only host, domain and prefix exist."""
    with pytest.raises(ValueError, match="unknown scope kind 'site'"):
        Scope.build("site", ["http://h/"])  # type: ignore[arg-type]
