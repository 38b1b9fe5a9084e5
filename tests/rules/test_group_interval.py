"""The rule groups' evaluation interval belongs to the server unless the config sets one: a group `interval`
overrides Prometheus' `evaluation_interval`, so a team evaluating every 15 s would page up to a minute later.
The one exception is the second group, of what a minute's delay does not hurt (the chronic capacity warning, the
SLO ticket and the windows only it and the budget read): once a minute, never more often than the first."""

from __future__ import annotations

import dataclasses
import re

from llmdash.config import Config, Objective, Slo
from llmdash.engines.catalog import load_engine
from llmdash.rules.generate import build_rules
from llmdash.rules.targets import RULERS

SLO = Config(slo=Slo(objectives=(Objective(name="ttft", target_seconds=1.0, objective=0.99, engines=("vllm",)),)))
ITL_MODEL = "cluster_namespace_model_name:llm_itl_seconds_bucket:rate5m"
ITL_UNIT = "cluster_namespace_model_name_instance:llm_itl_seconds_bucket:rate5m"


def names(group: dict) -> list[str]:
    return [rule.get("record") or rule["alert"] for rule in group["rules"]]


def test_default_groups_leave_the_interval_to_the_server_but_the_slow_one(default_rules):
    groups = [group for model in default_rules.values() for group in model["groups"]]
    assert groups
    assert sorted(g["name"] for g in groups if "interval" in g) == [
        "llmdash-ray-serve-vllm-slow", "llmdash-sglang-slow", "llmdash-vllm-slow"]
    assert {g["interval"] for g in groups if "interval" in g} == {"1m"}


def test_a_configured_interval_is_pinned_on_every_group_the_slow_one_at_least_a_minute():
    config = Config()
    for interval, slow in (("30s", "1m"), ("2m", "2m")):
        pinned = dataclasses.replace(config, rules=dataclasses.replace(config.rules, interval=interval))
        groups = build_rules(load_engine("vllm"), pinned)["groups"]
        assert [(g["name"], g.get("interval")) for g in groups] == [("llmdash-vllm", interval),
                                                                    ("llmdash-vllm-slow", slow)]


def test_the_slow_group_holds_the_chronic_warning_and_the_slo_ticket_only():
    default = build_rules(load_engine("vllm"), Config())["groups"]
    assert [g["name"] for g in default] == ["llmdash-vllm", "llmdash-vllm-slow"]
    assert names(default[1]) == ["LLMServingPreemptionsChronic"]
    assert "LLMServingPreemptionsHigh" in names(default[0]) and "LLMServingPreemptionsChronic" not in names(default[0])
    with_slo = build_rules(load_engine("vllm"), SLO)["groups"]
    prefix = "cluster_namespace_model_name:"
    assert names(with_slo[1]) == [prefix + n for n in (
        "llm_slo_events:increase2h", "llm_slo_events:increase1d", "llm_slo_events:increase3d",
        "llm_slo_errors:increase2h", "llm_slo_errors:increase1d", "llm_slo_errors:increase3d",
        "llm_slo_errors:ratio_rate2h", "llm_slo_errors:ratio_rate1d", "llm_slo_errors:ratio_rate3d",
        "llm_slo_error_budget:consumed")] + ["LLMServingPreemptionsChronic", "LLMServingSLOBurnRateSlow"]
    # what the page reads stays in the first group: the per-step counts, the page's windows, the baselines
    first = names(with_slo[0])
    for kept in ("llm_slo_events:increase1m", "llm_slo_errors:ratio_rate6h", "llm_slo_errors:ratio_rate5m",
                 "llm_itl_seconds:p99_baseline", "llm_output_tokens:rate5m_baseline"):
        assert prefix + kept in first
    assert "LLMServingSLOBurnRateFast" in first
    assert [g.get("interval") for g in with_slo] == ["1m", "1m"]


def test_no_rule_reads_a_series_of_a_group_evaluated_less_often_or_later_in_its_own():
    """A rule reads what its group wrote earlier in the same evaluation, or another group's last value: only of a
    group evaluated at least as often (the first group reads nothing of the slow one)."""
    for engine in ("vllm", "sglang", "ray-serve-vllm", "tgi"):
        config = SLO if engine == "vllm" else Config()
        groups = build_rules(load_engine(engine), config)["groups"]
        written = {rule["record"]: (i, j) for i, g in enumerate(groups) for j, rule in enumerate(g["rules"])
                   if "record" in rule}
        for i, group in enumerate(groups):
            for j, rule in enumerate(group["rules"]):
                for name in set(re.findall(r"[a-z_]+:[a-z_0-9]+:[a-z_0-9]+", rule["expr"])) & set(written):
                    at = written[name]
                    assert at[0] < i or (at[0] == i and at[1] < j), (engine, rule.get("record") or rule["alert"],
                                                                     name)


def test_a_models_token_latency_buckets_sum_its_units_recorded_ones_and_read_no_raw_bucket():
    """Where an engine records each unit's token-latency buckets (the straggler warning's), the model's bucket
    rates read them, evaluated just before, and no raw `_bucket` series; on vmalert, whose recorded series come
    back an evaluation late, the raw buckets (a recording of a recording there lags an interval)."""
    checked = []
    for engine in ("dynamo", "lmdeploy", "nim", "ray-serve-vllm", "sglang", "tensorrt-llm-serve", "tgi", "vllm"):
        rules = build_rules(load_engine(engine), Config())["groups"][0]["rules"]
        records = [rule["record"] for rule in rules if "record" in rule]
        units = [r for r in records if r.startswith("cluster_namespace_model_name_instance:") and r.endswith(
            "_seconds_bucket:rate5m")]
        assert len(units) == 1, engine
        model = units[0].replace("_model_name_instance:", "_model_name:")
        expr = next(rule["expr"] for rule in rules if rule.get("record") == model)
        assert records.index(units[0]) < records.index(model), engine
        assert "_bucket" not in expr.replace(units[0], ""), engine
        assert expr.startswith("sum by (le, cluster, namespace, model_name, llm_engine) (" + units[0]), engine
        checked.append(engine)
    assert len(checked) == 8
    assert not RULERS["vmalert"].fresh_recordings
    vmalert = dataclasses.replace(Config(), rules=dataclasses.replace(Config().rules, target="vmalert"))
    rules = build_rules(load_engine("vllm"), vmalert)["groups"][0]["rules"]
    expr = next(rule["expr"] for rule in rules if rule.get("record") == ITL_MODEL)
    assert ITL_UNIT not in expr and "rate(vllm:inter_token_latency_seconds_bucket" in expr
