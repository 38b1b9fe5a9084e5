"""The fleets of issue 29 under `promtool test rules`, shaped by hand from the engines' and routers' own code and
scraped every 15 s at a phase of their own (tests/support/scrapes.py): Ray Serve replicas sharing one scrape
target, production-stack's router beside its engines, pods that autoscaling removes, a page that heals.

Sources of the shapes (read with the search/fetch tools, never copied):
- Ray Serve LLM: the replica's AsyncLLM gets `stat_loggers=[RayPrometheusStatLogger]`
  (ray-project/ray@4a859c861e288789b7de79dd9004fe3bca73f8dd:python/ray/llm/_internal/serve/engines/vllm/vllm_engine.py,
  `_start_async_llm_engine`); vLLM's wrapper adds `ReplicaId`, the Serve replica's unique id, to every series
  (vllm-project/vllm@02579a5f38c5ed5211c01da7207a5c6fbc921423:vllm/v1/metrics/ray_wrappers.py, `_get_replica_id`,
  `_get_tag_keys`); Ray's per-node metrics agent exports every replica of the node under one target, with its
  WorkerId, Component, NodeAddress, SessionName and Version tags (the scrape shown in vllm-project/vllm#24267).
- production-stack's router: `vllm:num_requests_running`, `vllm:num_requests_waiting` (and more) as gauges labelled
  `server` only, no `model_name` (vllm-project/production-stack@a6c01db05f65f556235413ba8dbcfb0c01132fff:
  src/vllm_router/services/metrics_service/__init__.py).
- Autoscaling scale-down: the pod's target leaves service discovery; Prometheus writes a staleness marker for each of
  its series at the next scrape and nothing after (Prometheus docs, querying/basics.md, "Staleness").
"""

from __future__ import annotations

from llmdash.rules.generate import render_rules
from llmdash.vocabulary import Alert
from tests.support import scrapes as s
from tests.support.builds import default_rules
from tests.support.promtool import firing_alerts as firing
from tests.support.promtool import run_rule_tests

ONSET_S = 20 * 60
RAY = "ray-serve-vllm"
RAY_NODE = "10.0.0.7:8080"     # Ray's metrics agent on the node: one target for all its replicas


def run(promtool, tmp_path, engines: tuple[str, ...], series: list[s.Series], checks: list[dict]) -> None:
    files = []
    for engine in engines:
        path = tmp_path / f"{engine}.rules.yaml"
        path.write_text(render_rules(default_rules()[engine]))
        files.append(path)
    run_rule_tests(promtool, tmp_path, files, [x.render() for x in series], checks, timeout=240,
                   interval=f"{s.RESOLUTION_S}s")


def count_firing(name: str, at_min: float, count: int, **matchers) -> dict:
    extra = "".join(f', {k}="{v}"' for k, v in matchers.items())
    return {"expr": f'count(ALERTS{{alertname="{name}", alertstate="firing"{extra}}})', "eval_time": f"{at_min:g}m",
            "exp_samples": [{"labels": "{}", "value": count}]}


def never(name: str, start_min: float, end_min: float, **matchers) -> dict:
    """No firing sample of the alert between start_min and end_min (the window ends at end_min)."""
    extra = "".join(f', {k}="{v}"' for k, v in matchers.items())
    return {"expr": f'count_over_time(ALERTS{{alertname="{name}", alertstate="firing"{extra}}}'
                    f'[{end_min - start_min:g}m])', "eval_time": f"{end_min:g}m", "exp_samples": []}


# ---- 1. Ray Serve: the replica is the KV-cache unit -------------------------------------------------------------

def _ray_replica(replica: int, minutes: float, preempted, requests_per_s: float = 1.0) -> list[s.Series]:
    """One Serve replica's request and preemption counters as Ray's agent exports them (vLLM >= 0.11 names)."""
    labels = {"model_name": "qwen-0.5b", "engine": "0", "ReplicaId": f"r{replica}x7k2", "WorkerId": f"w{replica}c9",
              "Component": "core_worker", "NodeAddress": "10.0.0.7", "SessionName": "session_2026_12_01",
              "Version": "2.52.0", "instance": RAY_NODE}
    return [s.counter("ray_vllm_request_success_total", {**labels, "finished_reason": "stop"}, minutes,
                      s.steady(requests_per_s), phase=5),
            s.counter("ray_vllm_num_preemptions_total", labels, minutes, preempted, phase=5)]


