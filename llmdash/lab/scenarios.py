"""Named, parameterised traffic scenarios and the driver that turns them into scrapes.

Each scenario keeps at least 75 minutes of steady traffic before its onset, because the
divergence signal compares a 5-minute p99 with the median of that p99 over the trailing hour.

- ``steady``: constant traffic (nothing should fire);
- ``kv-collapse``: the prompts of the first model grow until its KV budget is exceeded;
  the request rate and output lengths are unchanged, so generated tok/s stays where it
  was while preemptions start, prefill chunks crowd the steps and ITL/TTFT p99 climb;
- ``load-ramp``: the request rate of the first model rises, throughput and latency with it;
- ``idle``: traffic stops;
- ``restart``: the first model's engine process restarts: requests lost, counters back
  to 0, a minute without scrapes;
- ``scrape-gaps``: steady traffic with missed scrapes.

A second model with steady traffic runs beside the first in ``steady`` and
``kv-collapse``, so per-model grouping is exercised (only the first model collapses).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

from llmdash.engines.catalog import EngineSpec
from llmdash.errors import LlmdashError
from llmdash.lab.exposition import EMITTERS, EngineMetrics, Fanout
from llmdash.lab.simulator import Load, ServingConfig, ServingSimulator

SCRAPE_INTERVAL_S = 15.0
JOB = "llmdash-sim"


@dataclass(frozen=True)
class ModelTraffic:
    """One served model: its name and the offered load over scenario time."""

    name: str
    load: Callable[[float], Load]


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    duration_s: float
    onset_s: float                  # when the scenario's event starts (a reference for steady too)
    models: tuple[ModelTraffic, ...]
    restart_at_s: float | None = None
    down_s: float = 60.0            # no scrapes while the restarted process comes back
    scrape_gaps: tuple[tuple[float, float], ...] = ()

    def scraped(self, t: float) -> bool:
        """False while a scrape is missed: a gap, or the restarted process still down."""
        if self.restart_at_s is not None and self.restart_at_s <= t < self.restart_at_s + self.down_s:
            return False
        return not any(start <= t < end for start, end in self.scrape_gaps)


@dataclass(frozen=True)
class Traffic:
    """Baseline traffic of the first model; every scenario parameter has a default."""

    rate_rps: float = 3.0
    prompt_tokens: int = 400
    output_tokens: int = 250
    steady_min: float = 75.0        # minutes before onset
    after_min: float = 30.0         # minutes after onset
    ramp_min: float = 10.0          # how long the change takes
    collapse_prompt_tokens: int = 1800
    ramp_rate_factor: float = 1.6
    second_model: bool = True


PRIMARY, SECONDARY = "llama-3.1-8b-instruct", "qwen2.5-7b-instruct"


def _ramp(t: float, onset: float, ramp: float, start: float, end: float) -> float:
    if t <= onset:
        return start
    return start + (end - start) * min(1.0, (t - onset) / ramp)


def build(name: str, traffic: Traffic = Traffic()) -> Scenario:
    """The named scenario with the given parameters; an unknown name is a usage error."""
    if name not in SCENARIOS:
        raise LlmdashError(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")
    return SCENARIOS[name][1](traffic)


def _base(tr: Traffic) -> tuple[float, float, Load]:
    onset = tr.steady_min * 60
    return onset, onset + tr.after_min * 60, Load(tr.rate_rps, tr.prompt_tokens, tr.output_tokens)


def _second(tr: Traffic) -> tuple[ModelTraffic, ...]:
    steady = Load(tr.rate_rps / 2, tr.prompt_tokens * 3 // 4, tr.output_tokens * 4 // 5)
    return (ModelTraffic(SECONDARY, lambda t: steady),) if tr.second_model else ()


def _steady(tr: Traffic) -> Scenario:
    onset, end, base = _base(tr)
    return Scenario("steady", SCENARIOS["steady"][0], end, onset,
                    (ModelTraffic(PRIMARY, lambda t: base),) + _second(tr))


def _kv_collapse(tr: Traffic) -> Scenario:
    onset, end, base = _base(tr)
    ramp = tr.ramp_min * 60

    def load(t: float) -> Load:
        prompt = _ramp(t, onset, ramp, base.prompt_tokens, tr.collapse_prompt_tokens)
        return replace(base, prompt_tokens=int(prompt))
    return Scenario("kv-collapse", SCENARIOS["kv-collapse"][0], end, onset,
                    (ModelTraffic(PRIMARY, load),) + _second(tr))


def _load_ramp(tr: Traffic) -> Scenario:
    onset, end, base = _base(tr)
    ramp = tr.ramp_min * 60

    def load(t: float) -> Load:
        return replace(base, rate_rps=_ramp(t, onset, ramp, base.rate_rps, base.rate_rps * tr.ramp_rate_factor))
    return Scenario("load-ramp", SCENARIOS["load-ramp"][0], end, onset, (ModelTraffic(PRIMARY, load),))


def _idle(tr: Traffic) -> Scenario:
    onset, end, base = _base(tr)
    stopped = replace(base, rate_rps=0.0)
    return Scenario("idle", SCENARIOS["idle"][0], end, onset,
                    (ModelTraffic(PRIMARY, lambda t: base if t < onset else stopped),))


def _restart(tr: Traffic) -> Scenario:
    onset, end, base = _base(tr)
    return Scenario("restart", SCENARIOS["restart"][0], end, onset, (ModelTraffic(PRIMARY, lambda t: base),),
                    restart_at_s=onset)


def _scrape_gaps(tr: Traffic) -> Scenario:
    onset, end, base = _base(tr)
    return Scenario("scrape-gaps", SCENARIOS["scrape-gaps"][0], end, onset, (ModelTraffic(PRIMARY, lambda t: base),),
                    scrape_gaps=((onset, onset + 300), (onset + 900, onset + 930)))


SCENARIOS: dict[str, tuple[str, Callable[[Traffic], Scenario]]] = {
    "steady": ("constant traffic on two models", _steady),
    "kv-collapse": ("prompts grow past the KV budget: tok/s flat, ITL/TTFT p99 and preemptions up", _kv_collapse),
    "load-ramp": ("request rate rises 60 %: throughput and latency rise together", _load_ramp),
    "idle": ("traffic stops at the onset", _idle),
    "restart": ("the engine restarts at the onset: counters reset, one minute down", _restart),
    "scrape-gaps": ("steady traffic with a 5-minute and a 30-second scrape gap", _scrape_gaps),
}


def model_seed(seed: int, scenario: str, model: str) -> int:
    """Arrivals depend on seed, scenario and model only, so every engine sees the same traffic."""
    return zlib.crc32(f"{seed}/{scenario}/{model}".encode())


@dataclass
class Instance:
    """One engine process serving one model: a simulator feeding the emitters of its engines."""

    model: ModelTraffic
    specs: dict[str, EngineSpec]
    config: ServingConfig
    seed: int
    start: float = 0.0
    emitters: dict[str, EngineMetrics] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sim = ServingSimulator(self.config, self.model.load, self.seed, Fanout([]), self.start)
        self.fresh_process()

    def fresh_process(self) -> None:
        """New emitters (counters at 0), as after a process start."""
        state = lambda: self.sim.state  # noqa: E731 - read at scrape time
        self.emitters = {engine: EMITTERS[engine](spec, self.model.name, state) for engine, spec in self.specs.items()}
        self.sim.rec = Fanout(list(self.emitters.values()))


def flavours(specs: dict[str, EngineSpec]) -> dict[str, dict[str, EngineSpec]]:
    """Engines grouped by preemption flavour: one simulation serves each group."""
    groups: dict[str, dict[str, EngineSpec]] = {}
    for engine, spec in specs.items():
        if engine not in EMITTERS:
            raise LlmdashError(f"the simulator has no emitter for engine {engine!r} (known: {', '.join(EMITTERS)})")
        groups.setdefault(EMITTERS[engine].preemption, {})[engine] = spec
    return groups


def instances(scenario: Scenario, specs: dict[str, EngineSpec], seed: int,
              config: ServingConfig = ServingConfig()) -> list[Instance]:
    out = []
    for model in scenario.models:
        for flavour, group in flavours(specs).items():
            cfg = replace(config, preemption=flavour)
            out.append(Instance(model, group, cfg, model_seed(seed, scenario.name, model.name)))
    return out


def advance(insts: list[Instance], scenario: Scenario, t: float, restarted: bool) -> bool:
    """Run every instance to scenario time `t`; at the scenario's restart, the first model's process
    loses its requests and starts with fresh counters. Returns whether the restart is behind us."""
    if not restarted and t >= scenario.restart_at_s:
        for inst in insts:
            if inst.model is scenario.models[0]:
                inst.sim.run_until(scenario.restart_at_s)
                inst.sim.abort_all()
                inst.fresh_process()
        restarted = True
    for inst in insts:
        inst.sim.run_until(t)
    return restarted


def scrapes(scenario: Scenario, specs: dict[str, EngineSpec], seed: int,
            interval: float = SCRAPE_INTERVAL_S,
            config: ServingConfig = ServingConfig()) -> Iterator[tuple[float, list[tuple[str, str, EngineMetrics]]]]:
    """Yield (scenario time, [(engine, model, emitter)]) at every scrape that is not missed."""
    insts = instances(scenario, specs, seed, config)
    restarted = scenario.restart_at_s is None
    t = interval
    while t <= scenario.duration_s + 1e-9:
        restarted = advance(insts, scenario, t, restarted)
        if scenario.scraped(t):
            batch = []
            for inst in insts:
                for engine, emitter in inst.emitters.items():
                    emitter.scrape(t)
                    batch.append((engine, inst.model.name, emitter))
            yield t, batch
        t += interval


class _FirstPreemption(EngineMetrics):
    """Listens to a simulation for its first preemption: the collapse's ground-truth onset."""

    def __init__(self) -> None:
        self.at: float | None = None

    def on_preempt(self, req, now) -> None:
        if self.at is None:
            self.at = now


