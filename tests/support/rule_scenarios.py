"""Synthetic input series for `promtool test rules`, derived from an engine's catalog.

Minute-resolution traffic shapes for one or two models: the series names, labels, buckets
and units come from the catalog, so the same scenarios exercise every engine's rule file.
Series with a tp_rank label come once per rank (0 and 1), as a TP=2 server exports them, so a
rule that summed ranks would see twice the rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from llmdash.engines.model import EngineSpec, Source

MINUTES = 240
ONSET = 150  # minute of the scenario's event: after two hours, so the offset divergence baselines are full


@dataclass(frozen=True)
class Traffic:
    """What one model's engine does during one minute."""

    tokens_per_s: float = 100.0
    requests_per_s: float = 1.0
    slow_share: float = 0.0          # share of latency observations that hit a stall
    preemptions_per_s: float = 0.0
    paused: float = 0.0
    retracted_prompt_per_s: float = 0.0
    retracted_generated_per_s: float = 0.0
    kv_usage: float = 0.6
    waiting: float = 2.0
    running: float = 30.0
    reset: bool = False              # counters restart from zero this minute
    slow_scale: float = 1.0          # stalls this many times longer than LATENCY's


STEADY = Traffic()
COLLAPSE = Traffic(slow_share=0.05, preemptions_per_s=0.5, paused=3, retracted_prompt_per_s=200,
                   retracted_generated_per_s=50, kv_usage=0.99, waiting=25, running=24)
IDLE = Traffic(tokens_per_s=0, requests_per_s=0, kv_usage=0, waiting=0, running=0)

# fast and stalled latencies, in seconds, per role
LATENCY = {"ttft": (0.3, 4.0), "itl": (0.03, 0.5), "tpot": (0.03, 0.3)}
OBSERVATIONS_PER_TOKEN = {"ttft": 0.0, "itl": 1.0, "tpot": 0.0}  # ttft/tpot: one per request


def steady(minute: int) -> Traffic:
    return STEADY


def collapse(minute: int) -> Traffic:
    return COLLAPSE if minute >= ONSET else STEADY


def load_ramp(minute: int) -> Traffic:
    """Twice the load: throughput and latency rise together."""
    if minute < ONSET:
        return STEADY
    return Traffic(tokens_per_s=200, requests_per_s=2, slow_share=0.05, waiting=20, running=60, kv_usage=0.8)


def idle(minute: int) -> Traffic:
    return IDLE if minute >= ONSET else STEADY


def restart(minute: int) -> Traffic:
    return Traffic(reset=True) if minute == ONSET else STEADY


def low_traffic(minute: int) -> Traffic:
    """Under a token a second with an occasional stall: p99 is noise, not a divergence."""
    stall = minute >= ONSET and minute % 3 == 0
    return Traffic(tokens_per_s=0.5, requests_per_s=0.01, slow_share=0.3 if stall else 0.0, waiting=0, running=1)


def thrashing(minute: int) -> Traffic:
    """One replica preempting 0.09/s (9 % of its requests) from the onset: the fleet sum is small, the replica
    is not."""
    return Traffic(preemptions_per_s=0.09, retracted_prompt_per_s=20, paused=2, slow_share=0.05, kv_usage=0.99) \
        if minute >= ONSET else STEADY


def background(minute: int) -> Traffic:
    """A healthy replica preempting once every 500 s at 2 requests/s: 0.1 % of its requests."""
    return Traffic(requests_per_s=2.0, preemptions_per_s=0.002)


def alternating_sides(minute: int) -> Traffic:
    """0.5 retractions/s whose cost flips between prompt and generated tokens every minute."""
    if minute < ONSET:
        return STEADY
    prompt = minute % 2 == 0
    return Traffic(preemptions_per_s=0.5, retracted_prompt_per_s=200 if prompt else 20,
                   retracted_generated_per_s=20 if prompt else 200, slow_share=0.05, kv_usage=0.99)


def capped_collapse(minute: int) -> Traffic:
    """A collapse whose stalls are longer than any histogram's top bound below 10 s (Triton TTFT tops out at 5 s)."""
    return Traffic(slow_share=0.05, slow_scale=4.0, preemptions_per_s=0.5, paused=3, kv_usage=0.99) \
        if minute >= ONSET else STEADY


def prompt_growth(minute: int) -> Traffic:
    """Longer prompts at the same request rate and token throughput: latency up, not one preemption."""
    return Traffic(slow_share=0.05, kv_usage=0.8) if minute >= ONSET else STEADY


def long_collapse(minute: int) -> Traffic:
    """The collapse lasting until the scenario's end, 90 minutes after the onset."""
    return COLLAPSE if minute >= ONSET else STEADY


def paused_blips(minute: int) -> Traffic:
    """Two single scrapes with paused requests, four minutes apart: a blip, not a collapse."""
    return Traffic(paused=2) if minute in (ONSET, ONSET + 4) else STEADY


def stalled(minute: int) -> Traffic:
    """A replica stuck in stalls the whole time: ITL and TTFT tails at their slow values, KV full."""
    return Traffic(slow_share=0.5, kv_usage=0.99, preemptions_per_s=0.2, paused=3)


def tp_overcount(minute: int) -> Traffic:
    """0.08 preemptions/s on each rank: under the 0.1/s threshold unless ranks are summed."""
    if minute < ONSET:
        return STEADY
    return Traffic(preemptions_per_s=0.08, retracted_prompt_per_s=20, retracted_generated_per_s=5, paused=0)


@dataclass
class _Series:
    labels: dict[str, str]
    values: list[float] = field(default_factory=list)

    def render(self, name: str) -> dict:
        selector = ", ".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        return {"series": f"{name}{{{selector}}}", "values": " ".join(f"{v:.6g}" for v in self.values)}


