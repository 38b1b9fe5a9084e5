"""Old engine releases on a real Prometheus: the built dashboards, evaluated as Grafana would.

(a) SGLang 0.4.1 and (b) vLLM 0.7.3 (the V0 engine): the simulator's kv-collapse scenario as those
releases export it (names, labels and bucket bounds of that release: `Replica.era` set to the
version). Every panel the release can fill has data; the ones it cannot are listed and asserted empty.
(c) Multi-rank SGLang servers shaped by hand from the sources: 0.5.x, whose scheduler gauges and
retraction counters appear on tp_rank 0 and 1 (`--enable-metrics-for-all-schedulers`;
retraction counters increment on every rank), and 0.4.10, the first release with tp_rank, beside
a 0.4.9 server without it. Rank 1 carries different gauge values from rank 0, so reading it,
summing or taking the max over ranks would each show.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import pytest

from llmdash.build import build_dashboards
from llmdash.config import load_config
from llmdash.engines.catalog import load_engine
from llmdash.lab.evaluate import evaluate_dashboard
from llmdash.lab.promserver import SLOT_GAP_S, PrometheusServer, plan_windows
from llmdash.lab.scenarios import PRIMARY, build, write_openmetrics

pytestmark = pytest.mark.e2e

RELEASES = {"sglang": "0.4.1", "vllm": "0.7.3"}
ITL_TARGETS = {("Throughput vs latency", "ITL p99", "A"), ("Throughput vs latency", "ITL p99", "B"),
               ("ITL vs TPOT", "ITL p99", "A"), ("ITL vs TPOT", "ITL p99", "B"), ("On-call", "ITL p99", "A"),
               ("Instances", "Top instances by ITL p99", "A"), ("SLO", "ITL under 0.1s", "A"),
               ("Preemption", "Latency vs throughput divergence", "A")}
TPOT_TARGETS = {("ITL vs TPOT", "TPOT p99", "A"), ("ITL vs TPOT", "TPOT p99", "B")}
# What each release cannot fill, from the catalog's facts:
EXPECTED_EMPTY = {
    # SGLang 0.4.1: no ITL histogram (0.4.4+), no per-request TPOT (0.5.22+), no retraction counters (0.5.7+)
    "sglang": ITL_TARGETS | TPOT_TARGETS | {
        ("On-call", "Preemptions/s", "A"), ("Preemption", "Preemptions/s", "A"),
        ("Preemption", "Retracted tokens/s: prompt vs generated", "A"),
        ("Preemption", "Retracted tokens/s: prompt vs generated", "B"),
        ("Instances", "Top instances by preemption", "A")},
    # vLLM 0.7.3 (V0): no per-request TPOT (0.11+) and no preemptions-per-request histogram (0.30+)
    "vllm": TPOT_TARGETS | {("Preemption", "Preemptions per finished request", "A")},
}
HAND_MINUTES = 30
STEP_S = 15


@pytest.fixture(scope="module")
def dashboards():
    return build_dashboards(load_config(None))


def _release_scenario(version: str):
    """kv-collapse with every replica exporting what `version` exports."""
    scenario = build("kv-collapse")
    return replace(scenario, models=tuple(
        replace(m, replicas=tuple(replace(r, era=version) for r in m.replicas)) for m in scenario.models))


# ---- (c) multi-rank SGLang servers, by hand ---------------------------------------------------
# Labels as each release sets them: 0.5.x scheduler series {model_name, engine_type, tp_rank, pp_rank,
# moe_ep_rank}; 0.4.10 {model_name, engine_type, tp_rank, pp_rank} (scheduler_metrics_mixin.py L42-51);
# 0.4.9 {model_name, engine_type} (scheduler.py L645-649). Tokenizer series (one process) have no rank.
SERVERS = {
    # model: (scheduler labels per rank, {gauge: value per rank}, retractions/s per rank)
    "m-0.5": ([{"engine_type": "unified", "tp_rank": str(k), "pp_rank": "0", "moe_ep_rank": "0"} for k in (0, 1)],
              {"sglang:token_usage": (0.6, 0.9), "sglang:num_queue_reqs": (7, 11), "sglang:num_running_reqs": (20, 30)},
              (0.5, 0.5)),
    "m-0.4.10": ([{"engine_type": "unified", "tp_rank": str(k), "pp_rank": "0"} for k in (0, 1)],
                 {"sglang:token_usage": (0.4, 0.8), "sglang:num_queue_reqs": (3, 5),
                  "sglang:num_running_reqs": (12, 16)},
                 None),
    "m-0.4.9": ([{"engine_type": "unified"}],
                {"sglang:token_usage": (0.3,), "sglang:num_queue_reqs": (2,), "sglang:num_running_reqs": (9,)},
                None),
}
TOKENS_PER_S, REQUESTS_PER_S = 200.0, 2.0


def _hand_shaped(start: float) -> str:
    lines = {}

    def add(family: str, kind: str, name: str, labels: dict, value: float, t: float):
        body = lines.setdefault(family, [f"# TYPE {family} {kind}"])
        text = ",".join(f'{k}="{v}"' for k, v in labels.items())
        body.append(f"{name}{{{text}}} {value:g} {t:.0f}")

    for model, (ranks, gauges, retractions) in SERVERS.items():
        target = {"job": "sglang", "instance": f"{model}:30000"}
        for step in range(HAND_MINUTES * 60 // STEP_S + 1):
            t, elapsed = start + step * STEP_S, step * STEP_S
            for k, rank_labels in enumerate(ranks):
                labels = {"model_name": model, **rank_labels, **target}
                for name, values in gauges.items():
                    add(name, "gauge", name, labels, values[k], t)
                if retractions:   # a 0.5.10+ server: the realtime counter, repeated by every rank
                    add("sglang:realtime_tokens", "counter", "sglang:realtime_tokens_total",
                        {**labels, "mode": "decode"}, TOKENS_PER_S * elapsed, t)
                    for name, per_request in (("sglang:num_retracted_requests", 1),
                                              ("sglang:num_retracted_input_tokens", 500),
                                              ("sglang:num_retracted_output_tokens", 100)):
                        add(name, "counter", f"{name}_total", labels, retractions[k] * per_request * elapsed, t)
            tokenizer = {"model_name": model, **target}
            add("sglang:generation_tokens", "counter", "sglang:generation_tokens_total", tokenizer,
                TOKENS_PER_S * elapsed, t)
            add("sglang:num_requests", "counter", "sglang:num_requests_total", tokenizer, REQUESTS_PER_S * elapsed, t)
            for family in ("sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds"):
                per_s, value = (REQUESTS_PER_S, 0.3) if "first_token" in family else (TOKENS_PER_S, 0.03)
                count = per_s * elapsed
                for le in ("0.04", "0.1", "0.4", "1.0", "+Inf"):
                    add(family, "histogram", f"{family}_bucket", {**tokenizer, "le": le},
                        count * (value <= (math.inf if le == "+Inf" else float(le))), t)
                add(family, "histogram", f"{family}_count", tokenizer, count, t)
                add(family, "histogram", f"{family}_sum", tokenizer, count * value, t)
    return "\n".join(line for body in lines.values() for line in body) + "\n# EOF\n"


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    """(server, kv-collapse window, (start, end) of the hand-shaped servers)."""
    work = tmp_path_factory.mktemp("releases")
    window = plan_windows(["kv-collapse"], now=time.time() - HAND_MINUTES * 60 - SLOT_GAP_S)["kv-collapse"]
    server = PrometheusServer()
    try:
        for engine, version in RELEASES.items():
            path = work / f"{engine}-{version}.om"
            with open(path, "w") as out:
                write_openmetrics(_release_scenario(version), {engine: load_engine(engine)}, 1, window.start, out)
                out.write("# EOF\n")
            server.backfill(path)
        hand_start = window.end + SLOT_GAP_S
        path = work / "multi-rank.om"
        path.write_text(_hand_shaped(hand_start))
        server.backfill(path)
        server.start()
        yield server, window, (hand_start, hand_start + HAND_MINUTES * 60)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def evaluated(releases, dashboards):
    server, window, _ = releases
    return {engine: evaluate_dashboard(dashboards[engine], server, window.start, window.end, 60.0)
            for engine in RELEASES}


@pytest.mark.parametrize("engine", sorted(RELEASES))
def test_every_panel_the_release_can_fill_has_data(evaluated, engine):
    targets = {(t.row, t.panel, t.ref_id): t for p in evaluated[engine].panels for t in p.targets}
    empty = {key for key, t in targets.items() if not t.has_data}
    assert EXPECTED_EMPTY[engine] <= set(targets), "an expected-empty target is no longer on the dashboard"
    assert empty == EXPECTED_EMPTY[engine], (
        f"{engine} {RELEASES[engine]}: unexpectedly empty {sorted(empty - EXPECTED_EMPTY[engine])}, "
        f"unexpectedly filled {sorted(EXPECTED_EMPTY[engine] - empty)}")


def test_sglang_0_4_series_carry_no_rank_and_requests_come_from_the_e2e_histogram(releases, evaluated):
    server, window, _ = releases
    assert server.query('count(sglang:token_usage{tp_rank!=""}) or vector(0)', window.end)[0]["value"][1] == "0"
    assert not server.query("sglang:num_requests_total", window.end)       # 0.4.2+
    requests = evaluated["sglang"].panel("Requests/s", "On-call").targets[0].series[0].points
    assert max(v for _, v in requests) > 0


def test_vllm_v0_fills_itl_from_its_per_step_tpot_histogram_and_marks_the_collapse(releases, evaluated):
    server, window, _ = releases
    assert not server.query("vllm:inter_token_latency_seconds_count", window.end)
    assert not server.query('vllm:time_per_output_token_seconds_count{engine!=""}', window.end)   # V0: no engine label
    result = evaluated["vllm"]
    for name in ("Divergence", "Preemption"):
        regions = [r for r in result.regions(name) if r.labels.get("model_name") == PRIMARY]
        assert any(window.onset <= r.start <= window.onset + 1200 for r in regions), f"{name}: {regions}"


def _latest(server, expr: str, at: float) -> dict[str, float]:
    return {s["metric"].get("model_name", ""): float(s["value"][1]) for s in server.query(expr, at)}


@pytest.fixture(scope="module")
def multi_rank(releases, dashboards):
    server, _, (start, end) = releases
    return server, evaluate_dashboard(dashboards["sglang"], server, start, end, 60.0), end


def _panel_latest(result, title: str, row: str, ref: str = "A") -> dict[str, float]:
    target = next(t for t in result.panel(title, row).targets if t.ref_id == ref)
    return {s.labels.get("model_name", ""): s.points[-1][1] for s in target.series if s.points}


def test_multi_rank_gauges_are_taken_once_per_dp_rank(multi_rank):
    """TP copies of one scheduler are deduplicated by their max, not filtered to tp_rank 0 (issue 19: the filter
    read only the first DP group under DP attention), and never summed."""
    _, result, _ = multi_rank
    rank0 = {model: {name: max(values) for name, values in gauges.items()} for model, (_, gauges, _) in SERVERS.items()}
    kv = _panel_latest(result, "KV-cache usage", "Preemption")
    assert kv == pytest.approx({m: v["sglang:token_usage"] for m, v in rank0.items()})
    running = _panel_latest(result, "Running and waiting requests", "Queue", "A")
    waiting = _panel_latest(result, "Running and waiting requests", "Queue", "B")
    assert running == pytest.approx({m: v["sglang:num_running_reqs"] for m, v in rank0.items()})
    assert waiting == pytest.approx({m: v["sglang:num_queue_reqs"] for m, v in rank0.items()})


def test_multi_rank_retractions_count_one_rank(multi_rank):
    _, result, _ = multi_rank
    assert _panel_latest(result, "Preemptions/s", "Preemption") == pytest.approx({"m-0.5": 0.5})
    assert _panel_latest(result, "Retracted tokens/s: prompt vs generated", "Preemption", "A") == pytest.approx(
        {"m-0.5": 250.0})
    assert _panel_latest(result, "Retracted tokens/s: prompt vs generated", "Preemption", "B") == pytest.approx(
        {"m-0.5": 50.0})
    # the on-call tile sums every model: still one rank's rate
    assert result.panel("Preemptions/s", "On-call").targets[0].series[0].points[-1][1] == pytest.approx(0.5)


def test_multi_rank_throughput_and_requests_are_not_multiplied(multi_rank):
    _, result, _ = multi_rank
    tokens = _panel_latest(result, "Output tokens/s", "Throughput vs latency")
    assert tokens == pytest.approx({model: TOKENS_PER_S for model in SERVERS})
    assert result.panel("Requests/s", "On-call").targets[0].series[0].points[-1][1] == pytest.approx(
        REQUESTS_PER_S * len(SERVERS))
