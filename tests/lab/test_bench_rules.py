"""The rule-cost benchmark's arithmetic and its fleet: the growth fit, the page's rows, the series it scrapes."""

from __future__ import annotations

import math

import pytest

from llmdash.lab import bench_rules


def test_the_growth_exponent_is_the_slope_on_logarithms():
    assert bench_rules.growth_exponent([(20, 1.0), (200, 10.0), (1000, 50.0)]) == pytest.approx(1.0)
    assert bench_rules.growth_exponent([(10, 3.0), (100, 300.0)]) == pytest.approx(2.0)
    assert bench_rules.growth_exponent([(10, 5.0), (1000, 5.0)]) == pytest.approx(0.0)
    assert math.isnan(bench_rules.growth_exponent([(10, 5.0)]))
    assert math.isnan(bench_rules.growth_exponent([(10, 0.0), (100, 4.0)]))    # a zero has no logarithm


def test_the_table_gives_each_group_its_share_and_the_totals():
    sizes = [bench_rules.SizeCost(20, 1780, [bench_rules.GroupCost(20, "page", 15, 0.15, 40_000, 300, 4),
                                             bench_rules.GroupCost(20, "slow", 60, 0.6, 8_000, 20, 4)], 0.3, 15,
                                     0.25),
             bench_rules.SizeCost(200, 17800, [bench_rules.GroupCost(200, "page", 15, 1.5, 400_000, 3000, 4),
                                               bench_rules.GroupCost(200, "slow", 60, 6.0, 80_000, 200, 4)], 3.0, 15,
                                     1.5, 2.5, 1)]
    text = bench_rules.table("vllm", sizes)
    assert "| 20 | page | 15 s | 0.150 | 1.0% | 40,000 | 300 | 15.0 |" in text
    assert "| 20 | slow | 60 s | 0.600 | 1.0% | 8,000 | 20 | 1.0 |" in text
    # per 15 s: 0.15 + 0.6 / 4 = 0.3 s, 2 % of the interval; 40,000 + 8,000 / 4 samples; series 320 / 20 replicas
    assert "| 20 | **all** (1,780 series scraped) | 15 s | 0.300 | 2.0% | 42,000 | 320 | 16.0 |" in text
    assert "| 200 | 3.000 s | 20.0% | 1.500 s | 10.0% | 2.5 s (exit 1) |" in text
    assert "evaluation time b = 1.00" in text and "series added b = 1.00" in text


def test_cpu_per_evaluation_counts_every_group_on_schedule():
    # 6 s of CPU over a window in which the 15 s group ran 4 evaluations of 1 s each and the 1m group one of 2 s:
    # 4 s of 6 to the first (1 s per evaluation), 2 s to the second; per 15 s on schedule, 1 + 2 / 4 = 1.5 s
    assert bench_rules.scheduled_cpu(6.0, {"page": [1.0] * 4, "slow": [2.0]}, {"page": 15, "slow": 60},
                                     15) == pytest.approx(1.5)
    # a group slower than its interval ran 2 evaluations of 20 s in a 60 s window: 4 s of CPU is 2 s each, per 15 s
    assert bench_rules.scheduled_cpu(4.0, {"page": [20.0, 20.0]}, {"page": 15}, 15) == pytest.approx(2.0)


def test_only_recorded_series_read_over_a_range_and_computed_from_raw_ones_are_backfilled():
    model = {"groups": [{"name": "a", "rules": [
        {"record": "x:rate2m", "expr": "sum(rate(raw_total[2m]))"},
        {"record": "x:rate2m_p", "expr": "x:rate2m * 2"},
        {"record": "y:rate2m", "expr": "sum(rate(other_total[2m]))"}]},
        {"name": "b", "interval": "1m", "rules": [
            {"alert": "A", "expr": "avg_over_time(x:rate2m{e=\"v\"}[30m]) + avg_over_time(x:rate2m_p[30m]) > 1"}]}]}
    assert [r["record"] for r in bench_rules.ranged_recordings(model)] == ["x:rate2m"]


def test_the_fleet_is_each_replica_under_its_own_target_labels():
    series = bench_rules.fleet("vllm", 4)
    per_replica = len(series) // 4
    assert per_replica > 80                                              # the simulator's page of one replica
    pods = {s.head.split('pod="')[1].split('"')[0] for s in series}
    assert len(pods) == 4
    one = next(s for s in series if s.head.startswith("vllm:generation_tokens_total{"))
    for label in ("job", "namespace", "pod", "container", "service", "endpoint", "instance", "cluster",
                  "model_name", "engine"):
        assert f'{label}="' in one.head
    assert one.counter and one.at(60) - one.at(0) == pytest.approx(one.value * 60)
    gauge = next(s for s in series if s.head.startswith("vllm:num_requests_running{"))
    assert not gauge.counter and gauge.at(60) == gauge.at(0)
