"""The pages and warnings of issue 19 under `promtool test rules`, on fleets shaped by hand from the engines'
code (which ranks export what, how counters move) and scraped every 15 s at a phase of their own per
instance, off the rule evaluation's beat (tests/support/scrapes.py), never from the simulator: data-parallel ranks,
pipeline copies,
stalls where nothing completes, a rolling upgrade between bucket layouts, a chronic low rate, isolated
bursts at every scrape phase, a straggler and a scrape gap."""

import dataclasses

import pytest
import yaml

from llmdash.config import Config
from llmdash.engines.catalog import load_all
from llmdash.panels.recorded import Key, recording_layer
from llmdash.rules.generate import build_rules, render_rules
from llmdash.vocabulary import HEADLINE_QUANTILE, Alert, Role
from tests.support import scrapes as s
from tests.support.builds import default_rules
from tests.support.promtool import firing_alerts as alerts
from tests.support.promtool import run_rule_tests

SPECS = load_all()
ONSET_S = 20 * 60


def run(promtool, tmp_path, engine: str, series: list[s.Series], checks: list[dict]) -> None:
    rules = tmp_path / f"{engine}.rules.yaml"
    rules.write_text(render_rules(default_rules()[engine]))
    run_rule_tests(promtool, tmp_path, rules, [x.render() for x in series], checks, timeout=240,
                   interval=f"{s.RESOLUTION_S}s")


def never(name: str, minutes: float, **matchers) -> dict:
    extra = "".join(f', {k}="{v}"' for k, v in matchers.items())
    return {"expr": f'count_over_time(ALERTS{{alertname="{name}", alertstate="firing"{extra}}}[{minutes:g}m])',
            "eval_time": f"{minutes:g}m", "exp_samples": []}


def page(llm_engine: str, instance: str, **rank) -> dict:
    return {"llm_engine": llm_engine, "model_name": "m1", "instance": instance, "severity": "critical", **rank}


# ---- ranks -------------------------------------------------------------------------------------

def test_sglang_dp_attention_one_group_of_eight_retracting_pages_and_names_its_dp_rank(promtool, tmp_path):
    """--tp 8 --dp 8 --enable-dp-attention: each DP group is one scheduler writing its global tp_rank (= its
    dp_rank here, one attention-TP rank per group), its dp_rank and moe_ep_rank; the tokenizer counts the
    server's finished requests (8/s, one per group). Group 5 retracts 15 % of its requests from minute 20.
    Reading tp_rank 0 only (the old filter) sees group 0 and never pages."""
    minutes, labels = 40, {"model_name": "m1", "engine_type": "unified", "instance": "sg-0"}
    series = [s.counter("sglang:num_requests_total", {**labels, "is_streaming": "true"}, minutes, s.steady(8.0),
                        phase=7)]
    for dp in range(8):
        rank = {"tp_rank": str(dp), "dp_rank": str(dp), "pp_rank": "0", "moe_ep_rank": str(dp)}
        retracted = s.steady(0.15, start=ONSET_S) if dp == 5 else s.steady(0.001)
        series.append(s.counter("sglang:num_retracted_requests_total", {**labels, **rank}, minutes, retracted, phase=7))
    onset = ONSET_S / 60
    run(promtool, tmp_path, "sglang", series, [
        alerts(Alert.PREEMPTIONS_HIGH, onset - 1, []),
        alerts(Alert.PREEMPTIONS_HIGH, onset + 4, [page("sglang", "sg-0", dp_rank="5")])])


