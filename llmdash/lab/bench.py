"""Detection quality: when do the alerts fire on the simulator's scenarios, next to naive baselines?

Each scenario's simulated scrapes become `promtool test rules` input series (15 s resolution, missed
scrapes left out), evaluated by Prometheus' own rule engine together with the engine's generated
rule file and two naive alerts built from the same signals: a throughput drop, and a static latency
p99 threshold. The first firing time of every alert is read back from the `ALERTS` series that the
rule engine writes, with two queries per alert (first and last firing); promtool prints what a query
returned when it differs from the (empty) expectation, and that printout is parsed.

The alerts are whatever the generated rule file holds (names read from the rule model), so per-instance
alerts, severities or absent-series alerts need no change here. Every scenario runs with several
seeds; detection scenarios report min/median/max delays from the first preemption of the collapsing
replica, the others how many seeds fired an alert at all (any firing there is false).
"""

from __future__ import annotations

import io
import re
import statistics
from concurrent.futures import ProcessPoolExecutor
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from llmdash.config import Config
from llmdash.rules.generate import build_rules, rule_group
from llmdash.rules.identity import rule_scope
from llmdash.lab import scenarios
from llmdash.engines.catalog import load_engine
from llmdash.engines.model import EngineSpec
from llmdash.errors import EXIT_REMOTE, LlmdashError
from llmdash.panels.signals import Signals
from llmdash.vocabulary import ENGINE_LABEL, Role

NAIVE_THROUGHPUT_DROP = "NaiveThroughputDrop"
NAIVE_STATIC_LATENCY = "NaiveStaticLatencyP99"
NAIVE_ALERTS = (NAIVE_THROUGHPUT_DROP, NAIVE_STATIC_LATENCY)
DETECTION_SCENARIOS = ("kv-collapse", "one-bad-replica", "long-collapse")   # delays from the first preemption
QUIET_SCENARIOS = ("load-ramp", "idle", "restart", "steady", "prompt-growth")  # any firing is false
SCENARIOS = DETECTION_SCENARIOS + QUIET_SCENARIOS
SEEDS = (1, 2, 3, 4)
STEP_S = int(scenarios.SCRAPE_INTERVAL_S)
OPENMETRICS_SAMPLE = re.compile(r"^(?P<series>[^\s{]+(?:\{.*\})?) (?P<value>\S+) (?P<ts>\S+)$")
GOT_SAMPLE = re.compile(r"\{(?P<labels>[^{}]*)\} (?P<value>[-+0-9.eE]+)")


@dataclass(frozen=True)
class Firing:
    """One alert series (alert + its labels) from its first to its last firing, in seconds of scenario time."""

    alert: str
    model: str
    first_s: float
    last_s: float | None = None
    labels: tuple[tuple[str, str], ...] = ()

    def hits(self, model: str, target: dict[str, str]) -> bool:
        """True when it fired for `model` and, if it names an instance or cluster, for `target`'s."""
        labels = dict(self.labels)
        return self.model == model and all(labels.get(k, v) == v for k, v in target.items())


def alert_names(rule_model: dict) -> list[str]:
    """Alert names of a rule model, in file order, each once."""
    names = [rule["alert"] for group in rule_model["groups"] for rule in group["rules"] if "alert" in rule]
    return list(dict.fromkeys(names))


def naive_rules(spec: EngineSpec, config: Config) -> dict:
    """Two alerts an SRE might write without this project, from the same signals."""
    sig = Signals(spec, config, rule_scope(spec, config), config.divergence.window)
    d = config.divergence
    role = sig.token_latency_role or Role.TTFT   # a mean-only engine: the naive SRE puts the ITL threshold on the mean
    levels = config.thresholds.itl_p99_seconds if role != Role.TTFT else config.thresholds.ttft_p99_seconds
    threshold = levels.critical
    rules = [
        {"alert": NAIVE_THROUGHPUT_DROP, "expr": f"{sig.throughput_vs_baseline()} < {1 - d.throughput_band:g}",
         "for": d.alert_for, "labels": {ENGINE_LABEL: spec.id}},
        {"alert": NAIVE_STATIC_LATENCY, "expr": f"{sig.latency(role, window=d.window)} > {threshold:g}",
         "for": d.alert_for, "labels": {ENGINE_LABEL: spec.id}},
    ]
    return {"groups": [rule_group(f"naive-{spec.id}", config, rules)]}


