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

Fleet scenarios serve a model from several replicas (:class:`Replica`): each its own engine
process with its own instance label, optional ``cluster``/``namespace`` labels, share of the
model's load (or its own load), ServingConfig (which may change at the onset) and metric-name
era (``new``: the catalog's newest names; ``old``: each signal's oldest source; a release version such
as ``"0.4.3"``: what the catalog says that release exports):

- ``one-bad-replica``: 20 replicas; at the onset one replica's KV budget shrinks and it thrashes
  (20 minutes before and after the onset only: no divergence baseline needed, 20 simulations);
- ``rolling-upgrade``: 2 replicas, the first on old names; at the onset it stalls (slow steps,
  KV full) while the new-name replica stays healthy;
- ``two-clusters``: 2 replicas in ``eu-1`` and 2 in ``us-1``; the prompts grow in ``eu-1`` only;
- ``prompt-growth``: prompts grow 400 -> 1300 tokens under a KV budget that never preempts;
- ``long-collapse``: ``kv-collapse`` that lasts 75 minutes after its first preemption.

A scenario names its ``affected`` replica: the one that restarts, collapses or thrashes, whose
first preemption is the ground-truth onset (:func:`first_preemption`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

from llmdash.engines.model import EngineSpec
from llmdash.errors import LlmdashError
from llmdash.lab.emitters import EMITTERS, emitter_class
from llmdash.lab.emitters.base import EngineMetrics, Fanout
from llmdash.lab.eras import NEW, OLD
from llmdash.lab.simulator import Load, ServingConfig, ServingSimulator

SCRAPE_INTERVAL_S = 15.0
JOB = "llmdash-sim"


@dataclass(frozen=True)
class Replica:
    """One engine process serving a model. The defaults are the single instance of the classic
    scenarios: instance="<engine>-<model>:8000", no cluster or namespace label."""

    name: str = ""                          # instance label suffix: "<engine>-<model>-<name>:8000"
    share: float = 1.0                      # of the model's request rate (ignored with `load`)
    load: Callable[[float], Load] | None = None   # its own offered load instead of a share
    config: ServingConfig | None = None     # its own capacity and speed (default: the scenario's)
    change: tuple[float, ServingConfig] | None = None  # (scenario time, config it runs on from then)
    era: str = NEW                          # NEW, OLD (see eras.era_names) or a release version, "0.4.3"
    cluster: str = ""
    namespace: str = ""

    def instance(self, engine: str, model: str) -> str:
        return instance_label(engine, model + (f"-{self.name}" if self.name else ""))

    def target_labels(self, engine: str, model: str, live: bool = False,
                      selectors: tuple[tuple[str, str], ...] = ()) -> str:
        """The labels Prometheus attaches to this process's series when it scrapes it. `live`: the
        labels a single /metrics serving several replicas must carry itself (none for the classic
        single instance; instance, cluster and namespace for a fleet, scraped with honor_labels).
        `selectors`: the engine catalog's default selectors (e.g. job="nim"), which the scrape
        configuration the catalog expects sets, so the backfill carries them too."""
        if live and self == SINGLE[0]:
            return ""
        labels = {"job": "" if live else JOB, "instance": self.instance(engine, model),
                  "cluster": self.cluster, "namespace": self.namespace, **({} if live else dict(selectors))}
        return ",".join(f'{k}="{v}"' for k, v in labels.items() if v)

    def offered(self, model_load: Callable[[float], Load]) -> Callable[[float], Load]:
        if self.load is not None:
            return self.load
        if self.share == 1.0:
            return model_load
        return lambda t: replace(model_load(t), rate_rps=model_load(t).rate_rps * self.share)


SINGLE = (Replica(),)


@dataclass(frozen=True)
class ModelTraffic:
    """One served model: its name, the offered load over scenario time, and the replicas sharing it."""

    name: str
    load: Callable[[float], Load]
    replicas: tuple[Replica, ...] = SINGLE


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
    affected: str = ""              # the replica of the first model the event hits ("" = its first)

    def affected_replica(self) -> Replica:
        replicas = self.models[0].replicas
        return next((r for r in replicas if r.name == self.affected), replicas[0])

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
    replicas: int | None = None     # fleet scenarios: replicas of the model (None: the scenario's own)
    growth_prompt_tokens: int = 1300  # prompt-growth: where prompts end, under a KV budget that holds them
    long_collapse_min: float = 75.0   # long-collapse: minutes the collapse lasts (at least) after its first preemption


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
    return Scenario("kv-collapse", SCENARIOS["kv-collapse"][0], end, onset,
                    (ModelTraffic(PRIMARY, _prompt_growth_load(tr, onset, base, tr.collapse_prompt_tokens)),)
                    + _second(tr))


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


def _prompt_growth_load(tr: Traffic, onset: float, base: Load, end_tokens: int) -> Callable[[float], Load]:
    """Same rate and outputs as `base`, prompts ramping from the onset to `end_tokens` (kv-collapse and kin)."""
    ramp = tr.ramp_min * 60

    def load(t: float) -> Load:
        return replace(base, prompt_tokens=int(_ramp(t, onset, ramp, base.prompt_tokens, end_tokens)))
    return load


def _fleet(n: int, prefix: str = "", **fields) -> tuple[Replica, ...]:
    """n replicas sharing a model's load evenly, named <prefix>0 ... <prefix>n-1."""
    return tuple(Replica(f"{prefix}{i}", share=1 / n, **fields) for i in range(n))


FLEET_STEADY_MIN, FLEET_AFTER_MIN = 20.0, 20.0  # one-bad-replica: at most 20 + 20 minutes
THRASHING_KV_BLOCKS = 600          # one-bad-replica: below the ~1,000 blocks its steady load holds at peaks
STALLED = ServingConfig(kv_blocks=1000, step_base_s=0.5, step_per_new_token_s=0.0004)  # ITL p99 ~1 s, KV ~0.99
LONG_COLLAPSE_MARGIN_MIN = 5.0     # the first preemption may come a little after the ramp
PROMPT_GROWTH_KV_BLOCKS = 12000    # 192k tokens: 64 sequences of 1300-token prompts fit


def _one_bad_replica(tr: Traffic) -> Scenario:
    # a per-instance page needs no hour of divergence baseline, and 20 replicas cost 20 simulations
    tr = replace(tr, steady_min=min(tr.steady_min, FLEET_STEADY_MIN), after_min=min(tr.after_min, FLEET_AFTER_MIN))
    onset, end, base = _base(tr)
    n = tr.replicas or 20
    replicas = _fleet(n, cluster="prod-1", namespace="llm")
    bad = replace(replicas[0], change=(onset, ServingConfig(kv_blocks=THRASHING_KV_BLOCKS)))
    model = ModelTraffic(PRIMARY, lambda t: replace(base, rate_rps=base.rate_rps * n), (bad,) + replicas[1:])
    return Scenario("one-bad-replica", SCENARIOS["one-bad-replica"][0], end, onset, (model,), affected=bad.name)


def _rolling_upgrade(tr: Traffic) -> Scenario:
    onset, end, base = _base(tr)
    n = max(2, tr.replicas or 2)
    replicas = tuple(replace(r, era=OLD if i < n // 2 else NEW) for i, r in enumerate(_fleet(n)))
    stalled = replace(replicas[0], change=(onset, STALLED))
    model = ModelTraffic(PRIMARY, lambda t: replace(base, rate_rps=base.rate_rps * n), (stalled,) + replicas[1:])
    return Scenario("rolling-upgrade", SCENARIOS["rolling-upgrade"][0], end, onset, (model,),
                    affected=stalled.name)


def _two_clusters(tr: Traffic) -> Scenario:
    onset, end, base = _base(tr)
    per_cluster = tr.replicas or 2
    growing = _prompt_growth_load(tr, onset, base, tr.collapse_prompt_tokens)
    replicas = tuple(replace(r, load=growing if cluster == "eu-1" else (lambda t: base))
                     for cluster in ("eu-1", "us-1")
                     for r in _fleet(per_cluster, f"{cluster}-", cluster=cluster, namespace="llm"))
    model = ModelTraffic(PRIMARY, lambda t: replace(base, rate_rps=base.rate_rps * len(replicas)), replicas)
    return Scenario("two-clusters", SCENARIOS["two-clusters"][0], end, onset, (model,), affected=replicas[0].name)


def _prompt_growth(tr: Traffic) -> Scenario:
    onset, end, base = _base(tr)
    roomy = Replica(config=ServingConfig(kv_blocks=PROMPT_GROWTH_KV_BLOCKS))
    model = ModelTraffic(PRIMARY, _prompt_growth_load(tr, onset, base, tr.growth_prompt_tokens), (roomy,))
    return Scenario("prompt-growth", SCENARIOS["prompt-growth"][0], end, onset, (model,))


def _long_collapse(tr: Traffic) -> Scenario:
    onset, _, base = _base(tr)
    end = onset + (tr.ramp_min + LONG_COLLAPSE_MARGIN_MIN + tr.long_collapse_min) * 60
    model = ModelTraffic(PRIMARY, _prompt_growth_load(tr, onset, base, tr.collapse_prompt_tokens))
    return Scenario("long-collapse", SCENARIOS["long-collapse"][0], end, onset, (model,))


SCENARIOS: dict[str, tuple[str, Callable[[Traffic], Scenario]]] = {
    "steady": ("constant traffic on two models", _steady),
    "kv-collapse": ("prompts grow past the KV budget: tok/s flat, ITL/TTFT p99 and preemptions up", _kv_collapse),
    "load-ramp": ("request rate rises 60 %: throughput and latency rise together", _load_ramp),
    "idle": ("traffic stops at the onset", _idle),
    "restart": ("the engine restarts at the onset: counters reset, one minute down", _restart),
    "scrape-gaps": ("steady traffic with a 5-minute and a 30-second scrape gap", _scrape_gaps),
    "one-bad-replica": ("20 replicas; one replica's KV budget shrinks at the onset and it thrashes", _one_bad_replica),
    "rolling-upgrade": ("2 replicas, old and new metric names; the old-name replica stalls", _rolling_upgrade),
    "two-clusters": ("one model in clusters eu-1 and us-1; prompts grow past the KV budget in eu-1 only",
                     _two_clusters),
    "prompt-growth": ("prompts grow 400 -> 1300 tokens, KV budget big enough: latency up, no preemption",
                      _prompt_growth),
    "long-collapse": ("kv-collapse lasting 75 minutes after its first preemption", _long_collapse),
}
FLEET_SCENARIOS = ("one-bad-replica", "rolling-upgrade", "two-clusters", "prompt-growth", "long-collapse")
CLASSIC_SCENARIOS = tuple(name for name in SCENARIOS if name not in FLEET_SCENARIOS)


def model_seed(seed: int, scenario: str, model: str, replica: str = "") -> int:
    """Arrivals depend on seed, scenario, model and replica only, so every engine sees the same traffic."""
    return zlib.crc32(f"{seed}/{scenario}/{model}{'/' + replica if replica else ''}".encode())


@dataclass
class Instance:
    """One engine process (a replica) serving one model: a simulator feeding the emitters of its engines."""

    model: ModelTraffic
    specs: dict[str, EngineSpec]
    config: ServingConfig
    seed: int
    start: float = 0.0
    replica: Replica = SINGLE[0]
    emitters: dict[str, EngineMetrics] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sim = ServingSimulator(self.config, self.replica.offered(self.model.load), self.seed, Fanout([]),
                                    self.start)
        self.changed = self.replica.change is None
        self.fresh_process()

    def fresh_process(self) -> None:
        """New emitters (counters at 0), as after a process start."""
        state = lambda: self.sim.state  # noqa: E731 - read at scrape time
        model, replica = self.model.name, self.replica
        self.emitters = {engine: emitter_class(spec)(spec, model, state, replica.era,
                                                     replica.target_labels(engine, model, selectors=spec.selectors))
                         for engine, spec in self.specs.items()}
        self.sim.rec = Fanout(list(self.emitters.values()))

    def run_until(self, t: float) -> None:
        """Advance to scenario time `t`, switching to the replica's changed config on the way."""
        if not self.changed and t >= self.replica.change[0]:
            at, config = self.replica.change
            self.sim.run_until(at)
            self.sim.reconfigure(replace(config, preemption=self.config.preemption))
            self.changed = True
        self.sim.run_until(t)


def flavours(specs: dict[str, EngineSpec]) -> dict[str, dict[str, EngineSpec]]:
    """Engines grouped by preemption flavour: one simulation serves each group."""
    groups: dict[str, dict[str, EngineSpec]] = {}
    for engine, spec in specs.items():
        emitter = emitter_class(spec)
        if emitter is None:
            raise LlmdashError(f"the simulator has no emitter for engine {engine!r} (known: {', '.join(EMITTERS)})")
        groups.setdefault(emitter.preemption, {})[engine] = spec
    return groups


def instances(scenario: Scenario, specs: dict[str, EngineSpec], seed: int,
              config: ServingConfig = ServingConfig()) -> list[Instance]:
    out = []
    for model in scenario.models:
        for replica in model.replicas:
            for flavour, group in flavours(specs).items():
                cfg = replace(replica.config or config, preemption=flavour)
                out.append(Instance(model, group, cfg, model_seed(seed, scenario.name, model.name, replica.name),
                                    replica=replica))
    return out


def scrape_phase(seed: int, scenario: str, inst: "Instance") -> float:
    """Seconds (0.5-14.5, seeded) between a grid point and this process's scrape: real targets are
    scraped at their own offset within the interval, which is where `rate()` extrapolation and
    MetricsQL's previous-sample rule part ways; an exact shared grid would hide that."""
    key = f"{seed}/{scenario}/{inst.model.name}/{inst.replica.name}/{inst.config.preemption}"
    return 0.5 + (zlib.crc32(key.encode()) % 1401) / 100


def _advance(inst: Instance, scenario: Scenario, at: float, restarted: set[int]) -> None:
    """Run one instance to scenario time `at`; at the scenario's restart, the affected replica's process
    loses its requests and starts with fresh counters."""
    if scenario.restart_at_s is not None and at >= scenario.restart_at_s and id(inst) not in restarted:
        restarted.add(id(inst))
        if inst.model is scenario.models[0] and inst.replica is scenario.affected_replica():
            inst.run_until(scenario.restart_at_s)
            inst.sim.abort_all()
            inst.fresh_process()
    inst.run_until(at)


def advance(insts: list[Instance], scenario: Scenario, t: float, restarted: bool) -> bool:
    """Run every instance to scenario time `t`; at the scenario's restart, the affected replica's process
    loses its requests and starts with fresh counters. Returns whether the restart is behind us."""
    if not restarted and t >= scenario.restart_at_s:
        for inst in _affected(insts, scenario):
            inst.run_until(scenario.restart_at_s)
            inst.sim.abort_all()
            inst.fresh_process()
        restarted = True
    for inst in insts:
        inst.run_until(t)
    return restarted


def _affected(insts: list[Instance], scenario: Scenario) -> list[Instance]:
    """The processes (one per preemption flavour) of the scenario's affected replica."""
    replica = scenario.affected_replica()
    return [inst for inst in insts if inst.model is scenario.models[0] and inst.replica is replica]


def timed_scrapes(scenario: Scenario, specs: dict[str, EngineSpec], seed: int, interval: float = SCRAPE_INTERVAL_S,
                  config: ServingConfig = ServingConfig(), phased: bool = False,
                  onsets: dict[str, float | None] | None = None,
                  ) -> Iterator[tuple[float, list[tuple[float, str, str, EngineMetrics]]]]:
    """Yield (grid time, [(scrape time, engine, model, emitter)]) for every interval with a scrape.

    Without `phased` every process is scraped on the grid (scrape time = grid time); with it each
    process is scraped `scrape_phase` seconds into the interval that ends at the grid time. `onsets`, given,
    receives `first_preemption`'s answer once the run ends, without simulating the affected replica again
    (for a scenario that restarts the replica, its first preemption before or after the restart)."""
    insts = instances(scenario, specs, seed, config)
    offsets = [scrape_phase(seed, scenario.name, inst) - interval if phased else 0.0 for inst in insts]
    restarted: set[int] = set()
    t = interval
    while t <= scenario.duration_s + 1e-9:
        batch = []
        for inst, offset in zip(insts, offsets):
            at = t + offset
            _advance(inst, scenario, at, restarted)
            if scenario.scraped(at):
                for engine, emitter in inst.emitters.items():
                    emitter.scrape(at)
                    batch.append((at, engine, inst.model.name, emitter))
        if batch:
            yield t, batch
        t += interval
    if onsets is not None:
        onsets.update(_onsets(_affected(insts, scenario)))


def scrapes(scenario: Scenario, specs: dict[str, EngineSpec], seed: int,
            interval: float = SCRAPE_INTERVAL_S,
            config: ServingConfig = ServingConfig()) -> Iterator[tuple[float, list[tuple[str, str, EngineMetrics]]]]:
    """Yield (scenario time, [(engine, model, emitter)]) at every scrape that is not missed (on the grid)."""
    for t, batch in timed_scrapes(scenario, specs, seed, interval, config):
        yield t, [(engine, model, emitter) for _at, engine, model, emitter in batch]


def first_preemption(scenario: Scenario, specs: dict[str, EngineSpec], seed: int) -> dict[str, float | None]:
    """Engine -> when the simulation of the scenario's affected replica (of its first model) first
    preempted a request (the KV budget exceeded), whether or not the engine exports it; None when it
    never did. Only that replica is simulated (`timed_scrapes(onsets=...)` gives the same from a whole run)."""
    alone = _affected_only(scenario)
    insts = _affected(instances(alone, specs, seed), alone)
    for inst in insts:
        inst.run_until(scenario.duration_s)
    return _onsets(insts)


def _onsets(affected: list[Instance]) -> dict[str, float | None]:
    return {engine: inst.sim.first_preemption_at for inst in affected for engine in inst.specs}


def _affected_only(scenario: Scenario) -> Scenario:
    """The scenario reduced to its affected replica (same seeds, so the same traffic)."""
    first = scenario.models[0]
    return replace(scenario, models=(replace(first, replicas=(scenario.affected_replica(),)),))


def instance_label(engine: str, model: str) -> str:
    return f"{engine}-{model}:8000"


def write_openmetrics(scenario: Scenario, specs: dict[str, EngineSpec], seed: int, start_ts: float, out,
                      interval: float = SCRAPE_INTERVAL_S, phased: bool = False,
                      onsets: dict[str, float | None] | None = None) -> int:
    """Write the scenario as OpenMetrics text (timestamps in seconds, `# EOF` last); return samples.
    `phased`: each process scraped at its own seeded offset within the interval (`scrape_phase`); `onsets`: as
    `timed_scrapes`'."""
    declared: set[str] = set()
    samples = 0
    for _t, batch in timed_scrapes(scenario, specs, seed, interval, phased=phased, onsets=onsets):
        lines: list[str] = []
        for at, _engine, _model, emitter in batch:
            lines.extend(emitter.render(emitter.target, start_ts + round(at, 3), declared))
        samples += sum(1 for line in lines if not line.startswith("#"))
        out.write("\n".join(lines))
        out.write("\n")
    return samples