def test_ray_serve_one_thrashing_replica_of_four_on_one_node_pages_and_names_its_replica(promtool, tmp_path):
    """Four replicas on one node, each `engine="0"`, 1 request/s each; replica 3 preempts 10 % of its requests
    from minute 20. Per (instance, engine) the node reads 2.5 %, below the 3 % page: the replica must page."""
    minutes = 40
    series = [x for r in range(4) for x in _ray_replica(
        r, minutes, s.steady(0.10, start=ONSET_S) if r == 3 else s.steady(0.0))]
    page = {"llm_engine": RAY, "model_name": "qwen-0.5b", "instance": RAY_NODE, "engine": "0",
            "ReplicaId": "r3x7k2", "severity": "critical"}
    onset = ONSET_S / 60
    run(promtool, tmp_path, (RAY,), series, [
        firing(Alert.PREEMPTIONS_HIGH, onset - 1, []),
        firing(Alert.PREEMPTIONS_HIGH, onset + 5, [page])])


def test_ray_serve_one_chronic_replica_of_four_warns_and_names_its_replica(promtool, tmp_path):
    """Replica 1 of four on one node loses 1.2 % of its requests to preemption all along (the others none): the node
    reads 0.3 %, below the 0.5 % capacity warning; the replica, at 1.2 %, warns."""
    minutes = 60
    series = [x for r in range(4) for x in _ray_replica(r, minutes, s.steady(0.012) if r == 1 else s.steady(0.0))]
    warning = {"llm_engine": RAY, "model_name": "qwen-0.5b", "instance": RAY_NODE, "engine": "0",
               "ReplicaId": "r1x7k2", "severity": "warning"}
    run(promtool, tmp_path, (RAY,), series, [firing(Alert.PREEMPTIONS_CHRONIC, 55, [warning])])


def test_the_ray_serve_page_text_names_the_replica():
    rule = next(rule for group in default_rules()[RAY]["groups"] for rule in group["rules"]
                if rule.get("alert") == Alert.PREEMPTIONS_HIGH)
    assert "$labels.ReplicaId" in rule["annotations"]["summary"]


# ---- 3. production-stack's router beside its engines --------------------------------------------------------------

def test_the_production_stack_routers_vllm_named_gauges_raise_no_signal_missing(promtool, tmp_path):
    """The router (job vllm-router) exports vllm:num_requests_running/_waiting per backend `server`, without
    `model_name`; the engine pod behind it exports all its series but the generated-tokens counter. Only the
    engine's missing throughput warns; the router, which is no engine, never does."""
    minutes = 30
    router = {"job": "vllm-router", "instance": "10.0.0.9:8001"}
    series = []
    for backend in ("http://10.0.0.5:8000", "http://10.0.0.6:8000"):
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:current_qps"):
            series.append(s.counter(name, {**router, "server": backend}, minutes, lambda t: 3, phase=10))
    engine = {"job": "vllm", "instance": "10.0.0.5:8000", "model_name": "m1", "engine": "0"}
    series += [s.counter("vllm:num_requests_running", engine, minutes, lambda t: 4, phase=0),
               s.counter("vllm:num_preemptions_total", engine, minutes, s.steady(0.0), phase=0),
               s.counter("vllm:request_success_total", {**engine, "finished_reason": "stop"}, minutes,
                         s.steady(1.0), phase=0)]
    for histogram in ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                      "vllm:request_time_per_output_token_seconds"):
        series.append(s.counter(f"{histogram}_count", engine, minutes, s.steady(1.0), phase=0))
    expected = [{"llm_engine": "vllm", "model_name": "m1", "instance": "10.0.0.5:8000",
                 "signal": "throughput", "severity": "warning"}]
    run(promtool, tmp_path, ("vllm",), series, [
        firing(Alert.SIGNAL_MISSING, minutes, expected),
        never(Alert.SIGNAL_MISSING, 0, minutes, instance="10.0.0.9:8001")])


# ---- 4. warnings that end when their subject does -----------------------------------------------------------------