def simulated_series(scenario: scenarios.Scenario, specs: dict[str, EngineSpec], seed: int,
                     onsets: dict[str, float | None] | None = None) -> dict[str, dict]:
    """Engine -> {series selector: {scrape index: value}} from the simulator's OpenMetrics output (`onsets`: as
    `scenarios.timed_scrapes`')."""
    text = io.StringIO()
    scenarios.write_openmetrics(scenario, specs, seed, 0, text, onsets=onsets)
    # an unprefixed name may belong to several engines (NIM's and older TensorRT-LLM's TTFT): the
    # engine whose catalog selectors (e.g. job="nim") the sample carries owns it, the most specific first
    owners: dict[str, list[str]] = {}
    for engine, spec in sorted(specs.items(), key=lambda item: -len(item[1].selectors)):
        for series in {series for metric in spec.metrics.values() for series in metric.scraped_series}:
            owners.setdefault(series, []).append(engine)
    per_engine: dict[str, dict] = {engine: {} for engine in specs}
    for line in text.getvalue().splitlines():
        match = OPENMETRICS_SAMPLE.match(line)
        if not match or line.startswith("#"):
            continue
        name = match["series"].split("{", 1)[0]
        engine = next((e for e in owners.get(name, ())
                       if all(f'{label}="{value}"' in match["series"] for label, value in specs[e].selectors)), None)
        if engine is not None:
            index = round(float(match["ts"]) / STEP_S)
            per_engine[engine].setdefault(match["series"], {})[index] = match["value"]
    return per_engine


