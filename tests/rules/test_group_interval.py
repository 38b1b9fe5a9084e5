"""The rule groups' evaluation interval belongs to the server unless the config sets one: a group `interval`
overrides Prometheus' `evaluation_interval`, so a team evaluating every 15 s would page up to a minute later.
The one exception is the second group, of everything that is not a page nor read by one (the warnings, the SLO
ticket, the latency bucket rates and quantiles only they and the dashboards read): once a minute, never more
often than the first."""

from __future__ import annotations

import dataclasses
import re

from llmdash.config import Config, Objective, Slo
from llmdash.engines.catalog import load_engine
from llmdash.rules.generate import build_rules
from llmdash.rules.targets import RULERS

SLO = Config(slo=Slo(objectives=(Objective(name="ttft", target_seconds=1.0, objective=0.99, engines=("vllm",)),)))
MODEL, UNIT = "cluster_namespace_model_name:", "cluster_namespace_model_name_instance:"
ITL_MODEL, ITL_UNIT = MODEL + "llm_itl_seconds_bucket:rate5m", UNIT + "llm_itl_seconds_bucket:rate5m"


def names(group: dict) -> list[str]:
    return [rule.get("record") or rule["alert"] for rule in group["rules"]]


def test_default_groups_leave_the_interval_to_the_server_but_the_slow_one(default_rules):
    groups = [group for model in default_rules.values() for group in model["groups"]]
    assert len(default_rules) == 10 and len(groups) == 20
    assert sorted(g["name"] for g in groups if "interval" in g) == [
        "llmdash-dynamo-slow", "llmdash-llama-cpp-slow", "llmdash-lmdeploy-slow", "llmdash-nim-slow",
        "llmdash-ray-serve-vllm-slow", "llmdash-sglang-slow", "llmdash-tensorrt-llm-serve-slow",
        "llmdash-tensorrt-llm-triton-slow", "llmdash-tgi-slow", "llmdash-vllm-slow"]
    assert {g["interval"] for g in groups if "interval" in g} == {"1m"}


def test_a_configured_interval_is_pinned_on_every_group_the_slow_one_at_least_a_minute():
    config = Config()
    for interval, slow in (("30s", "1m"), ("2m", "2m")):
        pinned = dataclasses.replace(config, rules=dataclasses.replace(config.rules, interval=interval))
        groups = build_rules(load_engine("vllm"), pinned)["groups"]
        assert [(g["name"], g.get("interval")) for g in groups] == [("llmdash-vllm", interval),
                                                                    ("llmdash-vllm-slow", slow)]


WARNINGS = ["LLMServingPreemptionsChronic", "LLMServingLatencyThroughputDivergence", "LLMServingTTFTP99High",
            "LLMServingITLP99High", "LLMServingInstanceLatencyHigh"] + ["LLMServingSignalMissing"] * 4


def test_the_first_group_holds_the_pages_and_their_inputs_only():
    """vLLM's page reads each unit's preemption share over the short and the long window and its preemption rate;
    the short share divides the unit's recorded rates. Everything else (every latency bucket rate and quantile, the
    gauges, the baselines, every warning) waits a minute."""
    default = build_rules(load_engine("vllm"), Config())["groups"]
    assert [g["name"] for g in default] == ["llmdash-vllm", "llmdash-vllm-slow"]
    assert names(default[0]) == [UNIT + n for n in (
        "llm_preemptions:rate2m", "llm_requests:rate2m", "llm_preemption_share:ratio_rate2m",
        "llm_preemption_share:ratio_rate3m")] + ["LLMServingPreemptionsHigh"]
    exprs = {rule.get("record"): rule["expr"] for rule in default[0]["rules"]}
    preempted, finished = (f'{UNIT}llm_{n}:rate2m{{llm_engine="vllm"}}' for n in ("preemptions", "requests"))
    # at least 20 finished requests over 2m (0.166667/s) as the divisor, `or` zero where none are counted
    assert exprs[UNIT + "llm_preemption_share:ratio_rate2m"] == (
        f"({preempted}) / clamp_min(({finished}) or ({preempted}) * 0, 0.166667)")
    long = exprs[UNIT + "llm_preemption_share:ratio_rate3m"]
    assert "rate(vllm:num_preemptions_total[3m])" in long and "rate(vllm:request_success_total[3m])" in long
    assert ":rate2m" not in long
    slow = names(default[1])
    assert [n for n in slow if not n.startswith("cluster_")] == WARNINGS
    for moved in (ITL_UNIT, ITL_MODEL, MODEL + "llm_ttft_seconds_bucket:rate5m",
                  MODEL + "llm_tpot_seconds_bucket:rate5m", MODEL + "llm_ttft_seconds:p99_rate5m",
                  MODEL + "llm_itl_seconds:p99_baseline", MODEL + "llm_output_tokens:rate5m_baseline",
                  MODEL + "llm_kv_usage:max", MODEL + "llm_waiting_requests:sum", MODEL + "llm_running_requests:sum",
                  MODEL + "llm_preemptions_per_request:ratio_rate5m",
                  MODEL + "llm_latency_throughput_divergence:ratio_rate5m"):
        assert moved in slow, moved
    logs = dataclasses.replace(Config(), logs=dataclasses.replace(Config().logs, enabled=True))
    assert names(build_rules(load_engine("vllm"), logs)["groups"][0])[-2:] == [
        "LLMServingPreemptionsHigh", "LLMServingLogPreemptionsHigh"]