def test_vllm_four_dp_ranks_one_at_three_times_the_threshold_pages_and_names_its_engine(promtool, tmp_path):
    """--data-parallel-size 4: four engine cores, each labelled `engine` with its index and counting its own
    finished requests. Rank 2 preempts 9 % of its requests (3x the 3 % page); the instance's share is 2.25 %."""
    minutes = 40
    series = []
    for rank in range(4):
        labels = {"model_name": "m1", "engine": str(rank), "instance": "v-0"}
        series.append(s.counter("vllm:request_success_total", {**labels, "finished_reason": "stop"}, minutes,
                                s.steady(1.0), phase=11))
        preempted = s.steady(0.09, start=ONSET_S) if rank == 2 else s.steady(0.0)
        series.append(s.counter("vllm:num_preemptions_total", labels, minutes, preempted, phase=11))
    onset = ONSET_S / 60
    run(promtool, tmp_path, "vllm", series, [
        alerts(Alert.PREEMPTIONS_HIGH, onset - 1, []),
        alerts(Alert.PREEMPTIONS_HIGH, onset + 4, [page("vllm", "v-0", engine="2")])])


def test_sglang_pipeline_copies_below_the_threshold_do_not_page(promtool, tmp_path):
    """--tp 2 --pp 2: every TP rank of every stage increments the retraction counter, four copies of one count.
    2 % of requests retracted (2.4 per 2 minutes) is below the 3 % and 4-event page; summed copies read 8 %."""
    minutes, labels = 40, {"model_name": "m1", "engine_type": "unified", "instance": "sg-0"}
    series = [s.counter("sglang:num_requests_total", {**labels, "is_streaming": "false"}, minutes, s.steady(1.0),
                        phase=3)]
    for tp in range(2):
        for pp in range(2):
            rank = {"tp_rank": str(tp), "pp_rank": str(pp), "moe_ep_rank": "0"}
            series.append(s.counter("sglang:num_retracted_requests_total", {**labels, **rank}, minutes,
                                    s.steady(0.02, start=ONSET_S), phase=3))
    run(promtool, tmp_path, "sglang", series, [never(Alert.PREEMPTIONS_HIGH, minutes)])


# ---- nothing completes ---------------------------------------------------------------------------

def test_preempting_while_nothing_completes_pages_and_stays_paged_until_preemptions_stop(promtool, tmp_path):
    """Long generations evicted over and over: from minute 20 no request finishes while 0.2 preemptions/s go on
    for 30 minutes. A share that divides by finished requests only vanishes there (and resolved the page)."""
    minutes, labels = 70, {"model_name": "m1", "engine": "0", "instance": "v-0"}
    stop = ONSET_S + 30 * 60
    series = [s.counter("vllm:request_success_total", {**labels, "finished_reason": "stop"}, minutes,
                        s.steady(1.0, end=ONSET_S), phase=4),
              s.counter("vllm:num_preemptions_total", labels, minutes, s.steady(0.2, start=ONSET_S, end=stop), phase=4)]
    onset, end = ONSET_S / 60, stop / 60
    expected = [page("vllm", "v-0", engine="0")]
    run(promtool, tmp_path, "vllm", series, [
        alerts(Alert.PREEMPTIONS_HIGH, onset + 4, expected),
        alerts(Alert.PREEMPTIONS_HIGH, onset + 15, expected),
        alerts(Alert.PREEMPTIONS_HIGH, end - 1, expected),
        alerts(Alert.PREEMPTIONS_HIGH, end + 10, [])])


# ---- bucket layouts ------------------------------------------------------------------------------

def _ttft_layouts():
    ttft = SPECS["vllm"].metrics["vllm:time_to_first_token_seconds"]
    old = [repr(float(b)) for b in ttft.buckets_before[0][1]] + ["+Inf"]
    new = [repr(float(b)) for b in ttft.buckets] + ["+Inf"]
    return old, new


