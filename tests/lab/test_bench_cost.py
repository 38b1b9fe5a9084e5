"""The dashboard-load cost harness: Grafana's query substitution, rule levels, and one real measurement."""

from __future__ import annotations

import json

import pytest

from llmdash.config import Config
from llmdash.errors import LlmdashError
from llmdash.lab import bench_cost


def test_step_and_rate_interval_follow_grafana():
    assert bench_cost.grafana_step(3 * 3600) == 15          # 10.8 s per point, never below the scrape
    assert bench_cost.grafana_step(24 * 3600) == 90         # 86.4 s rounded up to whole scrapes
    expr = 'sum(rate(x{model_name=~"$model_name", instance=~"${instance}"}[$__rate_interval]))'
    assert bench_cost.query_as_sent(expr, 3 * 3600, 15) == 'sum(rate(x{model_name=~".*", instance=~".*"}[60s]))'
    assert "[105s]" in bench_cost.query_as_sent("rate(x[$__rate_interval])", 24 * 3600, 90)


def test_queries_cover_nested_panels_and_annotations():
    model = {"panels": [{"title": "q", "gridPos": {"y": 1},
                         "targets": [{"expr": "b", "instant": True}, {"refId": "no expr"}]},
                        {"title": "row", "type": "row", "collapsed": True, "gridPos": {"y": 0},
                         "panels": [{"title": "p", "targets": [{"expr": "a", "interval": "1m"}]}]}],
             "annotations": {"list": [{"name": "Preemption", "target": {"expr": "c", "interval": "60s"}},
                                      {"name": "builtin"}]}}
    Q = bench_cost.Query
    assert bench_cost.dashboard_queries(model) == [Q("p", "a", min_step_s=60), Q("q", "b", instant=True),
                                                   Q("annotation: Preemption", "c", min_step_s=60)]  # grid order


@pytest.mark.e2e
def test_one_load_is_measured_on_a_real_prometheus(tmp_path):
    """A tiny fleet: samples are read from Prometheus' stats, grow with the fleet, and the reference
    dashboard's own metrics are generated so it pays for what it reads."""
    anchor = {"panels": [{"title": "queue", "targets": [
        {"expr": 'histogram_quantile(0.99, sum by (le) (rate(vllm:request_queue_time_seconds_bucket'
                 '{model_name=~"$model_name"}[$__rate_interval])))'}]}]}
    path = tmp_path / "anchor.json"
    path.write_text(json.dumps(anchor))
    fleets = (bench_cost.Fleet(2, 900, 1.3, True), bench_cost.Fleet(4, 900, 1.3, True))
    rows, rule_costs = bench_cost.run(Config(), path, fleets)
    small, large = ({r.dashboard: r for r in rows if r.fleet == n and r.mode == "raw"} for n in (2, 4))
    reference = bench_cost.ANCHOR_NAME
    assert small[reference].samples > 0 and small["vllm"].samples > 0
    assert 1.8 < large["vllm"].samples / small["vllm"].samples < 2.2         # linear in instances
    assert 1.8 < large[reference].samples / small[reference].samples < 2.2
    assert small["vllm"].largest.samples <= small["vllm"].samples
    assert small["vllm"].scale == pytest.approx(1000 / 2 * (3 * 3600 / 900))
    assert rule_costs[2] > 0 and rule_costs[4] > rule_costs[2]
    text = bench_cost.table(rows, rule_costs, fleets)
    assert "| 2 | 0.25 h | vllm | raw |" in text and "samples/min" in text          # 900 s of range
    assert "| 2 | sglang |" not in text                                 # reads nothing on a vLLM fleet


def test_missing_reference_dashboard_is_a_one_line_usage_error(tmp_path):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "llmdash.cli.main", "bench-cost", "--anchor",
                             str(tmp_path / "absent.json"), "--out", str(tmp_path / "cost.md")],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith("error: cannot read vLLM's overview dashboard") and result.stderr.count("\n") == 1
    assert not (tmp_path / "cost.md").exists()