def test_with_slo_objectives_the_fast_burn_page_and_its_windows_stay_in_the_first_group():
    with_slo = build_rules(load_engine("vllm"), SLO)["groups"]
    first, slow = names(with_slo[0]), names(with_slo[1])
    assert first[4:] == [MODEL + n for n in (
        "llm_slo_events:increase1m", "llm_slo_events:increase5m", "llm_slo_events:increase30m",
        "llm_slo_events:increase1h", "llm_slo_events:increase6h", "llm_slo_errors:increase1m",
        "llm_slo_errors:increase5m", "llm_slo_errors:increase30m", "llm_slo_errors:increase1h",
        "llm_slo_errors:increase6h", "llm_slo_errors:ratio_rate5m", "llm_slo_errors:ratio_rate30m",
        "llm_slo_errors:ratio_rate1h", "llm_slo_errors:ratio_rate6h")] + [
        "LLMServingPreemptionsHigh", "LLMServingSLOBurnRateFast"]
    assert [n for n in slow if ":llm_slo" in n] == [MODEL + n for n in (
        "llm_slo_events:increase2h", "llm_slo_events:increase1d", "llm_slo_events:increase3d",
        "llm_slo_errors:increase2h", "llm_slo_errors:increase1d", "llm_slo_errors:increase3d",
        "llm_slo_errors:ratio_rate2h", "llm_slo_errors:ratio_rate1d", "llm_slo_errors:ratio_rate3d",
        "llm_slo_error_budget:consumed", "llm_slo_coverage:ratio")]
    assert [n for n in slow if not n.startswith("cluster_")] == WARNINGS[:5] + [
        "LLMServingSLOBurnRateSlow", "LLMServingSLOCoverageLow"] + WARNINGS[5:]
    assert [g.get("interval") for g in with_slo] == ["1m", "1m"]


def test_where_the_divergence_pages_its_latency_and_throughput_and_their_baselines_stay_in_the_first_group():
    """TGI counts no preemptions: the divergence of its per-request TPOT p99 from throughput is its page, so the
    p99 (summed from each unit's buckets), throughput and both baselines are evaluated at the server's interval."""
    first = names(build_rules(load_engine("tgi"), Config())["groups"][0])
    assert first == [MODEL + "llm_output_tokens:rate5m", MODEL + "llm_output_tokens:rate5m_baseline",
                     UNIT + "llm_tpot_seconds_bucket:rate5m", MODEL + "llm_tpot_seconds_bucket:rate5m",
                     MODEL + "llm_tpot_seconds:p99_rate5m", MODEL + "llm_tpot_seconds:p99_baseline",
                     "LLMServingLatencyThroughputDivergence"]


def test_no_rule_reads_a_series_of_a_group_evaluated_less_often_or_later_in_its_own():
    """A rule reads what its group wrote earlier in the same evaluation, or another group's last value: only of a
    group evaluated at least as often (the first group reads nothing of the slow one)."""
    for engine in ("vllm", "sglang", "ray-serve-vllm", "tgi", "llama-cpp", "tensorrt-llm-serve"):
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
        rules = [rule for group in build_rules(load_engine(engine), Config())["groups"] for rule in group["rules"]]
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
    rules = [rule for group in build_rules(load_engine("vllm"), vmalert)["groups"] for rule in group["rules"]]
    expr = next(rule["expr"] for rule in rules if rule.get("record") == ITL_MODEL)
    assert ITL_UNIT not in expr and "rate(vllm:inter_token_latency_seconds_bucket" in expr
    share = next(rule["expr"] for rule in rules
                 if rule.get("record") == UNIT + "llm_preemption_share:ratio_rate2m")
    assert "rate(vllm:num_preemptions_total[2m])" in share and UNIT + "llm_preemptions:rate2m" not in share
