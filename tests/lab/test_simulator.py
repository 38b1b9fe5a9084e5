"""The serving model and its per-engine exposition, without Prometheus."""

from __future__ import annotations

import dataclasses
import io
import math

import pytest

from llmdash.engines.catalog import load_all, load_engine
from llmdash.errors import LlmdashError
from llmdash.lab.emitters import simulated_engines
from llmdash.lab.exposition import Histogram
from llmdash.lab.scenarios import PRIMARY, Traffic, build, scrapes, write_openmetrics
from llmdash.lab.simulator import RECOMPUTE, RETRACT, Load, ServingConfig, ServingSimulator

SIMULATED = simulated_engines(load_all())

SHORT = Traffic(steady_min=3, after_min=3, ramp_min=1)
TIGHT = ServingConfig(kv_blocks=400)        # 6,400 tokens: preempts under the load below
PRESSURE = Load(rate_rps=4.0, prompt_tokens=1200, output_tokens=250)


class Events:
    """A recorder that keeps what the engine reported."""

    def __init__(self):
        self.preempted, self.finished, self.steps = [], [], []

    def on_step(self, now, dt, decode_tokens, prefill_tokens, preempted):
        self.steps.append((dt, decode_tokens, prefill_tokens))

    def on_token_gap(self, gap_s, count, tokens): ...
    def on_prefill_done(self, req, now): ...
    def on_first_token(self, req, now): ...

    def on_preempt(self, req, now):
        self.preempted.append(req)

    def on_finish(self, req, now):
        self.finished.append(req)

    def on_log_tick(self, now): ...


def run_until_preemption(flavour: str) -> tuple[ServingSimulator, Events]:
    events = Events()
    sim = ServingSimulator(ServingConfig(kv_blocks=400, preemption=flavour), lambda t: PRESSURE, 7, events)
    t = 0.0
    while not events.preempted and t < 600:
        t += 0.05
        sim.run_until(t)
    assert events.preempted, "no preemption under a KV budget far below the load"
    return sim, events


def test_recompute_preemption_resets_victim_and_requeues_it_first():
    sim, events = run_until_preemption(RECOMPUTE)
    victim = events.preempted[0]
    assert victim.computed == 0 and victim.blocks == 0
    assert victim in sim.waiting and victim not in sim.running
    assert sim.waiting.index(victim) < len(events.preempted)        # at the front, in preemption order
    assert victim.prefill_target() == victim.prompt + victim.out   # prompt and output are prefilled again


def test_retraction_keeps_generated_tokens_and_appends_to_queue():
    sim, events = run_until_preemption(RETRACT)
    victim = events.preempted[-1]
    assert sim.waiting[-1] is victim
    assert victim.computed == 0
    # SGLang retracts the request with most output first: none still running has more
    assert all(r.out_off + sim.decode_steps <= victim.out for r in sim.running if r.decoding)


@pytest.mark.parametrize("flavour", [RECOMPUTE, RETRACT])
def test_kv_blocks_match_sequences_and_never_exceed_budget(flavour):
    events = Events()
    sim = ServingSimulator(ServingConfig(kv_blocks=400, preemption=flavour), lambda t: PRESSURE, 3, events)
    bs = sim.cfg.block_size
    for step in range(3000):
        sim.run_until(step * 0.05)
        held = sum(math.ceil((r.off + sim.decode_steps) / bs) if r.decoding else r.blocks for r in sim.running)
        assert held == sim.cfg.kv_blocks - sim.free_blocks, f"block leak at step {step}"
        assert sim.free_blocks >= 0
        assert len(sim.running) <= sim.cfg.max_running
    assert events.preempted and events.finished


def test_step_time_grows_with_tokens_in_the_step():
    events = Events()
    sim = ServingSimulator(ServingConfig(), lambda t: Load(3.0, 400, 250), 1, events)
    sim.run_until(120)
    light = [dt for dt, decode, prefill in events.steps if prefill == 0 and decode <= 5]
    heavy = [dt for dt, decode, prefill in events.steps if prefill >= 300]
    assert light and heavy and max(light) < min(heavy)