def test_rolling_upgrade_between_vllm_bucket_layouts_reads_the_top_common_bound_not_2560s(promtool, tmp_path):
    """A 0.7 replica (TTFT buckets up to 10 s, V0: no `engine` label) beside a 0.9 one (up to 2560 s); 2 % of
    first tokens take 30 s on both, so the true p99 is 30 s. Summed per `le` over the two layouts, the
    quantile read 2560 s; over the bounds both export it reads the top common bound, 10 s, shown as "≥ 10 s"."""
    minutes = 30
    old, new = _ttft_layouts()
    slow = s.two_speed(2.0, 0.3, 30.0, lambda t: 0.02)
    series = s.histogram("vllm:time_to_first_token_seconds", {"model_name": "m1", "instance": "old"}, minutes, old,
                         slow, phase=2)
    series += s.histogram("vllm:time_to_first_token_seconds", {"model_name": "m1", "instance": "new", "engine": "0"},
                          minutes, new, slow, phase=9)
    p99 = recording_layer(SPECS["vllm"], Config()).get(Key("quantile", Role.TTFT, "5m", HEADLINE_QUANTILE)).name
    run(promtool, tmp_path, "vllm", series, [
        {"expr": p99, "eval_time": "20m", "exp_samples": [
            {"labels": f'{p99}{{llm_engine="vllm", model_name="m1"}}', "value": 10}]}])
    texts = render_rules(default_rules()["vllm"])
    assert "2560" not in texts and "le=~" in texts


def test_rolling_upgrade_itl_p99_stays_within_a_factor_of_1_5_or_reads_the_top_common_bound(promtool, tmp_path):
    """0.7 exports the per-step ITL as time_per_output_token (bounds to 2.5 s), 0.11 as inter_token_latency (to
    80 s). Model m1: 2 % of steps take 0.9 s on both replicas, read within 1.5x. Model m2: 2 % take 4 s, above
    the old layout's top bound: summed per `le`, the quantile read 80 s; over the common bounds, 2.5 s ("≥")."""
    minutes = 30
    metrics = SPECS["vllm"].metrics
    old = [repr(float(b)) for b in metrics["vllm:time_per_output_token_seconds"].buckets_before[0][1]] + ["+Inf"]
    new = [repr(float(b)) for b in metrics["vllm:inter_token_latency_seconds"].buckets] + ["+Inf"]
    series = []
    for model, stall in (("m1", 0.9), ("m2", 4.0)):
        slow = s.two_speed(50.0, 0.03, stall, lambda t: 0.02)
        series += s.histogram("vllm:time_per_output_token_seconds", {"model_name": model, "instance": "old"}, minutes,
                              old, slow, phase=5)
        series += s.histogram("vllm:inter_token_latency_seconds",
                              {"model_name": model, "instance": "new", "engine": "0"}, minutes, new, slow, phase=10)
    p99 = recording_layer(SPECS["vllm"], Config()).get(Key("quantile", Role.ITL, "5m", HEADLINE_QUANTILE)).name
    run(promtool, tmp_path, "vllm", series, [
        {"expr": f'{p99}{{model_name="m1"}} > bool 0.6 and {p99}{{model_name="m1"}} < bool 1.35', "eval_time": "20m",
         "exp_samples": [{"labels": '{llm_engine="vllm", model_name="m1"}', "value": 1}]},
        {"expr": f'{p99}{{model_name="m2"}}', "eval_time": "20m",
         "exp_samples": [{"labels": f'{p99}{{llm_engine="vllm", model_name="m2"}}', "value": 2.5}]}])


