"""Fleet scenarios, checked on the simulator's own output (no Prometheus, no dashboards)."""

from __future__ import annotations

import io
import re

import pytest
from packaging.version import Version

from llmdash.engines.catalog import load_engine
from llmdash.lab.emitters import EMITTERS
from llmdash.lab.eras import NEW, OLD, era_names, version_names
from llmdash.lab.exposition import Registry, live_text
from llmdash.lab.scenarios import PRIMARY, Traffic, build, first_preemption, instances, write_openmetrics
from llmdash.lab.simulator import EngineState

SAMPLE = re.compile(r'^(?P<name>[^{\s]+)\{(?P<labels>.*)\} (?P<value>\S+) (?P<ts>\S+)$')
LABEL = re.compile(r'(\w+)="([^"]*)"')
PREEMPTION_SERIES = {"vllm": "vllm:num_preemptions_total", "sglang": "sglang:num_retracted_requests_total"}


def samples(scenario, engines, seed=1, traffic=None):
    """[(t, name, labels, value)] of the scenario's OpenMetrics output, t in scenario seconds."""
    specs = {engine: load_engine(engine) for engine in engines}
    out = io.StringIO()
    write_openmetrics(build(scenario, traffic) if traffic else build(scenario), specs, seed, 0, out)
    rows = []
    for line in out.getvalue().splitlines():
        match = SAMPLE.match(line)
        if match:
            rows.append((float(match["ts"]), match["name"], dict(LABEL.findall(match["labels"])),
                         float(match["value"])))
    return rows


def per_instance(rows, name, at_or_before=float("inf"), **match):
    """instance -> the latest value of the series `name` (summed over its other labels) up to a time."""
    latest: dict[tuple, tuple[float, float]] = {}
    for t, n, labels, value in rows:
        if n == name and t <= at_or_before and all(labels.get(k) == v for k, v in match.items()):
            latest[tuple(sorted(labels.items()))] = (t, value)
    out: dict[str, float] = {}
    for key, (_, value) in latest.items():
        instance = dict(key)["instance"]
        out[instance] = out.get(instance, 0.0) + value
    return out


def quantile_between(rows, name, instance, start, end, q=0.99):
    """q-quantile (upper bucket bound) of a histogram's observations between two scrape times."""
    def buckets(at):
        got = {}
        for t, n, labels, value in rows:
            if n == f"{name}_bucket" and labels["instance"] == instance and t <= at:
                got[labels["le"]] = value
        return got
    before, after = buckets(start), buckets(end)
    bounds = sorted((float(le), after[le] - before.get(le, 0.0)) for le in after)
    total = bounds[-1][1]
    assert total > 0, f"no {name} observations on {instance}"
    return next(bound for bound, count in bounds if count >= q * total)


FLEET = Traffic(steady_min=4, after_min=6, ramp_min=2)


def test_one_bad_replica_only_its_preemption_counter_rises():
    traffic = Traffic(steady_min=3, after_min=4, replicas=10)
    scenario = build("one-bad-replica", traffic)
    rows = samples("one-bad-replica", ["vllm", "sglang"], traffic=traffic)
    bad = scenario.affected_replica().instance("vllm", PRIMARY)
    final = per_instance(rows, "vllm:num_preemptions_total")
    assert len(final) == 10
    assert final.pop(bad) > 50                              # thrashing: dozens of preemptions in 4 minutes
    assert set(final.values()) == {0.0}                     # the other 9 never preempt
    before = per_instance(rows, "vllm:num_preemptions_total", scenario.onset_s)
    assert set(before.values()) == {0.0}
    retracted = per_instance(rows, "sglang:num_retracted_requests_total", tp_rank="0")
    assert retracted.pop(scenario.affected_replica().instance("sglang", PRIMARY)) > 0
    assert set(retracted.values()) == {0.0}
    # every replica serves the model with its own instance label, in one cluster and namespace
    labels = [lab for _, n, lab, _ in rows if n == "vllm:num_requests_running"]
    assert {(lab["cluster"], lab["namespace"]) for lab in labels} == {("prod-1", "llm")}
    # the ground-truth onset is the bad replica's first preemption, right after its budget shrinks
    onset = first_preemption(scenario, {"vllm": load_engine("vllm")}, 1)["vllm"]
    assert scenario.onset_s <= onset < scenario.onset_s + 60


def test_one_bad_replica_default_is_20_replicas_with_a_short_baseline():
    scenario = build("one-bad-replica")
    assert len(scenario.models[0].replicas) == 20
    assert scenario.onset_s == 20 * 60 and scenario.duration_s == 40 * 60


