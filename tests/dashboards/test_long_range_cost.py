"""Issue 31: over a day the raw dashboards read each 5-minute window once, not three times over.

Expected values from the definitions, never from the production helpers: Grafana steps a panel's range query
range / Max data points, never finer than its Min interval (Grafana's panel query options); a 5-minute window
tiles a day in 86400 / 300 = 288 points; at 3 h, 10800 / 288 = 37.5 s is finer than the 60 s Min interval."""

import dataclasses
import json
import re

from llmdash.config import Config
from llmdash.dashboards.assemble import build_dashboard
from llmdash.dashboards.walk import walk_panels
from llmdash.engines.catalog import load_engine
from llmdash.lab import bench_cost
from tests.support.paths import GENERATED


def query_panels(model: dict):
    return [placed.panel for placed in walk_panels(model) if placed.panel.get("targets")]


def test_every_query_panel_draws_one_window_per_point_over_a_day(default_build):
    for name, model in default_build.items():
        for panel in query_panels(model):
            assert (panel["interval"], panel["maxDataPoints"]) == ("60s", 288), (name, panel["title"])


def test_the_points_follow_the_window():
    config = Config()
    config = dataclasses.replace(config, divergence=dataclasses.replace(config.divergence, window="10m"))
    panel = query_panels(build_dashboard(load_engine("vllm"), config))[0]
    assert (panel["interval"], panel["maxDataPoints"]) == ("120s", 144)


def test_a_day_steps_five_minutes_and_three_hours_stay_at_the_min_interval(default_build):
    queries = [q for q in bench_cost.dashboard_queries(default_build["vllm"]) if not q.title.startswith("annotation")]
    assert {(q.points, q.min_step_s) for q in queries} == {(288, 60)}
    day = max(bench_cost.grafana_step(24 * 3600, 288), 60)
    three_hours = max(bench_cost.grafana_step(3 * 3600, 288), 60)
    assert (day, three_hours) == (300, 60)
    assert bench_cost.grafana_step(24 * 3600, 288, scrape_s=60) == 300    # 300 s is a whole number of 60 s scrapes


def test_the_divergence_annotation_reads_fixed_windows_at_a_fixed_min_step(default_build):
    """Nothing in the annotation scales with the range: 5-minute rates, and baselines of a 1 h subquery sampled
    every 5 m, ended 1 h ago (latency and throughput), stepped at least every 60 s."""
    annotation = next(a for a in default_build["vllm"]["annotations"]["list"] if a["name"].startswith("Divergence"))
    assert annotation["target"]["interval"] == "60s"
    expr = annotation["target"]["expr"]
    assert "$__" not in expr
    ranges = re.findall(r"\[[^\]]*\](?: offset \w+)?", expr)
    assert set(ranges) == {"[5m]", "[1h:5m] offset 1h"}
    assert ranges.count("[1h:5m] offset 1h") == 2


def test_the_v2_twin_carries_the_same_query_options():
    resource = json.loads((GENERATED / "dashboards-v2" / "vllm.json").read_text())
    options = [element["spec"]["data"]["spec"]["queryOptions"] for element in resource["spec"]["elements"].values()
               if element["spec"]["data"]["spec"]["queries"]]
    assert options and all(o == {"interval": "60s", "maxDataPoints": 288} for o in options)