def _vllm_replica(i: int, minutes: float, preempted, removed: float | None = None) -> list[s.Series]:
    labels = {"model_name": "m1", "engine": "0", "instance": f"v-{i}"}
    phase = (i * 5) % 15
    return [s.counter("vllm:request_success_total", {**labels, "finished_reason": "stop"}, minutes, s.steady(1.0),
                      phase=phase, removed=removed),
            s.counter("vllm:num_preemptions_total", labels, minutes, preempted, phase=phase, removed=removed)]


def _warning(instance: str) -> dict:
    return {"llm_engine": "vllm", "model_name": "m1", "instance": instance, "engine": "0", "severity": "warning"}


def test_no_chronic_warning_about_a_pod_autoscaling_deleted(promtool, tmp_path):
    """Three replicas at a chronic 1 %; at minute 45 autoscaling deletes v-2 (its series go stale). Its warning,
    firing before, ends at once; the others keep theirs."""
    minutes, deleted = 70, 45 * 60
    series = [x for i in range(3) for x in _vllm_replica(i, minutes, s.steady(0.01),
                                                         removed=deleted if i == 2 else None)]
    run(promtool, tmp_path, ("vllm",), series, [
        firing(Alert.PREEMPTIONS_CHRONIC, 44, [_warning("v-0"), _warning("v-1"), _warning("v-2")]),
        firing(Alert.PREEMPTIONS_CHRONIC, 47, [_warning("v-0"), _warning("v-1")]),
        never(Alert.PREEMPTIONS_CHRONIC, 46, minutes, instance="v-2")])


def _itl_replica(i: int, minutes: float, slow_share, removed: float | None = None) -> list[s.Series]:
    bounds = ["0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.75", "1.0", "2.5",
              "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "+Inf"]    # vLLM's ITL bounds (vllm/v1/metrics/loggers.py)
    labels = {"model_name": "m1", "engine": "0", "instance": f"v-{i}"}
    phase = (i * 5) % 15
    return s.histogram("vllm:inter_token_latency_seconds", labels, minutes, bounds,
                       s.two_speed(20.0, 0.03, 0.5, slow_share), phase=phase, removed=removed) + [
        s.counter("vllm:generation_tokens_total", labels, minutes, s.steady(20.0), phase=phase, removed=removed)]


def test_no_straggler_warning_outlives_a_deleted_pod_by_more_than_its_keep_firing_for(promtool, tmp_path):
    """Ten replicas; v-7 is slow (0.5 s) on 5 % of its steps and warns; at minute 40 autoscaling deletes it. The warning
    may ride out keep_firing_for (5 minutes, which also rides out scrape gaps) and no more: gone at minute 46.
    Read from its 5-minute rates it lasted until the last samples left the window, then 5 minutes more."""
    minutes, deleted = 55, 40 * 60
    series = [x for i in range(10) for x in _itl_replica(
        i, minutes, (lambda t: 0.05) if i == 7 else (lambda t: 0.0), removed=deleted if i == 7 else None)]
    run(promtool, tmp_path, ("vllm",), series, [
        count_firing(Alert.INSTANCE_LATENCY_HIGH, 39, 1, instance="v-7"),
        never(Alert.INSTANCE_LATENCY_HIGH, 46, minutes)])


def test_no_chronic_warning_after_a_page_that_healed_unless_the_rate_stays_chronic(promtool, tmp_path):
    """Two replicas thrash (10 % of requests preempted) from minute 40 to 45 and are paged. v-0 then heals (no
    preemption): its page clears and no capacity warning follows. v-1 goes on losing 1 % of its requests after the
    thrash: a chronic rate after the page, which warns."""
    minutes, start, end = 100, 40 * 60, 45 * 60
    thrash = s.steady(0.10, start=start, end=end)
    series = (_vllm_replica(0, minutes, thrash)
              + _vllm_replica(1, minutes, s.plus(thrash, s.steady(0.01, start=end))))
    page = {"llm_engine": "vllm", "model_name": "m1", "engine": "0", "severity": "critical"}
    run(promtool, tmp_path, ("vllm",), series, [
        firing(Alert.PREEMPTIONS_HIGH, 44, [{**page, "instance": "v-0"}, {**page, "instance": "v-1"}]),
        firing(Alert.PREEMPTIONS_HIGH, 60, []),
        never(Alert.PREEMPTIONS_CHRONIC, 0, minutes, instance="v-0"),
        firing(Alert.PREEMPTIONS_CHRONIC, 95, [_warning("v-1")])])
