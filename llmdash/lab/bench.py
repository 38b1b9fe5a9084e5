"""Detection quality: when do the alerts fire on the simulator's scenarios, next to naive baselines?

Each scenario's simulated scrapes become `promtool test rules` input series (15 s resolution, missed
scrapes left out), evaluated by Prometheus' own rule engine together with the engine's generated
rule file and two naive alerts built from the same signals: a throughput drop, and a static latency
p99 threshold. The first firing time of every alert is read back from the `ALERTS` series that the
rule engine writes, with one query per alert; promtool prints what a query returned when it differs
from the (empty) expectation, and that printout is parsed.
"""

from __future__ import annotations

import io
from concurrent.futures import ProcessPoolExecutor
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from llmdash.config import Config
from llmdash.rules.generate import ALERT_NAMES, ITL_HIGH, PREEMPTIONS_HIGH, TTFT_HIGH, build_rules, rule_scope
from llmdash.lab import scenarios
from llmdash.engines.catalog import EngineSpec, load_engine
from llmdash.errors import EXIT_REMOTE, LlmdashError
from llmdash.panels.signals import ENGINE_LABEL, Signals

NAIVE_THROUGHPUT_DROP = "NaiveThroughputDrop"
NAIVE_STATIC_LATENCY = "NaiveStaticLatencyP99"
NAIVE_ALERTS = (NAIVE_THROUGHPUT_DROP, NAIVE_STATIC_LATENCY)
# What an engine lacks when its rule file has no such alert.
MISSING_SIGNAL = {PREEMPTIONS_HIGH: "preemption metric", TTFT_HIGH: "TTFT histogram", ITL_HIGH: "ITL or TPOT histogram"}
SCENARIOS = ("kv-collapse", "load-ramp", "idle", "restart", "steady")
STEP_S = int(scenarios.SCRAPE_INTERVAL_S)
OPENMETRICS_SAMPLE = re.compile(r"^(?P<series>[^\s{]+(?:\{.*\})?) (?P<value>\S+) (?P<ts>\S+)$")
GOT_SAMPLE = re.compile(r"\{(?P<labels>[^{}]*)\} (?P<value>[-+0-9.eE]+)")


@dataclass(frozen=True)
class Firing:
    """An alert's first firing for one model, in seconds of scenario time."""

    alert: str
    model: str
    first_s: float


def naive_rules(spec: EngineSpec, config: Config) -> dict:
    """Two alerts an SRE might write without this project, from the same signals."""
    sig = Signals(spec, config, rule_scope(config), config.divergence.window)
    d = config.divergence
    role = sig.token_latency_role or "ttft"
    threshold = (config.thresholds.itl_p99_seconds if role != "ttft" else config.thresholds.ttft_p99_seconds).critical
    rules = [
        {"alert": NAIVE_THROUGHPUT_DROP, "expr": f"{sig.throughput_vs_baseline()} < {1 - d.throughput_band:g}",
         "for": d.alert_for, "labels": {ENGINE_LABEL: spec.id}},
        {"alert": NAIVE_STATIC_LATENCY, "expr": f"{sig.quantile(role, 0.99, window=d.window)} > {threshold:g}",
         "for": d.alert_for, "labels": {ENGINE_LABEL: spec.id}},
    ]
    return {"groups": [{"name": f"naive-{spec.id}", "interval": config.rules.interval, "rules": rules}]}


