"""Prometheus 2.42 and Prometheus 3.16, each for real: every panel, annotation and rule answers alike.

The simulator's kv-collapse of every engine, as the exporters write it (Triton's C++ `le="5000"`, Rust's and
Go's integer bounds), is backfilled into Debian's Prometheus 2.42 by its promtool and into Prometheus 3.16
(the current stack, tests/support/stacks.py) by its own promtool, which normalises `le` and `quantile` of
histogram and summary families to float text as its scrape does (checked below on a live scrape of
`llmdash simulate --serve`; only under the family's TYPE line, which the simulator's files repeat); 3.16's
range selectors and subqueries are left-open. Then, on the same data at the same instants: every panel
target and annotation of every dashboard, and every recording rule's and alert's expression over raw
series, for the same series.
The scrapes are phased (each process 0.5-14.5 s into the interval, as a fleet's are): on data on the minute
grid the queries step on, a 5-minute range holds 21 samples on 2.42 and 20 on 3.16, which in the collapse
moved dynamo's TTFT p99 from 1.84 s to 1.29 s at one minute. Tolerances are the suite's
(tests/e2e/test_victoriametrics_e2e.py): a panel within 10 % at 85 % of the minutes after warm-up or more, a
recorded series within 5 % at 70 %, with a floor of 1 % of the series' largest value; an alert's condition
holds for the same series (the same replica) from the same minute on both.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
import time

import pytest

from llmdash.build import build_rule_files
from llmdash.config import Config
from llmdash.engines.catalog import load_all, load_engine
from llmdash.lab.emitters import simulated_engines
from llmdash.lab.evaluate import evaluate_dashboard
from llmdash.lab.promserver import PrometheusServer, free_port
from llmdash.lab.scenarios import build, write_openmetrics
from tests.support import stacks

pytestmark = pytest.mark.e2e

ENGINES = simulated_engines(load_all())
STEP_S = 60.0
PANEL_TOLERANCE, RECORDED_TOLERANCE = 0.10, 0.05      # at PANEL_SHARE, RECORDED_SHARE of the minutes or more
PANEL_SHARE, RECORDED_SHARE = 0.85, 0.70
WARM_UP_S = 3600 + 15 * 60 + 5 * 60     # the divergence baseline: its trailing hour, its offset, one 5m rate
FLOAT_LABELS = ("le", "quantile")


@pytest.fixture(scope="module")
def servers():
    """({"oldest": server, "current": server}, (start, end), rule files): the same kv-collapse in both."""
    both = {name: stacks.require(name) for name in stacks.STACKS}
    scenario = build("kv-collapse")
    start = (time.time() // 3600) * 3600 - 3600 - scenario.duration_s - 3600
    started = {name: PrometheusServer(stack=stack) for name, stack in both.items()}
    try:
        data = started["oldest"].dir / "exporters.om"
        with open(data, "w") as out:
            write_openmetrics(scenario, {e: load_engine(e) for e in ENGINES}, 1, start, out, phased=True)
            out.write("# EOF\n")
        for server in started.values():
            server.backfill(data)
            server.start()
        yield started, (start, start + scenario.duration_s), build_rule_files(Config())
    finally:
        for server in started.values():
            server.stop()


def key(labels: dict) -> tuple:
    """A label set, `le` and `quantile` compared by the number they name (`5000` on 2.42 is `5000.0` on 3.16)."""
    return tuple(sorted((k, float(v) if k in FLOAT_LABELS else v) for k, v in labels.items()))


def within(a: float, b: float, tolerance: float, scale: float) -> bool:
    if not (math.isfinite(a) and math.isfinite(b)):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return abs(a - b) <= max(tolerance * max(abs(a), abs(b)), 0.01 * scale, 1e-9)


def differences(a: dict, b: dict, tolerance: float, after: float, share: float) -> list[str]:
    """What differs between two {label set: {time: value}}: a series on one stack only, or a series within
    `tolerance` at fewer than `share` of its minutes from `after` on (a minute with a value on one stack only
    is out), with its first minute out."""
    out = [f"{dict(k)} on {'2.42' if k in a else '3.16'} only" for k in set(a) ^ set(b)]
    for k in set(a) & set(b):
        scale = max((abs(v) for s in (a[k], b[k]) for v in s.values() if math.isfinite(v)), default=0.0)
        times = [t for t in sorted(set(a[k]) | set(b[k])) if t >= after]
        bad = [t for t in times if t not in a[k] or t not in b[k] or not within(a[k][t], b[k][t], tolerance, scale)]
        if len(bad) > (1 - share) * len(times) + 1e-9:
            t = bad[0]
            out.append(f"{dict(k)}: {len(bad)}/{len(times)} minutes out, first at +{(t - after) / 60:.0f} min: "
                       f"{a[k].get(t)} vs {b[k].get(t)}")
    return out


def points(series) -> dict:
    return {key(s.labels): dict(s.points) for s in series}


def range_points(server, expr: str, start: float, end: float) -> dict:
    return {key({k: v for k, v in r["metric"].items() if k != "__name__"}):
            {float(t): float(v) for t, v in r["values"]} for r in server.query_range(expr, start, end, STEP_S)}


@pytest.mark.parametrize("engine", ENGINES)
def test_every_panel_and_annotation_answers_alike_on_2_42_and_3_16(servers, default_build, engine):
    started, (start, end), _ = servers
    old, new = (evaluate_dashboard(default_build[engine], started[s], start, end, STEP_S) for s in stacks.STACKS)
    differ = []
    for pa, pb in zip(old.panels, new.panels):
        for ta, tb in zip(pa.targets, pb.targets):
            differ += [f"{pa.row} / {pa.title} / {ta.ref_id}: {d}" for d in
                       differences(points(ta.series), points(tb.series), PANEL_TOLERANCE, start + WARM_UP_S,
                                   PANEL_SHARE)[:1]]
    assert not differ, "differs between Prometheus 2.42 and 3.16:\n" + "\n".join(differ)
    assert any(t.has_data for p in new.panels for t in p.targets)
    for name in old.annotations:
        spans = [sorted((key(r.labels), round(r.start), round(r.end)) for r in res.annotations[name])
                 for res in (old, new)]
        assert spans[0] == spans[1], f"annotation {name}: {spans[0]} on 2.42, {spans[1]} on 3.16"


def over_raw_series(rules: dict) -> list[dict]:
    """The rules whose expression reads no recorded series: their inputs are the same samples on both stacks.
    (A recorded series is not: each promtool backfills rules at its own phase, 2.42 at 59.4 s into the minute
    and 3.16 at 42.8 s for the same group and file, so a chain's inputs are 17 s apart; the live page test,
    tests/e2e/test_alertmanager_e2e.py, evaluates the chain on each stack.)"""
    every = [rule for group in rules["groups"] for rule in group["rules"]]
    recorded = {rule["record"] for rule in every if "record" in rule}
    return [rule for rule in every if not any(re.search(rf"(?<![\w:]){re.escape(name)}(?![\w:])", rule["expr"])
                                              for name in recorded)]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_rule_over_raw_series_answers_alike(servers, engine):
    """Each such recording rule's expression within 5 %; each such alert's condition (its expression, before
    `for`) for the same series, the same replica, from the same minute."""
    started, (start, end), rules = servers
    differ, checked = [], over_raw_series(rules[engine])
    assert checked
    for rule in checked:
        got = [range_points(started[s], rule["expr"], start, end) for s in stacks.STACKS]
        if "record" in rule:
            differ += [f"{rule['record']}: {d}"
                       for d in differences(*got, RECORDED_TOLERANCE, start + WARM_UP_S, RECORDED_SHARE)[:1]]
        else:
            first = [{k: min(series) for k, series in g.items()} for g in got]
            if first[0] != first[1]:
                differ.append(f"{rule['alert']}: first minute per series {first[0]} on 2.42, {first[1]} on 3.16")
    assert not differ, "differs between Prometheus 2.42 and 3.16:\n" + "\n".join(differ)


def scraped_and_backfilled_le(stack, tmp_path) -> tuple[set[str], set[str]]:
    """The `le` values one stack's Prometheus stores for Triton's first-response histogram: (scraped live from
    `llmdash simulate --serve`, backfilled by its promtool from the same exporter's OpenMetrics text)."""
    metric = "nv_inference_first_response_histogram_ms_bucket"
    port = free_port()
    code = ("from llmdash.cli.lab import simulate_command; simulate_command.main(['--engine', 'tensorrt-llm-triton', "
            f"'--scenario', 'steady', '--serve', '{port}', '--speed', '60'], standalone_mode=True)")
    sim = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = PrometheusServer(scrape_interval="1s", stack=stack, scrape_configs=[
        {"job_name": "sim", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}])
    try:
        scenario = build("steady")
        data = tmp_path / f"{stack.name[:10]}.om"
        with open(data, "w") as out:
            write_openmetrics(scenario, {"tensorrt-llm-triton": load_engine("tensorrt-llm-triton")}, 1,
                              (time.time() // 3600) * 3600 - 3 * 3600, out)
            out.write("# EOF\n")
        server.backfill(data)
        server.start()
        deadline, scraped = time.monotonic() + 30, []
        while time.monotonic() < deadline and not scraped:
            time.sleep(0.5)    # polling the server for the first scrape, up to the deadline
            scraped = server.query(f'group by (le) ({metric}{{job="sim"}})', time.time())
        backfilled = server.query_range(f'group by (le) ({metric}{{job!="sim"}})', time.time() - 4 * 3600,
                                        time.time(), 300)
        return {r["metric"]["le"] for r in scraped}, {r["metric"]["le"] for r in backfilled}
    finally:
        server.stop()
        sim.terminate()
        sim.wait()


def test_le_is_stored_as_each_prometheus_stores_it_from_a_scrape_and_from_promtools_backfill(tmp_path):
    """Why the comparisons above are real: Triton writes `le="5000"`; 2.42 keeps that text, 3.16 stores
    `5000.0`, and its promtool's backfill stores exactly what its scrape stores (so the backfilled suite
    sees Prometheus 3's normalisation, not an imitation of it)."""
    got = {name: scraped_and_backfilled_le(stacks.require(name), tmp_path) for name in stacks.STACKS}
    assert got["oldest"] == ({"100", "500", "2000", "5000", "+Inf"},) * 2
    assert got["current"] == ({"100.0", "500.0", "2000.0", "5000.0", "+Inf"},) * 2