def first_firings(spec: EngineSpec, config: Config, series: dict[str, dict], duration_s: float,
                  workdir: Path) -> list[Firing]:
    """Run promtool on one engine's scenario data; return every alert's first firing per model."""
    promtool = shutil.which("promtool")
    if promtool is None:
        raise LlmdashError("promtool not found: install Debian's prometheus package (apt-get install prometheus)")
    steps = int(duration_s // STEP_S)
    rule_files, alerts = [], []
    for name, model in (("rules", build_rules(spec, config)), ("naive", naive_rules(spec, config))):
        path = workdir / f"{spec.id}.{name}.yaml"
        path.write_text(yaml.safe_dump(model, sort_keys=False, width=10_000))
        rule_files.append(str(path))
        alerts += alert_names(model)
    inputs = [{"series": selector, "values": " ".join(values.get(i, "_") for i in range(steps + 1))}
              for selector, values in sorted(series.items())]
    end = f"{steps * STEP_S}s"
    checks = [{"expr": f'label_replace({fn}_over_time(timestamp(ALERTS{{alertname="{alert}", alertstate="firing"}})'
                       f'[{end}:{config.rules.evaluation_interval}]), "bench_when", "{fn}", "", "")',
               "eval_time": end, "exp_samples": []} for alert in alerts for fn in ("min", "max")]
    order = [group["name"] for path in rule_files for group in yaml.safe_load(Path(path).read_text())["groups"]]
    test = {"rule_files": rule_files, "evaluation_interval": config.rules.evaluation_interval,
            "group_eval_order": order,
            "tests": [{"interval": f"{STEP_S}s", "input_series": inputs, "promql_expr_test": checks}]}
    test_path = workdir / f"{spec.id}.test.yaml"
    test_path.write_text(yaml.safe_dump(test, sort_keys=False, width=10_000))
    result = subprocess.run([promtool, "test", "rules", str(test_path)], capture_output=True, text=True,
                            timeout=600)
    return _parse(result.stdout + result.stderr, result.returncode)


def _parse(output: str, returncode: int) -> list[Firing]:
    """Firings from promtool's report of the queries whose result was not empty."""
    if returncode == 0:
        return []
    spans: dict[tuple, dict[str, float]] = {}
    for line in output.splitlines():
        if not line.strip().startswith("got:"):
            continue
        for sample in GOT_SAMPLE.finditer(line):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', sample["labels"]))
            if "alertname" not in labels or "bench_when" not in labels:
                raise LlmdashError(f"unexpected promtool output: {line.strip()[:120]}", EXIT_REMOTE)
            when = labels.pop("bench_when")
            spans.setdefault(tuple(sorted(labels.items())), {})[when] = float(sample["value"])
    if not spans:
        raise LlmdashError(f"promtool failed: {output.strip().splitlines()[-1][:200]}", EXIT_REMOTE)
    firings = []
    for key, span in spans.items():
        labels = dict(key)
        firings.append(Firing(labels["alertname"], labels.get("model_name") or labels.get("model", "?"),
                              span["min"], span.get("max"), key))
    return firings


@dataclass(frozen=True)
class ScenarioRun:
    engine: str
    scenario: str
    onset_s: float
    affected_model: str
    firings: tuple[Firing, ...]
    seed: int = 1
    duration_s: float = 0.0
    affected_target: tuple[tuple[str, str], ...] = ()   # instance (and cluster) of the affected replica

    def delay_s(self, alert: str) -> float | None:
        """Delay from onset to the first firing on the affected model (and replica, when the alert
        names one); None if it never fired."""
        times = [f.first_s for f in self._hits(alert)]
        return min(times) - self.onset_s if times else None

    def fires_to_end(self, alert: str) -> bool:
        """Still firing for the affected model at the last evaluation of the scenario."""
        return any(f.last_s is not None and f.last_s >= self.duration_s - 2 * STEP_S for f in self._hits(alert))

    def _hits(self, alert: str) -> list[Firing]:
        target = dict(self.affected_target)
        return [f for f in self.firings if f.alert == alert and f.hits(self.affected_model, target)]

    def fired(self, alert: str) -> list[Firing]:
        return [f for f in self.firings if f.alert == alert]

    def wrongly_fired(self, alert: str) -> list[Firing]:
        """Firings on another model or replica than the affected one."""
        return [f for f in self.fired(alert) if f not in self._hits(alert)]


def _scenario(job: tuple[str, tuple[str, ...], Config, int]) -> list[ScenarioRun]:
    """Simulate one scenario with one seed and evaluate every engine's rules on it (one worker process)."""
    name, engines, config, seed = job
    specs = {engine: load_engine(engine) for engine in engines}
    scenario = scenarios.build(name)
    # a collapse starts when the KV budget is first exceeded, not when its load change starts
    first: dict[str, float | None] = {}
    data = simulated_series(scenario, specs, seed, first)
    onsets = first if name in DETECTION_SCENARIOS else {}
    replica, model = scenario.affected_replica(), scenario.models[0].name
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="llmdash-bench-") as tmp:
        for engine, spec in specs.items():
            firings = first_firings(spec, config, data[engine], scenario.duration_s, Path(tmp))
            onset = onsets.get(engine) or scenario.onset_s
            target = (("instance", replica.instance(engine, model)),) + (
                (("cluster", replica.cluster),) if replica.cluster else ())
            outcomes.append(ScenarioRun(engine, name, onset, model, tuple(firings), seed, scenario.duration_s, target))
    return outcomes


def run(engines: tuple[str, ...], config: Config, seed: int = 1, names: tuple[str, ...] = SCENARIOS,
        progress=lambda message: None, seeds: tuple[int, ...] | None = None) -> list[ScenarioRun]:
    """Outcomes for every engine, scenario and seed (`seeds`, else just `seed`); two jobs at a time."""
    for engine in engines:
        load_engine(engine)
    for name in names:
        scenarios.build(name)
    jobs = [(name, engines, config, s) for s in (seeds or (seed,)) for name in names]
    outcomes = []
    with ProcessPoolExecutor(max_workers=min(2, len(jobs))) as pool:
        for (name, _, _, s), result in zip(jobs, pool.map(_scenario, jobs)):
            progress(f"{name} seed {s}: simulated and evaluated for {len(engines)} engines")
            outcomes.extend(result)
    return outcomes


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:+.1f}"


