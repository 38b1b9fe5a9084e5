"""Rule files per ruler (`rules.target`): only what that ruler accepts, the same pages everywhere."""

from __future__ import annotations

import dataclasses

import pytest

from llmdash.config import Config, load_config
from llmdash.engines.catalog import load_engine
from llmdash.errors import LlmdashError
from llmdash.rules.generate import build_rules, recorded_series
from llmdash.rules.targets import RULERS, TARGETS, for_target
from llmdash.vocabulary import Alert


def rules_for(target: str, engine: str = "vllm", native: bool | None = None) -> dict[str, dict]:
    config = Config()
    config = dataclasses.replace(config, rules=dataclasses.replace(config.rules, target=target),
                                 histograms=dataclasses.replace(config.histograms, native=native))
    return {rule.get("alert") or rule["record"]: rule for g in build_rules(load_engine(engine), config)["groups"]
            for rule in g["rules"]}


def test_the_default_target_is_prometheus_and_keeps_keep_firing_for():
    assert Config().rules.target == "prometheus"
    page = rules_for("prometheus")[Alert.PREEMPTIONS_HIGH]
    assert page["keep_firing_for"] == Config().preemption.keep_firing_for


def held_condition(expr: str, hold: str, step: str) -> str:
    """The condition C of `(C) or last_over_time((C)[hold:step])`; fails when `expr` is not of that shape."""
    length = (len(expr) - len(f"() or last_over_time(()[{hold}:{step}])")) // 2
    condition = expr[1:1 + length]
    assert expr == f"({condition}) or last_over_time(({condition})[{hold}:{step}])", expr
    return condition


@pytest.mark.parametrize("target", ["vmalert", "thanos"])
def test_a_ruler_without_keep_firing_for_gets_the_hold_in_the_expression(target):
    # the same rules, read from classic histograms only where the ruler has no native-histogram functions
    plain, shaped = rules_for("prometheus", native=RULERS[target].native_histograms), rules_for(target)
    # the subquery steps at the group's interval: the server's evaluation interval in the first group (no step),
    # 1m in the second (every warning that holds)
    step = {Alert.PREEMPTIONS_HIGH: ""} | {warning: "1m" for warning in (
        Alert.DIVERGENCE, Alert.TTFT_HIGH, Alert.ITL_HIGH, Alert.INSTANCE_LATENCY_HIGH)}
    held = {name for name, rule in plain.items() if "keep_firing_for" in rule}
    assert held == set(step)
    for name in held:
        condition, hold = plain[name]["expr"], plain[name]["keep_firing_for"]
        assert "keep_firing_for" not in shaped[name]
        if not (target == "vmalert" and name == Alert.PREEMPTIONS_HIGH):   # vmalert's page reads raw series
            assert held_condition(shaped[name]["expr"], hold, step[name]) == condition
    # vmalert sees recorded series an evaluation late, so its model's ITL buckets and a unit's short share are read
    # from the raw series rather than from the per-unit recordings (tests/rules/test_group_interval.py pins both)
    raw_there = {"cluster_namespace_model_name:llm_itl_seconds_bucket:rate5m",
                 "cluster_namespace_model_name_instance:llm_preemption_share:ratio_rate2m"}
    raw_there = raw_there if target == "vmalert" else set()
    assert {k: r for k, r in shaped.items() if k not in held | raw_there} == {
        k: r for k, r in plain.items() if k not in held | raw_there}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_on_vmalert_the_page_reads_raw_series_so_it_waits_for_the_store_once(engine):
    """vmalert writes recorded series back asynchronously and VictoriaMetrics shows them a query later: a page
    reading them lags a Prometheus page by an evaluation more (docs/benchmarks/bench-detect.md). Its condition
    reads the recording rules' own raw-series expressions instead; on Prometheus it keeps reading the
    recorded series, written in the same evaluation."""
    config = dataclasses.replace(Config(), rules=dataclasses.replace(Config().rules, target="vmalert"))
    recorded = recorded_series(load_engine(engine), config)
    vm_page, prom_page = rules_for("vmalert", engine)[Alert.PREEMPTIONS_HIGH], rules_for("prometheus", engine)[
        Alert.PREEMPTIONS_HIGH]
    condition = held_condition(vm_page["expr"], prom_page["keep_firing_for"], Config().rules.interval or "")
    assert [name for name in recorded if name in condition] == []
    assert "[2m]" in condition and "[3m]" in condition       # the page's own windows, over raw counters
    assert [name for name in recorded if name in prom_page["expr"]] != []


def test_mimir_keeps_the_prometheus_file():
    assert rules_for("mimir") == rules_for("prometheus")


def test_an_unknown_ruler_is_a_one_line_config_error(tmp_path):
    path = tmp_path / "llmdash.yaml"
    path.write_text("rules:\n  target: cortex\n")
    with pytest.raises(LlmdashError, match=r"rules.target: unknown ruler 'cortex' \(known: " + ", ".join(TARGETS)):
        load_config(path)
    with pytest.raises(LlmdashError, match="unknown ruler"):
        for_target({"groups": []}, "cortex")
