"""Two clusters serving one model never merge: every aggregation in every dashboard (each engine's, raw and
recorded, and the fleet one) and in every rule file keeps the config's fleet labels, whatever they are called.

Parsed, not matched as text: a `sum by (...)`/`max by (...)`/`count by (...)` must list every `fleet.group_by`
label, a `without (...)` must drop none of them, a vector match `on (...)` must match on all of them, and an
aggregation with neither (which sums everything it selects into one series) is only allowed in a stat tile,
the one number for what the dashboard's variables select, so its selector must filter on each fleet label's
variable. `topk`/`bottomk` pick series and keep their labels.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pytest

from llmdash.build import build_dashboards, build_rule_files
from llmdash.config import Config, DashboardSettings
from llmdash.dashboards.walk import walk_panels
from tests.support import builds
from tests.support.promql_ast import aggregations, matchings

SELECTING = {"topk", "bottomk"}
DEFAULT = "default (cluster, namespace)"
CONFIGS = {
    DEFAULT: Config(),
    "recorded dashboards": replace(Config(), dashboard=DashboardSettings(use_recording_rules=True)),
    # three engines (a counted page, a paused gauge, no preemption signal) keep this one fast
    "fleet labels region, tenant": replace(Config(), engines=("vllm", "tensorrt-llm-triton", "llama-cpp"),
                                           fleet=replace(Config().fleet, group_by=("region", "tenant"))),
}


@cache
def dashboards(name: str) -> dict[str, dict]:
    return builds.default_dashboards() if name == DEFAULT else build_dashboards(CONFIGS[name])


def targets(dashboard: dict):
    """(panel type, where, expression) of every query and annotation."""
    for placed in walk_panels(dashboard):
        for target in placed.panel.get("targets", []):
            if target.get("expr"):
                yield placed.panel.get("type"), f"panel {placed.panel.get('title')!r}", target["expr"]
    for entry in dashboard.get("annotations", {}).get("list", []):
        if entry.get("expr"):
            yield "annotation", f"annotation {entry.get('name')!r}", entry["expr"]


def merges(expr: str, groups: tuple[str, ...]) -> list[str]:
    """Every place the expression folds two fleet groups into one series."""
    problems = []
    for agg in aggregations(expr):
        if agg.kind == "by" and not set(groups) <= set(agg.labels):
            problems.append(f"{agg.op} by ({', '.join(agg.labels)})")
        elif agg.kind == "without" and set(groups) & set(agg.labels):
            problems.append(f"{agg.op} without ({', '.join(agg.labels)})")
        elif agg.kind == "" and agg.op not in SELECTING:
            problems.append(f"{agg.op} (...)")
    problems += [f"{op} on ({', '.join(labels)})" for op, kind, labels in matchings(expr)
                 if kind == "on" and not set(groups) <= set(labels)]
    return problems


def filters_every_group(expr: str, groups: tuple[str, ...]) -> bool:
    return all(f'{g}=~"${g}"' in expr for g in groups)


@pytest.mark.parametrize("name", CONFIGS)
def test_no_dashboard_query_merges_two_fleet_groups(name):
    config = CONFIGS[name]
    groups = tuple(config.fleet.group_by)
    wrong = {}
    for dashboard, model in dashboards(name).items():
        for kind, where, expr in targets(model):
            problems = merges(expr, groups)
            # a stat tile is one number for the selection, so it sums what the fleet variables select
            if kind == "stat" and filters_every_group(expr, groups):
                problems = [p for p in problems if not (p.endswith("(...)") or p.endswith("by (le)"))]
            if problems:
                wrong[f"{dashboard} {where}"] = problems
    assert wrong == {}


@pytest.mark.parametrize("name", CONFIGS)
def test_no_rule_merges_two_fleet_groups(name):
    config = CONFIGS[name]
    groups = tuple(config.fleet.group_by)
    wrong = {f"{engine} {rule.get('record') or rule.get('alert')}": problems
             for engine, model in build_rule_files(config).items() for group in model["groups"]
             for rule in group["rules"] if (problems := merges(rule["expr"], groups))}
    assert wrong == {}


@pytest.mark.parametrize("name", CONFIGS)
def test_the_fleet_dashboard_aggregates_per_engine_fleet_group_and_model(name):
    """Its per-model charts and its firing-alerts column group by exactly the engine, the fleet labels and the
    model (the alerts first deduplicated per alert identity, HA rulers writing one store): two clusters are two
    rows and two lines."""
    groups = tuple(CONFIGS[name].fleet.group_by)
    found = {(agg.op, agg.labels) for _, _, expr in targets(dashboards(name)["fleet"]) for agg in aggregations(expr)
             if agg.kind == "by"}
    per_model = ("llm_engine", *groups, "model_name")
    identity = ("alertname", "severity", "llm_engine", "model_name", *groups, "instance", "signal")
    assert found == {("sum", per_model), ("max", per_model), ("count", per_model), ("max", identity)}


def test_a_merging_fixture_is_caught():
    """The check itself: an aggregation that drops the fleet labels is reported, one that keeps them is not."""
    groups = ("cluster", "namespace")
    assert merges('sum by (llm_engine, model_name) (x{cluster=~"$cluster"})', groups) == [
        "sum by (llm_engine, model_name)"]
    assert merges("max without (cluster) (x)", groups) == ["max without (cluster)"]
    assert merges("a / on (model_name) b", groups) == ["/ on (model_name)"]
    assert merges("sum (x)", groups) == ["sum (...)"]
    assert merges("topk(20, sum by (cluster, namespace, model_name) (x))", groups) == []