def test_a_models_itl_buckets_summed_from_its_units_equal_those_read_from_raw_buckets(promtool, tmp_path):
    """The model's ITL bucket rates are the sum of its units' recorded ones; on the same series they must equal the
    model-level sum of the raw buckets (what the vmalert build still records), bucket for bucket: a 0.7 replica
    exporting the per-step ITL as time_per_output_token only (old layout, no `engine`) beside a 0.11 one with two
    data-parallel engine cores exporting both inter_token_latency and time_per_output_token (new layouts)."""
    minutes = 30
    metrics = SPECS["vllm"].metrics
    old = [repr(float(b)) for b in metrics["vllm:time_per_output_token_seconds"].buckets_before[0][1]] + ["+Inf"]
    itl = [repr(float(b)) for b in metrics["vllm:inter_token_latency_seconds"].buckets] + ["+Inf"]
    tpot = [repr(float(b)) for b in metrics["vllm:time_per_output_token_seconds"].buckets] + ["+Inf"]
    slow = s.two_speed(50.0, 0.03, 0.9, lambda t: 0.02)
    series = s.histogram("vllm:time_per_output_token_seconds", {"model_name": "m1", "instance": "old"}, minutes,
                         old, slow, phase=5)
    for rank, phase in (("0", 10), ("1", 12)):
        labels = {"model_name": "m1", "instance": "new", "engine": rank}
        series += s.histogram("vllm:inter_token_latency_seconds", labels, minutes, itl, slow, phase=phase)
        series += s.histogram("vllm:time_per_output_token_seconds", labels, minutes, tpot,
                              s.two_speed(5.0, 0.04, 0.2, lambda t: 0.05), phase=phase)
    name = "cluster_namespace_model_name:llm_itl_seconds_bucket:rate5m"
    vmalert = dataclasses.replace(Config(), rules=dataclasses.replace(Config().rules, target="vmalert"))
    raw = next(r["expr"] for g in build_rules(SPECS["vllm"], vmalert)["groups"] for r in g["rules"]
               if r.get("record") == name)
    reference = tmp_path / "reference.rules.yaml"
    reference.write_text(yaml.safe_dump({"groups": [{"name": "reference", "rules": [
        {"record": "reference_itl_bucket_rate", "expr": raw}]}]}, width=10_000))
    ours = tmp_path / "vllm.rules.yaml"
    ours.write_text(render_rules(default_rules()["vllm"]))
    summed = next(r["expr"] for g in default_rules()["vllm"]["groups"] for r in g["rules"] if r.get("record") == name)
    assert "_bucket" not in summed.replace(name.replace("_model_name:", "_model_name_instance:"), "")
    run_rule_tests(promtool, tmp_path, [ours, reference], [x.render() for x in series], [
        {"expr": f"count({name})", "eval_time": f"{t}m", "exp_samples": [{"labels": "{}", "value": 14}]}
        for t in (10, 20)] + [
        {"expr": "count(reference_itl_bucket_rate)", "eval_time": f"{t}m",
         "exp_samples": [{"labels": "{}", "value": 14}]} for t in (10, 20)] + [
        {"expr": f"count(abs({name} - ignoring (llm_engine) reference_itl_bucket_rate) >= 0)", "eval_time": "20m",
         "exp_samples": [{"labels": "{}", "value": 14}]}] + [        # every bucket matched its reference
        {"expr": f"abs({name} - ignoring (llm_engine) reference_itl_bucket_rate) > 1e-12", "eval_time": f"{t}m",
         "exp_samples": []} for t in (10, 15, 20, 25)], interval=f"{s.RESOLUTION_S}s")