def test_rolling_upgrade_old_replicas_export_old_names_only():
    traffic = FLEET
    scenario = build("rolling-upgrade", traffic)
    engines = ["vllm", "sglang", "tensorrt-llm-serve", "ray-serve-vllm", "nim"]   # variants: their older renames
    rows = samples("rolling-upgrade", engines, traffic=traffic)
    for engine in engines:
        spec = load_engine(engine)
        renamed = era_names(spec, OLD)
        old_names = {old for old in renamed.values() if old}
        newer = set(renamed)
        for replica in scenario.models[0].replicas:
            names = {n.rsplit("_bucket", 1)[0].rsplit("_count", 1)[0].rsplit("_sum", 1)[0]
                     for _, n, lab, _ in rows if lab.get("instance") == replica.instance(engine, PRIMARY)}
            assert names, f"{engine}: nothing from {replica.name}"
            if replica.era == OLD:
                assert not names & newer and old_names <= names, (engine, sorted(names))
            else:
                assert not names & old_names, (engine, sorted(names))
                # a variant's new replicas export its newest names, not the renames in between
                assert names & newer if spec.base else newer <= names, (engine, sorted(names))
    assert [r.era for r in scenario.models[0].replicas] == [OLD, NEW]


def test_rolling_upgrade_old_replica_stalls_new_one_stays_healthy():
    traffic = Traffic(steady_min=4, after_min=8, ramp_min=2)
    scenario = build("rolling-upgrade", traffic)
    rows = samples("rolling-upgrade", ["vllm"], traffic=traffic)
    old, new = (r.instance("vllm", PRIMARY) for r in scenario.models[0].replicas)
    start, end = scenario.onset_s + 120, scenario.duration_s
    # the old replica's ITL lives under the old name only, the new one's under the new name
    assert 0.5 <= quantile_between(rows, "vllm:time_per_output_token_seconds", old, start, end) <= 2.5
    assert quantile_between(rows, "vllm:inter_token_latency_seconds", new, start, end) <= 0.1
    kv_old = [v for t, n, lab, v in rows if n == "vllm:gpu_cache_usage_perc" and lab["instance"] == old and t >= start]
    kv_new = [v for t, n, lab, v in rows if n == "vllm:kv_cache_usage_perc" and lab["instance"] == new and t >= start]
    assert sum(kv_old) / len(kv_old) > 0.95 and max(kv_new) < 0.5


def test_two_clusters_label_replicas_and_collapse_in_one_cluster_only():
    traffic = Traffic(steady_min=4, after_min=12, ramp_min=2)
    rows = samples("two-clusters", ["vllm"], traffic=traffic)
    final = per_instance(rows, "vllm:num_preemptions_total")
    clusters = {lab["instance"]: (lab["cluster"], lab["namespace"]) for _, n, lab, _ in rows
                if n == "vllm:num_preemptions_total"}
    assert sorted(set(clusters.values())) == [("eu-1", "llm"), ("us-1", "llm")]
    assert len(clusters) == 4
    for instance, (cluster, _) in clusters.items():
        assert (final[instance] > 0) == (cluster == "eu-1"), (instance, final[instance])
    # the same model name in both clusters
    assert {lab["model_name"] for _, n, lab, _ in rows if n == "vllm:num_preemptions_total"} == {PRIMARY}


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_prompt_growth_never_preempts(seed):
    """The default growth and post-onset length, both preemption flavours: the KV budget holds 1300-token
    prompts (the steady part before the onset, 400-token prompts, is shortened)."""
    scenario = build("prompt-growth", Traffic(steady_min=3))
    onsets = first_preemption(scenario, {e: load_engine(e) for e in ("vllm", "sglang")}, seed)
    assert onsets == {"vllm": None, "sglang": None}


def test_prompt_growth_raises_latency_without_preemption():
    traffic = Traffic(steady_min=6, after_min=10, ramp_min=2)
    scenario = build("prompt-growth", traffic)
    rows = samples("prompt-growth", ["vllm"], traffic=traffic)
    instance = scenario.affected_replica().instance("vllm", PRIMARY)
    assert per_instance(rows, "vllm:num_preemptions_total") == {instance: 0.0}
    before = quantile_between(rows, "vllm:inter_token_latency_seconds", instance, 60, scenario.onset_s)
    after = quantile_between(rows, "vllm:inter_token_latency_seconds", instance, scenario.onset_s + 180,
                             scenario.duration_s)
    assert after > before