def test_same_seed_same_data_other_seed_other_data():
    specs = {"vllm": load_engine("vllm")}

    def text(seed):
        out = io.StringIO()
        write_openmetrics(build("steady", SHORT), specs, seed, 1_000_000, out)
        return out.getvalue()
    assert text(1) == text(1)
    assert text(1) != text(2)


def test_sglang_itl_observer_divides_interval_by_new_tokens():
    itl = Histogram(load_engine("sglang").metrics["sglang:inter_token_latency_seconds"].buckets)
    itl.observe_per_token(0.02, 4)           # SGLang divides an interval by its new tokens: 0.02 s carrying 4
    assert sum(itl.counts) == 4 and itl.total == pytest.approx(0.02)
    assert itl.counts[itl.bounds.index(0.006)] == 4


def final_values(scenario_name: str, engines: list[str], traffic: Traffic = SHORT) -> list[tuple[float, dict]]:
    """[(t, {engine: {sample line prefix: value}})] for every scrape of the primary model."""
    specs = {e: load_engine(e) for e in engines}
    out = []
    for t, batch in scrapes(build(scenario_name, traffic), specs, 5):
        values = {}
        for engine, model, emitter in batch:
            if model != PRIMARY:
                continue
            values[engine] = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                              for line in emitter.render() if not line.startswith("#")}
        out.append((t, values))
    return out


def value(sample: dict, prefix: str) -> float:
    matches = [v for k, v in sample.items() if k.startswith(prefix)]
    assert len(matches) == 1, f"{prefix}: {len(matches)} series"
    return matches[0]


def test_engine_semantics_under_collapse():
    collapse = Traffic(steady_min=2, after_min=6, ramp_min=1, collapse_prompt_tokens=2400)
    t, last = final_values("kv-collapse", ["vllm", "sglang", "tensorrt-llm-serve"], collapse)[-1]
    vllm, sglang = last["vllm"], last["sglang"]
    # same traffic, same recompute model: vLLM counts tokens every step, SGLang's realtime
    # counter at log ticks, its generation counter only when requests finish
    per_step = value(vllm, "vllm:generation_tokens_total{")
    realtime = value(sglang, 'sglang:realtime_tokens_total{model_name="llama-3.1-8b-instruct",engine_type="unified",'
                             'tp_rank="0",pp_rank="0",moe_ep_rank="0",dp_rank="",mode="decode"}')
    at_finish = value(sglang, "sglang:generation_tokens_total{")
    assert at_finish < realtime and abs(realtime / per_step - 1) < 0.1
    # retraction counters repeat on every TP rank with identical values
    ranks = [v for k, v in sglang.items() if k.startswith("sglang:num_retracted_requests_total{")]
    assert len(ranks) == 2 and ranks[0] == ranks[1] > 0
    assert value(vllm, "vllm:num_preemptions_total{") > 0
    # the ITL histogram counts one observation per generated token here (no speculative decoding)
    assert value(vllm, "vllm:inter_token_latency_seconds_count{") <= per_step


def test_dynamo_frontend_sees_the_stream_not_the_engine():
    """Same recompute simulation as vLLM: the frontend counts the same tokens per chunk, counts a request
    when it ends, has no preemption series, and its queued gauge holds requests until their first token."""
    collapse = Traffic(steady_min=2, after_min=6, ramp_min=1, collapse_prompt_tokens=2400)
    points = final_values("kv-collapse", ["vllm", "dynamo"], collapse)
    t, last = points[-1]
    vllm, dynamo = last["vllm"], last["dynamo"]
    assert value(dynamo, "dynamo_frontend_output_tokens_total{") == value(vllm, "vllm:generation_tokens_total{")
    assert value(dynamo, 'dynamo_frontend_requests_total{model="llama-3.1-8b-instruct",endpoint="chat_completions",'
                         'request_type="stream",status="success",error_type=""}') == \
        sum(v for k, v in vllm.items() if k.startswith("vllm:request_success_total{"))
    assert not [k for k in dynamo if "preempt" in k or "kv" in k]
    # per token, first chunks excluded: one ITL observation per token after each request's first
    finished_tokens = value(dynamo, "dynamo_frontend_output_tokens_total{")
    ttft_count = value(dynamo, "dynamo_frontend_time_to_first_token_seconds_count{")
    assert value(dynamo, "dynamo_frontend_inter_token_latency_seconds_count{") == finished_tokens - ttft_count
    # queued (no first token yet, prefill included) never exceeds in flight; the engine's waiting queue
    # holds preempted requests too, so the frontend's queued is not the engine's waiting
    for _, sample in points:
        if "dynamo" in sample:
            queued = value(sample["dynamo"], "dynamo_frontend_queued_requests{")
            inflight = value(sample["dynamo"], "dynamo_frontend_inflight_requests{")
            assert 0 <= queued <= inflight
            assert inflight == value(sample["vllm"], "vllm:num_requests_waiting{") + \
                value(sample["vllm"], "vllm:num_requests_running{")