def _short_share_fleets() -> dict[str, list[s.Series]]:
    """vLLM: two engine cores counting their own finished requests, one stalled (preempting while nothing
    completes, so the floor on finished requests decides), and a replica that finishes requests but never
    preempts. SGLang: two DP groups of one server whose tokenizer counts the server's finished requests."""
    minutes, onset = 30, 10 * 60
    vllm = []
    for rank, finished, preempted in (("0", s.steady(2.0), s.steady(0.1, start=onset)),
                                      ("1", s.steady(0.0), s.steady(0.05, start=onset))):
        labels = {"model_name": "m1", "engine": rank, "instance": "v-0"}
        vllm.append(s.counter("vllm:request_success_total", {**labels, "finished_reason": "stop"}, minutes, finished,
                              phase=4))
        vllm.append(s.counter("vllm:num_preemptions_total", labels, minutes, preempted, phase=4))
    labels = {"model_name": "m1", "engine": "0", "instance": "v-1"}
    vllm += [s.counter("vllm:request_success_total", {**labels, "finished_reason": "length"}, minutes, s.steady(1.0),
                       phase=9), s.counter("vllm:num_preemptions_total", labels, minutes, s.steady(0.0), phase=9)]
    labels = {"model_name": "m1", "engine_type": "unified", "instance": "sg-0"}
    sglang = [s.counter("sglang:num_requests_total", {**labels, "is_streaming": "true"}, minutes, s.steady(3.0),
                        phase=7)]
    for dp, retracted in (("0", s.steady(0.2, start=onset)), ("1", s.steady(0.01))):
        rank = {"tp_rank": dp, "dp_rank": dp, "pp_rank": "0", "moe_ep_rank": dp}
        sglang.append(s.counter("sglang:num_retracted_requests_total", {**labels, **rank}, minutes, retracted, phase=7))
    return {"vllm": vllm, "sglang": sglang}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_units_short_share_from_its_recorded_rates_equals_the_share_read_from_raw_counters(promtool, tmp_path,
                                                                                            engine):
    """The page's short-window share divides the unit's preemption and finished-request rates recorded just above
    it in the same evaluation; on the same series it must equal the share read from the raw counters (what the
    vmalert build still records), unit for unit, at every evaluation, including where nothing completes."""
    name = "cluster_namespace_model_name_instance:llm_preemption_share:ratio_rate2m"
    vmalert = dataclasses.replace(Config(), rules=dataclasses.replace(Config().rules, target="vmalert"))
    raw = next(r["expr"] for g in build_rules(SPECS[engine], vmalert)["groups"] for r in g["rules"]
               if r.get("record") == name)
    ours = next(r["expr"] for g in default_rules()[engine]["groups"] for r in g["rules"] if r.get("record") == name)
    assert "rate(" not in ours and "rate(" in raw
    reference = tmp_path / "reference.rules.yaml"
    reference.write_text(yaml.safe_dump({"groups": [{"name": "reference", "rules": [
        {"record": "reference_share", "expr": raw}]}]}, width=10_000))
    rules = tmp_path / f"{engine}.rules.yaml"
    rules.write_text(render_rules(default_rules()[engine]))
    units = {"vllm": 3, "sglang": 2}[engine]
    run_rule_tests(promtool, tmp_path, [rules, reference], [x.render() for x in _short_share_fleets()[engine]], [
        {"expr": f"count(abs({name} - ignoring (llm_engine) reference_share) >= 0)", "eval_time": f"{t}m",
         "exp_samples": [{"labels": "{}", "value": units}]} for t in (5, 15, 25)] + [
        {"expr": f"abs({name} - ignoring (llm_engine) reference_share) > 1e-12", "eval_time": f"{t}m",
         "exp_samples": []} for t in (5, 9, 11, 12, 15, 20, 25)] + [
        {"expr": f"count({name} > 0.03)", "eval_time": "15m", "exp_samples": [{"labels": "{}", "value": 2 if
                                                                              engine == "vllm" else 1}]}],
        interval=f"{s.RESOLUTION_S}s")


# ---- chronic vs burst ----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_a_chronic_one_percent_on_20_replicas_warns_and_never_pages_over_90_minutes(promtool, tmp_path, seed):
    """Twenty replicas deliberately run hot: 1 request/s each, 1 % of them preempted at Poisson times, no
    bursts. The capacity warning fires on (nearly) every replica; the critical page never does."""
    minutes = 100
    series = []
    for i in range(20):
        labels = {"model_name": "m1", "engine": "0", "instance": f"v-{i}"}
        phase = (i * 4) % 15
        series.append(s.counter("vllm:request_success_total", {**labels, "finished_reason": "stop"}, minutes,
                                s.steady(1.0), phase=phase))
        noise = s.poisson_events(0.01, minutes * 60, seed * 100 + i)
        series.append(s.counter("vllm:num_preemptions_total", labels, minutes, s.events(noise), phase=phase))
    run(promtool, tmp_path, "vllm", series, [
        never(Alert.PREEMPTIONS_HIGH, minutes),
        {"expr": f'count(ALERTS{{alertname="{Alert.PREEMPTIONS_CHRONIC}", alertstate="firing"}}) >= bool 18',
         "eval_time": f"{minutes}m", "exp_samples": [{"labels": "{}", "value": 1}]}])