def test_long_collapse_preempts_until_its_end():
    scenario = build("long-collapse")
    first = first_preemption(scenario, {"vllm": load_engine("vllm")}, 1)["vllm"]
    assert scenario.duration_s - first >= 75 * 60
    rows = samples("long-collapse", ["vllm"], traffic=None)
    counter = [(t, v) for t, n, lab, v in rows if n == "vllm:num_preemptions_total"]
    last_10_min = [v for t, v in counter if t >= scenario.duration_s - 600]
    assert last_10_min[-1] - last_10_min[0] > 100        # still thrashing in its last ten minutes
    assert all(b >= a for (_, a), (_, b) in zip(counter, counter[1:]))


def test_seeds_give_different_valid_collapses():
    traffic = Traffic(steady_min=4, after_min=8, ramp_min=2)
    texts, onsets = set(), []
    for seed in (1, 2, 3):
        rows = samples("kv-collapse", ["vllm"], seed, traffic)
        texts.add(repr(rows))
        counter = [(t, v) for t, n, lab, v in rows
                   if n == "vllm:num_preemptions_total" and lab["model_name"] == PRIMARY]
        scenario = build("kv-collapse", traffic)
        assert all(v == 0 for t, v in counter if t <= scenario.onset_s)
        assert counter[-1][1] > 0
        assert all(b >= a for (_, a), (_, b) in zip(counter, counter[1:]))
        onsets.append(first_preemption(scenario, {"vllm": load_engine("vllm")}, seed)["vllm"])
    assert len(texts) == 3
    assert all(o is not None and o > build("kv-collapse", traffic).onset_s for o in onsets)


def test_classic_scenarios_keep_one_instance_without_cluster_labels():
    rows = samples("steady", ["vllm"], traffic=Traffic(steady_min=1, after_min=0.5))
    targets = {(lab["job"], lab["instance"], "cluster" in lab, "namespace" in lab) for _, _, lab, _ in rows}
    assert targets == {("llmdash-sim", f"vllm-{m}:8000", False, False)
                       for m in (PRIMARY, "qwen2.5-7b-instruct")}


def test_era_names_follow_the_catalog_sources():
    vllm = load_engine("vllm")
    assert era_names(vllm, NEW) == {}
    assert era_names(vllm, OLD) == {"vllm:inter_token_latency_seconds": "vllm:time_per_output_token_seconds",
                                    "vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc"}
    # SGLang's realtime and request counters have another type or labels than their fallbacks: not exported
    assert era_names(load_engine("sglang"), OLD) == {"sglang:realtime_tokens_total": None,
                                                     "sglang:num_requests_total": None}
    with pytest.raises(ValueError, match="unknown metric-name era"):
        era_names(vllm, "ancient")


def test_a_release_era_exports_what_the_catalog_gives_that_release():
    vllm, sglang = load_engine("vllm"), load_engine("sglang")
    assert version_names(vllm, Version("0.7.3")) == {
        "vllm:inter_token_latency_seconds": "vllm:time_per_output_token_seconds",
        "vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc",
        "vllm:request_time_per_output_token_seconds": None, "vllm:request_num_preemptions": None}
    assert version_names(vllm, Version("0.33.0")) == {"vllm:time_per_output_token_seconds": None,
                                                      "vllm:gpu_cache_usage_perc": None}
    emitter = EMITTERS["sglang"](sglang, "m1", lambda: EngineState(running=3, waiting=2, kv_used_blocks=10,
                                                                     kv_blocks=100), "0.4.3")
    emitter.scrape(0.0)
    lines = [line for line in emitter.render() if not line.startswith("#")]
    assert "sglang:num_queue_reqs{model_name=\"m1\"} 2" in lines      # no engine_type, no tp_rank
    assert not any(line.startswith(("sglang:num_retracted", "sglang:realtime", "sglang:inter_token"))
                   for line in lines)
    ttft = sorted({line.split('le="')[1].split('"')[0] for line in lines
                   if "time_to_first_token_seconds_bucket" in line})
    assert "160.0" in ttft and "1.0" in ttft and "400.0" not in ttft   # 0.4.2-0.4.3 bounds
    with pytest.raises(ValueError, match="unknown metric-name era"):
        Registry(vllm, {}, "ancient")


def test_live_endpoint_of_a_fleet_tells_replicas_apart():
    spec = load_engine("vllm")
    scenario = build("two-clusters", FLEET)
    insts = instances(scenario, {"vllm": spec}, 1)
    text = live_text([i.emitters["vllm"] for i in insts],
                     [i.replica.target_labels("vllm", PRIMARY, live=True) for i in insts])
    running = [line for line in text.splitlines() if line.startswith("vllm:num_requests_running{")]
    assert len(running) == 4 and len(set(running)) == 4
    assert all('cluster="' in line and 'instance="' in line and 'job="' not in line for line in running)