def _detection_cell(runs: list[ScenarioRun], alert: str) -> str:
    """min / median / max delay over the seeds (minutes from the first preemption), misses and stray firings."""
    delays = [d for d in (o.delay_s(alert) for o in runs) if d is not None]
    text = "missed" if not delays else (
        f"{_minutes(min(delays))} / {_minutes(statistics.median(delays))} / {_minutes(max(delays))}")
    if delays and len(delays) < len(runs):
        text += f", missed {len(runs) - len(delays)}/{len(runs)}"
    elif len(delays) and runs[0].scenario == "long-collapse":
        ended = sum(o.fires_to_end(alert) for o in runs)
        text += ", firing at the end" if ended == len(runs) else f", resolved early in {len(runs) - ended}/{len(runs)}"
    stray = sorted({f"{f.model}" + (f" {dict(f.labels)['instance']}" if "instance" in dict(f.labels) else "")
                    for o in runs for f in o.wrongly_fired(alert)})
    return text + (f", also on {', '.join(stray[:3])}{' ...' if len(stray) > 3 else ''}" if stray else "")


def _quiet_cell(runs: list[ScenarioRun], alert: str) -> str:
    fired = [o for o in runs if o.fired(alert)]
    if not fired:
        return "silent"
    first = min(f.first_s - o.onset_s for o in fired for f in o.fired(alert))
    return f"FALSE in {len(fired)}/{len(runs)} ({_minutes(first)} min)"


def _rows(outcomes: list[ScenarioRun], engines: tuple[str, ...], config: Config):
    """(engine, alert, {scenario: cell}) for every alert of every engine's rules and the naive ones."""
    names = [s for s in SCENARIOS if any(o.scenario == s for o in outcomes)]
    for engine in engines:
        spec = load_engine(engine)
        by_scenario = {name: [o for o in outcomes if o.engine == engine and o.scenario == name] for name in names}
        for alert in alert_names(build_rules(spec, config)) + list(NAIVE_ALERTS):
            cells = {name: (_detection_cell if name in DETECTION_SCENARIOS else _quiet_cell)(runs, alert)
                     for name, runs in by_scenario.items()}
            yield engine, alert, cells


def table(outcomes: list[ScenarioRun], engines: tuple[str, ...], config: Config | None = None) -> str:
    """Markdown: one row per engine and alert, one column per scenario.

    Detection columns (kv-collapse, one-bad-replica, long-collapse) give min / median / max delays in
    minutes from the first preemption of the collapsing replica over the seeds; the other columns say
    in how many seeds the alert fired at all (any firing there is false)."""
    config = config or Config()
    names = [s for s in SCENARIOS if any(o.scenario == s for o in outcomes)]
    seeds = sorted({o.seed for o in outcomes})
    lines = [f"Seeds {', '.join(map(str, seeds))}; detection cells: min / median / max minutes from the first "
             "preemption of the collapsing replica; other cells: seeds in which the alert fired (false).", "",
             "| engine | alert | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for engine, alert, cells in _rows(outcomes, engines, config):
        lines.append(f"| {engine} | {alert} | " + " | ".join(cells[n] for n in names) + " |")
    return "\n".join(lines) + "\n"


def summary(outcomes: list[ScenarioRun], engines: tuple[str, ...], config: Config | None = None) -> str:
    """One line per engine: the fastest alert's median per detection scenario, and every false firing."""
    config = config or Config()
    lines = []
    for engine in engines:
        runs = [o for o in outcomes if o.engine == engine]
        parts = []
        for name in (n for n in DETECTION_SCENARIOS if any(o.scenario == n for o in runs)):
            alerts = alert_names(build_rules(load_engine(engine), config))
            medians = {a: statistics.median(d) for a in alerts
                       if (d := [x for x in (o.delay_s(a) for o in runs if o.scenario == name) if x is not None])}
            best = min(medians, key=medians.get) if medians else None
            parts.append(f"{name}: " + (f"{best} {_minutes(medians[best])} min median" if best else "missed"))
        false = sorted({f"{a}@{o.scenario}" for o in runs if o.scenario in QUIET_SCENARIOS
                        for a in alert_names(build_rules(load_engine(engine), config)) if o.fired(a)})
        parts.append("false firings: " + (", ".join(false) if false else "none"))
        lines.append(f"{engine}: " + "; ".join(parts))
    return "\n".join(lines) + "\n"