def first_preemption(scenario: Scenario, specs: dict[str, EngineSpec], seed: int) -> dict[str, float | None]:
    """Engine -> when the simulation of the scenario's first model first preempted a request (the KV
    budget exceeded), whether or not the engine exports it; None when it never did."""
    onsets = {}
    for inst in instances(scenario, specs, seed):
        if inst.model is not scenario.models[0]:
            continue
        probe = _FirstPreemption()
        inst.sim.rec = Fanout(list(inst.emitters.values()) + [probe])
        inst.sim.run_until(scenario.duration_s)
        onsets |= {engine: probe.at for engine in inst.specs}
    return onsets


def instance_label(engine: str, model: str) -> str:
    return f"{engine}-{model}:8000"


def write_openmetrics(scenario: Scenario, specs: dict[str, EngineSpec], seed: int, start_ts: float, out,
                      interval: float = SCRAPE_INTERVAL_S) -> int:
    """Write the scenario as OpenMetrics text (timestamps in seconds, `# EOF` last); return samples."""
    declared: set[str] = set()
    extras: dict[tuple[str, str], str] = {}
    samples = 0
    for t, batch in scrapes(scenario, specs, seed, interval):
        lines: list[str] = []
        for engine, model, emitter in batch:
            key = (engine, model)
            if key not in extras:
                extras[key] = f'job="{JOB}",instance="{instance_label(engine, model)}"'
            lines.extend(emitter.render(extras[key], start_ts + t, declared))
        samples += sum(1 for line in lines if not line.startswith("#"))
        out.write("\n".join(lines))
        out.write("\n")
    return samples
