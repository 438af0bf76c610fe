"""The metric names a PromQL expression reads, and whether a worker exports them.

Expressions are parsed with `promql-parser` (Prometheus's own grammar, in Rust); Grafana's
macros are replaced by durations first, and a `label_values(metric, label)` variable query
yields its metric.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import promql_parser

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

GRAFANA_MACROS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
"""Grafana's duration macros, each replaced by a duration the parser accepts."""

_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?P<selector>[^,]+?)\s*,\s*\w+\s*\)\s*$")

TARGET_LABELS = frozenset({"namespace", "pod", "container", "job", "instance"})
"""Labels Prometheus adds to every scraped series (Kubernetes service discovery)."""


@dataclass(frozen=True, slots=True)
class Selector:
    """One vector selector: a metric name and the label names it matches on."""

    metric: str
    labels: frozenset[str]


def grafana_to_promql(expr: str) -> str:
    """A Grafana target's expression as plain PromQL (variables inside strings stay)."""
    for macro, duration in GRAFANA_MACROS.items():
        expr = expr.replace(macro, duration)
    found = _LABEL_VALUES.match(expr)
    return found.group("selector") if found else expr


def selectors(expr: str) -> list[Selector]:
    """Every vector selector of `expr`; a syntax error raises `ValueError`."""
    tree = promql_parser.parse(expr)
    seen: list[Selector] = []

    def visit(node: object) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            matchers = node.matchers.matchers
            names = {m.name for m in matchers}
            metric = node.name or next(m.value for m in matchers if m.name == "__name__")
            seen.append(Selector(metric=metric, labels=frozenset(names - {"__name__"})))
        return True

    promql_parser.walk(tree, visit)
    return seen


def exported_samples(families: Iterable[tuple[str, str, Iterable[str]]]) -> dict[str, set[str]]:
    """Sample name -> label names, from (family name, type, label names) as a scrape shows
    them: a counter `x` is read as `x_total`, a histogram `h` as `h_bucket` (with `le`),
    `h_sum` and `h_count`."""
    samples: dict[str, set[str]] = {}
    for name, kind, given in families:
        labels = set(given)
        if kind == "counter":
            samples[f"{name}_total"] = labels
        elif kind == "histogram":
            samples[f"{name}_bucket"] = labels | {"le"}
            samples[f"{name}_sum"] = labels
            samples[f"{name}_count"] = labels
        else:
            samples[name] = labels
    return samples


def problems(
    exprs: Iterable[str], exported: Mapping[str, set[str]], external: Mapping[str, str]
) -> list[str]:
    """What is wrong with `exprs`: syntax errors, metrics neither exported nor listed as
    external, and label names an exported metric does not have."""
    found = []
    for expr in exprs:
        try:
            used = selectors(expr)
        except ValueError as exc:
            found.append(f"{expr!r}: does not parse: {exc}")
            continue
        for selector in used:
            if selector.metric in external:
                continue
            if selector.metric not in exported:
                found.append(f"{expr!r}: {selector.metric} is not exported by a worker")
                continue
            unknown = selector.labels - exported[selector.metric] - TARGET_LABELS
            if unknown:
                found.append(f"{expr!r}: {selector.metric} has no label {sorted(unknown)}")
    return found
