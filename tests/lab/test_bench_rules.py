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
                                             bench_rules.GroupCost(20, "slow", 60, 0.6, 8_000, 20, 4)], 0.3, 15),
             bench_rules.SizeCost(200, 17800, [bench_rules.GroupCost(200, "page", 15, 1.5, 400_000, 3000, 4),
                                               bench_rules.GroupCost(200, "slow", 60, 6.0, 80_000, 200, 4)], 3.0, 15,
                                     2.5, 1)]
    text = bench_rules.table("vllm", sizes)
    assert "| 20 | page | 15 s | 0.150 | 1.0% | 40,000 | 300 | 15.0 |" in text
    assert "| 20 | slow | 60 s | 0.600 | 1.0% | 8,000 | 20 | 1.0 |" in text
    # per 15 s: 0.15 + 0.6 / 4 = 0.3 s, 2 % of the interval; series 320 / 20 replicas
    assert "| 20 | **all** (1,780 series scraped) | 15 s | 0.300 | 2.0% | 48,000 | 320 | 16.0 |" in text
    assert "| 200 | 3.000 s | 20.0% | 2.5 s (exit 1) |" in text
    assert "evaluation time b = 1.00" in text and "series added b = 1.00" in text


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