def simulated_series(scenario: scenarios.Scenario, specs: dict[str, EngineSpec], seed: int) -> dict[str, dict]:
    """Engine -> {series selector: {scrape index: value}} from the simulator's OpenMetrics output."""
    text = io.StringIO()
    scenarios.write_openmetrics(scenario, specs, seed, 0, text)
    owners = {series: engine for engine, spec in specs.items()
              for metric in spec.metrics.values() for series in metric.scraped_series}
    per_engine: dict[str, dict] = {engine: {} for engine in specs}
    for line in text.getvalue().splitlines():
        match = OPENMETRICS_SAMPLE.match(line)
        if not match or line.startswith("#"):
            continue
        name = match["series"].split("{", 1)[0]
        engine = owners.get(name)
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
    rule_files = []
    for name, model in (("rules", build_rules(spec, config)), ("naive", naive_rules(spec, config))):
        path = workdir / f"{spec.id}.{name}.yaml"
        path.write_text(yaml.safe_dump(model, sort_keys=False, width=10_000))
        rule_files.append(str(path))
    inputs = [{"series": selector, "values": " ".join(values.get(i, "_") for i in range(steps + 1))}
              for selector, values in sorted(series.items())]
    end = f"{steps * STEP_S}s"
    checks = [{"expr": f'min_over_time(timestamp(ALERTS{{alertname="{alert}", alertstate="firing"}})'
                       f"[{end}:{config.rules.interval}])",
               "eval_time": end, "exp_samples": []} for alert in ALERT_NAMES + NAIVE_ALERTS]
    test = {"rule_files": rule_files, "evaluation_interval": config.rules.interval,
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
    firings = []
    for line in output.splitlines():
        if not line.strip().startswith("got:"):
            continue
        for sample in GOT_SAMPLE.finditer(line):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', sample["labels"]))
            if "alertname" not in labels:
                raise LlmdashError(f"unexpected promtool output: {line.strip()[:120]}", EXIT_REMOTE)
            firings.append(Firing(labels["alertname"], labels.get("model_name") or labels.get("model", "?"),
                                  float(sample["value"])))
    if not firings:
        raise LlmdashError(f"promtool failed: {output.strip().splitlines()[-1][:200]}", EXIT_REMOTE)
    return firings


@dataclass(frozen=True)
class Outcome:
    engine: str
    scenario: str
    onset_s: float
    affected_model: str
    firings: tuple[Firing, ...]

    def delay_s(self, alert: str) -> float | None:
        """Delay from onset to the first firing on the affected model; None if it never fired."""
        times = [f.first_s for f in self.firings if f.alert == alert and f.model == self.affected_model]
        return min(times) - self.onset_s if times else None

    def fired(self, alert: str) -> list[Firing]:
        return [f for f in self.firings if f.alert == alert]


def _scenario(job: tuple[str, tuple[str, ...], Config, int]) -> list[Outcome]:
    """Simulate one scenario and evaluate every engine's rules on it (one worker process)."""
    name, engines, config, seed = job
    specs = {engine: load_engine(engine) for engine in engines}
    scenario = scenarios.build(name)
    data = simulated_series(scenario, specs, seed)
    # a collapse starts when the KV budget is first exceeded, not when its load change starts
    onsets = scenarios.first_preemption(scenario, specs, seed) if name == "kv-collapse" else {}
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="llmdash-bench-") as tmp:
        for engine, spec in specs.items():
            firings = first_firings(spec, config, data[engine], scenario.duration_s, Path(tmp))
            onset = onsets.get(engine) or scenario.onset_s
            outcomes.append(Outcome(engine, name, onset, scenario.models[0].name, tuple(firings)))
    return outcomes


def run(engines: tuple[str, ...], config: Config, seed: int = 1, names: tuple[str, ...] = SCENARIOS,
        progress=lambda message: None) -> list[Outcome]:
    """Outcomes for every engine and scenario; scenarios run in parallel, two at a time."""
    for engine in engines:
        load_engine(engine)
    jobs = [(name, engines, config, seed) for name in names]
    outcomes = []
    with ProcessPoolExecutor(max_workers=min(2, len(jobs))) as pool:
        for name, result in zip(names, pool.map(_scenario, jobs)):
            progress(f"{name}: simulated and evaluated for {len(engines)} engines")
            outcomes.extend(result)
    return outcomes


def _cell(outcome: Outcome, alert: str) -> str:
    if outcome.scenario == "kv-collapse":
        delay = outcome.delay_s(alert)
        wrong = {f.model for f in outcome.fired(alert)} - {outcome.affected_model}
        text = "missed" if delay is None else f"+{delay / 60:.1f} min" if delay >= 0 else f"{delay / 60:.1f} min (before the first preemption)"
        return text + (f", also on {', '.join(sorted(wrong))}" if wrong else "")
    fired = outcome.fired(alert)
    if not fired:
        return "silent"
    first = min(f.first_s for f in fired) - outcome.onset_s
    return f"FALSE ({first / 60:+.1f} min)"


def alerts_in_rules(spec: EngineSpec, config: Config) -> set[str]:
    """The alerts the engine's generated rule file contains."""
    return {rule["alert"] for group in build_rules(spec, config)["groups"] for rule in group["rules"]
            if "alert" in rule}


def table(outcomes: list[Outcome], engines: tuple[str, ...], config: Config) -> str:
    """Markdown: one row per engine and alert, one column per scenario.

    kv-collapse cells are delays from the first preemption of the collapsing model (the KV budget
    exceeded); other cells say whether the alert fired at all (any firing there is false). An alert
    the engine's rule file does not contain is "n/a", never "missed"."""
    names = [s for s in SCENARIOS if any(o.scenario == s for o in outcomes)]
    header = "| engine | alert | " + " | ".join(names) + " |\n|---|---|" + "---|" * len(names) + "\n"
    lines = []
    for engine in engines:
        present = alerts_in_rules(load_engine(engine), config)
        for alert in ALERT_NAMES + NAIVE_ALERTS:
            row = {o.scenario: o for o in outcomes if o.engine == engine}
            if alert in ALERT_NAMES and alert not in present:
                cells = [f"n/a (engine has no {MISSING_SIGNAL.get(alert, 'such alert')})"] * len(names)
            else:
                cells = [_cell(row[name], alert) for name in names]
            lines.append(f"| {engine} | {alert} | " + " | ".join(cells) + " |")
    return header + "\n".join(lines) + "\n"