@dataclass(frozen=True)
class Replica:
    """One engine process: the model it serves, its traffic, and how it is labelled and named."""

    model: str
    shape: Callable[[int], Traffic]
    instance: str = ""               # default <model>-0
    era: str = "new"                 # "old": each signal's oldest source, as exported before a rename
    labels: tuple[tuple[str, str], ...] = ()  # e.g. (("cluster", "eu-1"),)


def _labels(spec: EngineSpec, source: Source, replica: Replica) -> list[dict[str, str]]:
    base = {spec.model_label: replica.model, "instance": replica.instance or f"{replica.model}-0",
            **dict(spec.selectors), **dict(replica.labels), **dict(source.match)}   # selectors: e.g. NIM's job
    if "tp_rank" in source.metric.labels:  # a tensor-parallel engine: every rank exports its own copy
        return [{**base, "tp_rank": rank} for rank in ("0", "1")]
    return [base]


def input_series(spec: EngineSpec, replicas: dict[str, Callable[[int], Traffic]] | list[Replica],
                 roles: tuple[str, ...] | None = None) -> list[dict]:
    """promtool input_series: every signal's newest (era "old": oldest) source for each replica, minute by
    minute; `replicas` may also map model -> traffic, one replica each. `roles` limits the signals emitted."""
    if isinstance(replicas, dict):
        replicas = [Replica(model, shape) for model, shape in replicas.items()]
    out = []
    for replica in replicas:
        traffic = [replica.shape(m) for m in range(MINUTES)]
        for role, signal in spec.signals.items():
            if not signal.sources or (roles is not None and role not in roles):
                continue
            source = signal.sources[-1] if replica.era == "old" else signal.sources[0]
            for labels in _labels(spec, source, replica):
                out += [s.render(name) for name, s in _role_series(spec, role, source, labels, traffic)]
    return out


def _counter(traffic: list[Traffic], per_second: Callable[[Traffic], float]) -> list[float]:
    values, total = [], 0.0
    for t in traffic:
        total = 0.0 if t.reset else total + 60 * per_second(t)
        values.append(total)
    return values


def _role_series(spec, role, source, labels, traffic) -> list[tuple[str, _Series]]:
    counters = {
        "throughput": lambda t: t.tokens_per_s, "requests": lambda t: t.requests_per_s,
        "preemptions": lambda t: t.preemptions_per_s,
        "retracted_input_tokens": lambda t: t.retracted_prompt_per_s,
        "retracted_output_tokens": lambda t: t.retracted_generated_per_s,
    }
    gauges = {"kv_usage": lambda t: t.kv_usage, "waiting": lambda t: t.waiting, "running": lambda t: t.running,
              "preemptions": lambda t: t.paused}
    if source.kind == "counter" and role in counters:
        return [(source.series, _Series(labels, _counter(traffic, counters[role])))]
    if source.kind == "gauge" and role in gauges:
        return [(source.series, _Series(labels, [gauges[role](t) for t in traffic]))]
    if role in LATENCY:
        return _histogram(spec, source, labels, traffic, role)
    if source.per is not None:
        return _mean(spec, role, source, labels, traffic)
    return []


def _mean(spec: EngineSpec, role: str, source: Source, labels: dict,
          traffic: list[Traffic]) -> list[tuple[str, _Series]]:
    """A mean's seconds counter (ITL's latency model per token) and, unless another signal emits it, its tokens."""
    fast, slow = LATENCY["itl"]
    per_token = lambda t: (1 - t.slow_share) * fast + t.slow_share * slow * t.slow_scale  # noqa: E731
    seconds = _counter(traffic, lambda t: t.tokens_per_s * per_token(t))
    series = [(source.series, _Series(labels, seconds))]
    emitted = {s.metric.name for r, signal in spec.signals.items() if r != role for s in signal.sources}
    if source.per.name not in emitted:
        series.append((source.per.name, _Series(labels, _counter(traffic, lambda t: t.tokens_per_s))))
    return series


def _histogram(spec: EngineSpec, source: Source, labels: dict, traffic: list[Traffic],
               role: str) -> list[tuple[str, _Series]]:
    metric = source.metric
    scale = {"seconds": 1.0, "milliseconds": 1000.0}[metric.unit]
    fast, slow = (v * scale for v in LATENCY[role])
    slow_of = lambda t: slow * t.slow_scale  # noqa: E731
    bounds = list(metric.buckets) + [float("inf")]
    per_token = OBSERVATIONS_PER_TOKEN[role]

    def per_minute(t: Traffic) -> float:
        return 60 * (t.tokens_per_s * per_token + t.requests_per_s * (1 - per_token))

    buckets = {}
    for bound in bounds:
        def share(t: Traffic, b: float = bound) -> float:
            return ((1 - t.slow_share) if fast <= b else 0) + (t.slow_share if slow_of(t) <= b else 0)

        le = "+Inf" if bound == float("inf") else spec.le(bound)
        buckets[le] = _counter(traffic, lambda t, s=share: per_minute(t) / 60 * s(t))
    total = _counter(traffic, lambda t: per_minute(t) / 60)
    sums = _counter(traffic, lambda t: per_minute(t) / 60 * ((1 - t.slow_share) * fast + t.slow_share * slow_of(t)))
    series = [(f"{metric.name}_bucket", _Series({**labels, "le": le}, values)) for le, values in buckets.items()]
    return series + [(f"{metric.name}_count", _Series(labels, total)), (f"{metric.name}_sum", _Series(labels, sums))]