def test_isolated_two_request_retractions_on_a_low_traffic_replica_never_page_at_any_scrape_phase(promtool, tmp_path):
    """A quiet SGLang replica (TP=2, 3 requests a minute) whose KV-full step retracts 2 requests every 10
    minutes, at a different second for each of 15 replicas' scrape phases: one moment is never a page."""
    minutes, series = 120, []
    for i in range(15):
        labels = {"model_name": "m1", "engine_type": "unified", "instance": f"sg-{i}"}
        phase = i
        series.append(s.counter("sglang:num_requests_total", {**labels, "is_streaming": "true"}, minutes,
                                s.steady(0.05), phase=phase))
        bursts = [t + i * 7.3 for t in range(300, minutes * 60, 600) for _ in range(2)]
        for tp in ("0", "1"):
            series.append(s.counter("sglang:num_retracted_requests_total",
                                    {**labels, "tp_rank": tp, "pp_rank": "0", "moe_ep_rank": "0"}, minutes,
                                    s.events(bursts), phase=phase))
    run(promtool, tmp_path, "sglang", series, [never(Alert.PREEMPTIONS_HIGH, minutes)])


# ---- stragglers and scrape gaps ------------------------------------------------------------------

def _itl_fleet(minutes: float, slow_of, gaps_of=lambda i: ()) -> list[s.Series]:
    bounds = [repr(float(b)) for b in SPECS["vllm"].metrics["vllm:inter_token_latency_seconds"].buckets] + ["+Inf"]
    series = []
    for i in range(20):
        labels = {"model_name": "m1", "engine": "0", "instance": f"v-{i}"}
        phase, gaps = (i * 3) % 15, gaps_of(i)
        series += s.histogram("vllm:inter_token_latency_seconds", labels, minutes, bounds,
                              s.two_speed(20.0, 0.03, 0.5, slow_of(i)), phase=phase, gaps=gaps)
        series.append(s.counter("vllm:generation_tokens_total", labels, minutes, s.steady(20.0), phase=phase,
                                gaps=gaps))
    return series


def test_one_slow_replica_of_20_without_preemption_raises_the_instance_latency_warning(promtool, tmp_path):
    """From minute 20, replica 13 is slow on a fifth of its decode steps (0.5 s instead of 30 ms): 1 % of the
    model's steps, so the model's p99 barely moves; the replica's own p99 is many times it. The warning is per
    KV-cache unit, so it names the engine core (`engine`) too."""
    minutes = 40
    series = _itl_fleet(minutes, lambda i: (lambda t: 0.2 if i == 13 and t >= ONSET_S else 0.0))
    warning = {"llm_engine": "vllm", "model_name": "m1", "instance": "v-13", "engine": "0", "severity": "warning"}
    onset = ONSET_S / 60
    run(promtool, tmp_path, "vllm", series, [
        alerts(Alert.INSTANCE_LATENCY_HIGH, onset - 1, []),
        alerts(Alert.INSTANCE_LATENCY_HIGH, onset + 15, [warning]),
        alerts(Alert.ITL_HIGH, onset + 15, [])])


def test_latency_warnings_ride_out_a_scrape_gap_and_resolve_soon_after_recovery(promtool, tmp_path):
    """Half the fleet stalls on 5 % of its steps from minute 20 (model ITL p99 0.5 s, above 0.25 s); from minute
    45 the sick replicas cannot be scraped for 4 minutes, so their buckets fade out of the 5m rate and the
    model's p99 looks healthy. The warning holds through the gap; after a real recovery at minute 60 it
    resolves within 12 minutes (5m rate window + 5m keep_firing_for + evaluation)."""
    minutes, onset, gap, recovery = 80, ONSET_S, (45 * 60, 49 * 60), 60 * 60
    series = _itl_fleet(minutes, lambda i: (lambda t: 0.05 if i % 2 and onset <= t < recovery else 0.0),
                        lambda i: (gap,) if i % 2 else ())
    warning = [{"llm_engine": "vllm", "model_name": "m1", "severity": "warning"}]
    run(promtool, tmp_path, "vllm", series, [
        alerts(Alert.ITL_HIGH, 40, warning),
        *(alerts(Alert.ITL_HIGH, m, warning) for m in (47, 49, 51, 53)),
        alerts(Alert.ITL_HIGH, 72, [])])
