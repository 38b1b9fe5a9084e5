"""Recording and alerting rules replayed over backfilled data, on Prometheus and on VictoriaMetrics.

Why: a ruler evaluates only at the current time, and backfilled scenarios are hours old. Each backend
has its own way to evaluate rules over the past: `promtool tsdb create-blocks-from rules` for
Prometheus (recording rules only), vmalert's replay mode for VictoriaMetrics. Neither lets a rule
read a series recorded in the same pass, so the rules are replayed one dependency level at a time.

Evaluation instants matter as much as the query engine. A live Prometheus evaluates a group at a fixed
phase within its interval (a hash of the group's name and file, `rules.Group.EvalTimestamp`), every rule
of the group in order at that instant, so a rule reads the series recorded just before it in the same
evaluation. The backfill keeps that: every level of one rule file is written under the same relative
name, so every level is evaluated at the group's phase, and the phase is the same in every run (a path
under a temporary directory would give a new phase, and a new answer for chained rules, each run).
vmalert evaluates at multiples of its interval instead; replays that are to be compared with
Prometheus's are started at Prometheus's phase, so both backends answer at the same instants and what
differs is the query engine alone.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from llmdash.durations import seconds
from llmdash.errors import LlmdashError
from llmdash.lab.promserver import PrometheusServer, QueryAPI
from llmdash.lab.vmserver import VictoriaMetricsServer, vmalert_replay
from llmdash.redact import safe_line

INTERVAL = "1m"            # the replays' evaluation interval (and every group's, where it sets none)
# promtool writes 2 h blocks and evaluates a block up to its last whole second: a phase in the interval's
# last second would lose one evaluation per block
LAST_SAFE_PHASE_S = seconds(INTERVAL) - 1


def levels(model: dict) -> tuple[list[dict], dict]:
    """(recording rules split by dependency level, each a rule file model; the alerts as one model).
    Level 1 reads scraped series only; level n reads a series recorded at level n-1, wherever in the
    file that series is defined."""
    recorded = {r["record"] for g in model["groups"] for r in g["rules"] if "record" in r}
    reads = {r["record"]: {d for d in recorded if d != r["record"]
                           and re.search(rf"(?<![\w:]){re.escape(d)}(?![\w:])", r["expr"])}
             for g in model["groups"] for r in g["rules"] if "record" in r}
    level: dict[str, int] = {}
    for _ in range(len(reads) + 1):
        level = {name: 1 + max((level.get(d, 0) for d in deps), default=0) for name, deps in reads.items()}
    depth = max(level.values(), default=0)
    recorded_levels = [{"groups": [{**g, "rules": [r for r in g["rules"] if level.get(r.get("record")) == n]}
                                   for g in model["groups"]]} for n in range(1, depth + 1)]
    alerts = {"groups": [{**g, "rules": [r for r in g["rules"] if "alert" in r]} for g in model["groups"]]}
    strip = lambda m: {"groups": [g for g in m["groups"] if g["rules"]]}   # noqa: E731
    return [strip(m) for m in recorded_levels], strip(alerts)


def _write(model: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(model, sort_keys=False, width=10_000))
    return path


def prometheus_record(server: PrometheusServer, models: list[dict], start: float, end: float) -> dict[str, float]:
    """Backfill every recording rule of `models` into the running `server` over [start, end], level by level,
    each model's levels under one file name (`record-<i>.yaml`, relative to the server's directory) so a
    group's levels share its phase. Returns each group's phase: seconds after a multiple of the interval."""
    per_level = [levels(m)[0] for m in models]
    phases: dict[str, float] = {}
    for n in range(max(map(len, per_level), default=0)):
        names = [_write(rules[n], server.dir / f"record-{i}.yaml").name for i, rules in enumerate(per_level)
                 if n < len(rules)]
        result = subprocess.run([server.promtool, "tsdb", "create-blocks-from", "rules", f"--url={server.url}",
                                 f"--start={int(start)}", f"--end={int(end)}", f"--output-dir={server.data}",
                                 f"--eval-interval={INTERVAL}", "--quiet", *names],
                                capture_output=True, text=True, timeout=600, cwd=server.dir)
        if result.returncode != 0:
            lines = (result.stderr or result.stdout).strip().splitlines() or ["no output"]
            raise LlmdashError(f"promtool could not backfill recording rules: {safe_line(lines[-1], limit=300)}")
        server.restart()
        if n == 0:
            phases = _phases(server, [rules[0] for rules in per_level if rules], start, end)
    return phases


def _phases(server: QueryAPI, first_level: list[dict], start: float, end: float) -> dict[str, float]:
    """Each group's evaluation phase, read from the timestamps of the series its first level recorded."""
    interval = seconds(INTERVAL)
    phases = {}
    for group in (g for model in first_level for g in model["groups"]):
        stamps: list[float] = []
        for rule in group["rules"]:   # the first rule that recorded anything
            found = server.query_range(f"max(timestamp({_selector(rule)}))", start, end, interval)
            stamps = [float(v) for r in found for _, v in r["values"]]
            if stamps:
                break
        if not stamps:
            continue
        phase = round((stamps[-1] - start) % interval, 3)
        if phase > LAST_SAFE_PHASE_S:
            raise LlmdashError(f"group {group['name']!r} is evaluated {phase:g} s into the interval, where promtool "
                               "skips one evaluation per block: rename its rule file")
        phases[group["name"]] = phase
    return phases


def _selector(rule: dict) -> str:
    """The series a recording rule writes: its name and its own labels (another file may record the same name)."""
    labels = ", ".join(f'{k}="{v}"' for k, v in sorted(rule.get("labels", {}).items()))
    return f"{rule['record']}{{{labels}}}"


def _by_phase(models: list[dict], phases: dict[str, float]) -> dict[float, list[dict]]:
    """The groups of `models` gathered by the phase they are replayed at (0 where none is given)."""
    out: dict[float, list[dict]] = {}
    for group in (g for m in models for g in m["groups"]):
        out.setdefault(phases.get(group["name"], 0.0), []).append(group)
    return out


def vmalert_record(vm: VictoriaMetricsServer, models: list[dict], start: float, end: float,
                   phases: dict[str, float] | None = None) -> None:
    """Replay every recording rule of `models` with vmalert into `vm` over [start, end], level by level,
    each group at its phase (from `prometheus_record`, to compare with Prometheus; else on the interval)."""
    per_level = [levels(m)[0] for m in models]
    for n in range(max(map(len, per_level), default=0)):
        level = [rules[n] for rules in per_level if n < len(rules)]
        for phase, groups in _by_phase(level, phases or {}).items():
            path = _write({"groups": groups}, vm.dir / f"record-{n}-{phase:g}.yaml")
            vmalert_replay([path], vm, vm, start + phase, end, interval=INTERVAL)


def vmalert_alerts(datasource: QueryAPI, write_to: VictoriaMetricsServer, models: list[dict], start: float,
                   end: float, labels: dict[str, str], phases: dict[str, float] | None = None) -> None:
    """Replay the alerting rules of `models` over [start, end] reading `datasource` (recorded series must be
    there already), each group at its phase; `ALERTS` lands in `write_to` with `labels` added, to tell
    the datasources apart."""
    alerts = [levels(m)[1] for m in models]
    for phase, groups in _by_phase(alerts, phases or {}).items():
        path = _write({"groups": groups}, write_to.dir / f"alerts-{datasource.name}-{phase:g}.yaml")
        vmalert_replay([path], datasource, write_to, start + phase, end, labels, interval=INTERVAL)