def test_an_anchor_far_larger_than_the_overview_is_refused_unread(tmp_path):
    """Issue 28: a 1 GB --anchor was read whole (2.1 GB of memory) before anything was checked."""
    path = tmp_path / "huge.json"
    with open(path, "w") as huge:
        huge.truncate(1 << 30)   # sparse: no disk, but 1 GiB to read
    with pytest.raises(LlmdashError) as refused:
        bench_cost.run(Config(), path)
    assert str(refused.value) == (f"cannot read vLLM's overview dashboard: {path}: file is 1073741824 bytes, "
                                  "more than the 16777216 allowed")


def test_a_fleet_scraped_every_60s_writes_a_sample_a_minute(tmp_path):
    from llmdash.engines.catalog import load_engine

    path = tmp_path / "fleet.om"
    bench_cost.write_fleet(path, load_engine("vllm"), 1, 0.05, 3_600_000, scrape_s=60)   # 3 minutes
    lines = path.read_text().splitlines()
    assert lines[0] == "# TYPE vllm:generation_tokens counter"
    assert [line.rsplit(" ", 1)[1] for line in lines[1:6]] == ["3599820", "3599880", "3599940", "3600000",
                                                               "3599820"]   # the next series starts again


def test_two_loads_of_one_fleet_size_are_tabled_apart_each_beside_its_own_anchor():
    day = bench_cost.Fleet(200, 24 * 3600, 26.25, True, scrape_s=60, recorded=False)
    short = bench_cost.Fleet(200, 1800, 1.6, True)
    cost = bench_cost.Cost("ITL p99", 10, 1.0)

    def row(fleet, name, samples, secs):
        return bench_cost.Row(fleet.instances, fleet.range_s, name, "raw", samples, secs, cost, 1.0)

    rows = [row(short, bench_cost.ANCHOR_NAME, 100, 2.0), row(short, "vllm", 50, 1.0),
            row(day, bench_cost.ANCHOR_NAME, 1000, 10.0), row(day, "vllm", 300, 8.0)]
    text = bench_cost.table(rows, {}, (short, day))
    assert "| 200 | 0.5 h | vllm | raw | 50 | 0.50 | 1.00 | 0.50 |" in text
    assert "| 200 | 24 h | vllm | raw | 300 | 0.30 | 8.00 | 0.80 |" in text
    assert "24 h range over 26.25 h of data scraped every 60 s" in text


def test_fleet_picks_one_load_by_name_and_refuses_an_unknown_one(tmp_path):
    from click.testing import CliRunner
    from llmdash.cli.lab import bench_cost_command

    assert [f.name for f in bench_cost.FLEETS] == ["20x3h", "200x0.5h", "200x24h"]
    option = next(p for p in bench_cost_command.params if p.name == "fleet_names")
    assert "20x3h, 200x0.5h and 200x24h" in option.help                     # the help names every load
    anchor = tmp_path / "anchor.json"
    anchor.write_text("{}")
    result = CliRunner().invoke(bench_cost_command, ["--anchor", str(anchor), "--fleet", "200x12h",
                                                     "--out", str(tmp_path / "cost.md")])
    assert result.exit_code == 2
    assert "'200x12h' is not a load; choose from 20x3h, 200x0.5h, 200x24h" in result.output
    assert not (tmp_path / "cost.md").exists()


def test_the_page_lists_each_dashboards_slowest_queries_at_the_longest_range_beside_the_anchor():
    fleets = (bench_cost.Fleet(2, 900, 1.3, True), bench_cost.Fleet(2, 3600, 1.3, True, recorded=False))
    costs = tuple(bench_cost.Cost(f"q{k}", 10 * k, k / 10) for k in range(1, 11))
    rows = [bench_cost.Row(2, 3600, name, "raw", 550, 5.5, costs[-1], 1.0, costs)
            for name in (bench_cost.ANCHOR_NAME, "vllm")]
    rows.append(bench_cost.Row(2, 900, "vllm", "raw", 1, 0.1, costs[0], 1.0, costs[:1]))
    text = bench_cost.table(rows, {}, fleets)
    slowest = text.split("Slowest queries at 2 instances, 1 h (raw):")[1]
    assert slowest.count("| vllm |") == 8 and slowest.count(f"| {bench_cost.ANCHOR_NAME} |") == 8
    assert "| vllm | q10 | 1.00 | 18% | 100 |" in slowest and "| q2 |" not in slowest    # 1.0 of 5.5 s
    assert "samples/min" not in text                                            # no recorded load: no rule cost
