"""The dashboard's and the alerts' PromQL: it parses, and the name checker that the
integration test runs against a live worker rejects what it should."""

from __future__ import annotations

import pytest
from manifests import DEPLOY, alert_rules, dashboard_exprs
from promql_names import exported_samples, grafana_to_promql, problems, selectors

EXPORTED = exported_samples([
    ("crawl_pages", "counter", ["outcome"]),
    ("crawl_page_seconds", "histogram", []),
    ("crawl_pages_pending", "gauge", []),
])  # fmt: skip

SEVERITIES = frozenset({"warning", "critical"})


def test_counters_and_histograms_are_read_with_their_sample_suffixes():
    """A counter is x_total; a histogram is h_bucket (with le), h_sum and h_count."""
    assert set(EXPORTED) == {
        "crawl_pages_total",
        "crawl_page_seconds_bucket",
        "crawl_page_seconds_sum",
        "crawl_page_seconds_count",
        "crawl_pages_pending",
    }
    assert EXPORTED["crawl_page_seconds_bucket"] == {"le"}


def test_the_checker_accepts_exported_metrics_and_their_labels():
    """Known names, their labels and the target labels pass."""
    exprs = [
        'sum by (outcome) (rate(crawl_pages_total{namespace="a", outcome="ok"}[5m]))',
        "histogram_quantile(0.9, sum by (le) (rate(crawl_page_seconds_bucket{le!=''}[5m])))",
        '{__name__="crawl_pages_pending", pod=~".+"}',
    ]
    assert problems(exprs, EXPORTED, external={}) == []


def test_the_checker_rejects_unknown_metrics_labels_and_bad_syntax():
    """A metric no worker exports, a label it lacks, a missing suffix, a syntax error."""
    found = problems(
        [
            "sum(crawl_pages_pendng)",
            'crawl_pages_total{reason="x"}',
            "rate(crawl_pages[5m])",
            "sum(rate(crawl_pages_total[5m])",
            "crawl_page_seconds",
        ],
        EXPORTED,
        external={},
    )
    assert len(found) == 5, found
    assert "crawl_pages_pendng is not exported" in found[0]
    assert "has no label ['reason']" in found[1]


def test_external_metrics_pass_only_when_listed():
    """kube-state-metrics names are accepted only from the external list."""
    expr = 'kube_pod_container_status_restarts_total{container="worker"} > 0'
    assert problems([expr], EXPORTED, external={}) != []
    external = {"kube_pod_container_status_restarts_total": "kube-state-metrics"}
    assert problems([expr], EXPORTED, external=external) == []


def test_grafana_macros_and_variable_queries_become_promql():
    """$__rate_interval is a duration; label_values(metric, label) yields its metric."""
    expr = grafana_to_promql('rate(crawl_pages_total{namespace=~"$namespace"}[$__rate_interval])')
    assert [s.metric for s in selectors(expr)] == ["crawl_pages_total"]
    query = grafana_to_promql("label_values(crawl_pages_pending, namespace)")
    assert [s.metric for s in selectors(query)] == ["crawl_pages_pending"]


@pytest.mark.parametrize("expr", dashboard_exprs())
def test_every_dashboard_expression_parses(expr):
    """Each panel target and variable query is valid PromQL once Grafana's macros are set."""
    assert selectors(grafana_to_promql(expr))


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_every_alert_parses_and_says_what_to_do(rule):
    """Each alert has a valid expression, a severity, a summary and a runbook section."""
    assert selectors(rule["expr"])
    assert rule["labels"]["severity"] in SEVERITIES
    assert rule["annotations"]["summary"]
    anchor = rule["alert"].lower()
    assert rule["annotations"]["runbook"] == f"deploy/README.md#{anchor}"


def test_the_alerts_cover_the_operations_guide():
    """The alerts the issue asks for exist, and each has a section in deploy/README.md."""
    names = {rule["alert"] for rule in alert_rules()}
    assert {
        "CrawlstreamLagGrowing",
        "CrawlstreamNoCommits",
        "CrawlstreamDeadLetters",
        "CrawlstreamMemoryNearLimit",
        "CrawlstreamBrowserRestartStorm",
    } <= names


def test_every_alert_has_its_section_in_the_operations_guide():
    """deploy/README.md has a `### AlertName` section for each runbook link."""
    guide = (DEPLOY / "README.md").read_text()
    for rule in alert_rules():
        assert f"\n### {rule['alert']}\n" in guide, rule["alert"]