def test_dynamo_bucket_bounds_are_written_as_rust_displays_them():
    text = "\n".join(line for _, batch in scrapes(build("steady", Traffic(steady_min=1, after_min=0.5)),
                                                   {"dynamo": load_engine("dynamo")}, 1)
                     for _, _, emitter in batch for line in emitter.render())
    for le in ("1", "0.0022", "480", "0.084", "2", "0"):
        assert f'le="{le}"' in text
    assert 'le="1.0"' not in text and 'le="2.0"' not in text and 'le="0.0"' not in text


def test_restart_resets_counters_and_misses_scrapes():
    scenario = build("restart", SHORT)
    points = final_values("restart", ["vllm"])
    times = [t for t, _ in points]
    assert not [t for t in times if scenario.restart_at_s <= t < scenario.restart_at_s + scenario.down_s]
    before = [v["vllm"] for t, v in points if t < scenario.restart_at_s][-1]
    after = [v["vllm"] for t, v in points if t >= scenario.restart_at_s][0]
    gen = "vllm:generation_tokens_total{"
    assert value(after, gen) < value(before, gen)


def test_scrape_gaps_have_no_samples():
    scenario = build("scrape-gaps", Traffic(steady_min=3, after_min=20))
    times = [t for t, _ in scrapes(scenario, {"vllm": load_engine("vllm")}, 1)]
    for start, end in scenario.scrape_gaps:
        assert not [t for t in times if start <= t < end]
    assert len(times) == int(scenario.duration_s // 15) - sum(int((e - s) // 15) for s, e in scenario.scrape_gaps)


def test_idle_stops_generation():
    points = final_values("idle", ["vllm"])
    gen = "vllm:generation_tokens_total{"
    settled = [value(v["vllm"], gen) for t, v in points if t >= 3 * 60 + 120]
    assert settled and len(set(settled)) == 1 and settled[0] > 0


@pytest.mark.parametrize("engine", SIMULATED)
def test_every_current_catalog_series_is_emitted_with_its_labels(engine):
    spec = load_engine(engine)
    out = io.StringIO()
    write_openmetrics(build("steady", Traffic(steady_min=1, after_min=0.5)), {engine: spec}, 1, 1_000_000, out)
    text = out.getvalue()
    newest = spec.supported_to
    # a variant's older names (the later renames) are its old-era replicas' (test_fleet_scenarios)
    newest_names = {names[0] for _, names in spec.renames} if spec.base else set(spec.metrics)
    for metric in spec.metrics.values():
        emitted = [line for line in text.splitlines() if line.startswith(metric.scraped_series[0] + "{")]
        if not metric.exposed_in(newest, newest) or metric.name not in newest_names:
            assert not emitted, f"{metric.name} is gone in {newest} or an older name, but emitted"
            continue
        assert emitted, f"{metric.name} not emitted"
        for label in metric.labels_at(newest) + ("job", "instance"):
            assert f'{label}="' in emitted[0], f"{metric.name} lacks label {label}"
        if metric.buckets:
            les = {line.split('le="')[1].split('"')[0] for line in emitted}
            assert les == {spec.le(b) for b in metric.buckets_at(newest)} | {"+Inf"}


def test_openmetrics_timestamps_are_seconds_and_ordered():
    out = io.StringIO()
    write_openmetrics(build("steady", SHORT), {"lmdeploy": load_engine("lmdeploy")}, 1, 1_700_000_000, out)
    stamps = [float(line.rsplit(" ", 1)[1]) for line in out.getvalue().splitlines() if not line.startswith("#")]
    assert stamps == sorted(stamps) and 1_700_000_000 < stamps[0] < stamps[-1] < 1_700_000_000 + 7 * 60


def test_unknown_scenario_and_engine_are_usage_errors():
    with pytest.raises(LlmdashError, match="unknown scenario 'flood'"):
        build("flood")
    spec = dataclasses.replace(load_all()["vllm"], id="ollama")
    with pytest.raises(LlmdashError, match="no emitter for engine 'ollama'"):
        list(scrapes(build("steady", SHORT), {"ollama": spec}, 1))


def test_simulate_writes_a_complete_backfill_file(tmp_path):
    from click.testing import CliRunner

    from llmdash.cli.lab import simulate_command

    out = tmp_path / "kv.om"
    result = CliRunner().invoke(simulate_command, ["--engine", "lmdeploy", "--scenario", "idle", "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert text.endswith("# EOF\n") and "lmdeploy:iter_token_latency_bucket{" in text
    assert [p.name for p in tmp_path.iterdir()] == ["kv.om"]          # no temporary file left behind


@pytest.mark.parametrize("args", [[], ["--serve", "9400", "--out", "x.om"]])
def test_simulate_needs_exactly_one_output(args):
    from click.testing import CliRunner

    from llmdash.cli.lab import simulate_command

    result = CliRunner().invoke(simulate_command, ["--engine", "vllm", "--scenario", "steady"] + args)
    assert isinstance(result.exception, LlmdashError)
    assert "exactly one of --serve PORT or --out FILE" in str(result.exception)


def test_backfill_target_carries_the_catalogs_default_selectors():
    """NIM's queries carry job="nim" (its catalog's selectors), so its simulated scrape target has that job."""
    for engine, job in (("nim", "nim"), ("vllm", "llmdash-sim")):
        out = io.StringIO()
        write_openmetrics(build("steady", Traffic(steady_min=1, after_min=0.5)), {engine: load_engine(engine)}, 1,
                          1_000_000, out)
        samples = [line for line in out.getvalue().splitlines() if not line.startswith("#") and "{" in line]
        assert samples and all(f'job="{job}"' in line for line in samples), engine


def test_a_variants_added_labels_are_emitted():
    out = io.StringIO()
    ray = load_engine("ray-serve-vllm")
    write_openmetrics(build("steady", Traffic(steady_min=1, after_min=0.5)), {ray.id: ray}, 1, 1_000_000, out)
    line = next(line for line in out.getvalue().splitlines() if line.startswith("ray_vllm_num_requests_running{"))
    assert all(f'{label}="' in line for label in ("WorkerId", "ReplicaId", "SessionName", "model_name"))


def test_phased_scrapes_sit_at_a_seeded_offset_per_process_within_the_interval():
    from llmdash.lab.scenarios import timed_scrapes

    specs = {"vllm": load_engine("vllm"), "sglang": load_engine("sglang")}
    scenario = build("steady", Traffic(steady_min=2, after_min=0.5))

    def offsets(seed):
        seen: dict[tuple, set[float]] = {}
        for t, batch in timed_scrapes(scenario, specs, seed, phased=True):
            for at, engine, model, _emitter in batch:
                seen.setdefault((engine, model), set()).add(round(at - (t - 15.0), 3))
        return seen
    first = offsets(1)
    assert all(len(v) == 1 and 0.5 <= next(iter(v)) <= 14.5 for v in first.values())   # one phase per process
    assert len({next(iter(v)) for v in first.values()}) > 1                           # processes differ
    assert offsets(1) == first and offsets(2) != first
    assert all(at == t for t, batch in timed_scrapes(scenario, specs, 1) for at, *_ in batch)   # unphased: the grid
