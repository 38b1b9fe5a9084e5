"""Recording and alerting rules replayed over backfilled data, on Prometheus and on VictoriaMetrics.

Why: a ruler evaluates only at the current time, and backfilled scenarios are hours old. Each backend
has its own way to evaluate rules over the past: `promtool tsdb create-blocks-from rules` for
Prometheus (recording rules only), vmalert's replay mode for VictoriaMetrics. Neither lets a rule
read a series recorded in the same pass, so the rules are replayed one dependency level at a time.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from llmdash.errors import LlmdashError
from llmdash.lab.promserver import PrometheusServer, QueryAPI
from llmdash.lab.vmserver import VictoriaMetricsServer, vmalert_replay
from llmdash.redact import safe_line

NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def levels(model: dict) -> tuple[list[dict], dict]:
    """(recording rules split by dependency level, each a rule file model; the alerts as one model).
    Level 1 reads scraped series only; level n reads a series recorded at level n-1."""
    level: dict[str, int] = {}
    for group in model["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                used = [level[name] for name in NAME.findall(rule["expr"]) if name in level]
                level[rule["record"]] = max(level.get(rule["record"], 0), 1 + max(used, default=0))
    depth = max(level.values(), default=0)
    recorded = [{"groups": [{**g, "rules": [r for r in g["rules"] if level.get(r.get("record")) == n]}
                            for g in model["groups"]]} for n in range(1, depth + 1)]
    alerts = {"groups": [{**g, "rules": [r for r in g["rules"] if "alert" in r]} for g in model["groups"]]}
    strip = lambda m: {"groups": [g for g in m["groups"] if g["rules"]]}   # noqa: E731
    return [strip(m) for m in recorded], strip(alerts)


def _write(model: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(model, sort_keys=False, width=10_000))
    return path


def prometheus_record(server: PrometheusServer, models: list[dict], start: float, end: float) -> None:
    """Backfill every recording rule of `models` into `server` over [start, end], level by level."""
    per_level = [levels(m)[0] for m in models]
    for n in range(max(map(len, per_level), default=0)):
        files = [_write(rules[n], server.dir / f"record-{i}-{n}.yaml") for i, rules in enumerate(per_level)
                 if n < len(rules)]
        result = subprocess.run([server.promtool, "tsdb", "create-blocks-from", "rules", f"--url={server.url}",
                                 f"--start={int(start)}", f"--end={int(end)}", f"--output-dir={server.data}",
                                 "--quiet", *map(str, files)], capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            lines = (result.stderr or result.stdout).strip().splitlines() or ["no output"]
            raise LlmdashError(f"promtool could not backfill recording rules: {safe_line(lines[-1], limit=300)}")
        server.restart()


def vmalert_record(vm: VictoriaMetricsServer, models: list[dict], start: float, end: float) -> None:
    """Replay every recording rule of `models` with vmalert into `vm` over [start, end], level by level."""
    per_level = [levels(m)[0] for m in models]
    for n in range(max(map(len, per_level), default=0)):
        files = [_write(rules[n], vm.dir / f"record-{i}-{n}.yaml") for i, rules in enumerate(per_level)
                 if n < len(rules)]
        vmalert_replay(files, vm, vm, start, end)


def vmalert_alerts(datasource: QueryAPI, write_to: VictoriaMetricsServer, models: list[dict], start: float,
                   end: float, labels: dict[str, str]) -> None:
    """Replay the alerting rules of `models` over [start, end] reading `datasource` (recorded series must be
    there already); `ALERTS` lands in `write_to` with `labels` added, to tell the datasources apart."""
    files = [_write(levels(m)[1], write_to.dir / f"alerts-{datasource.name}-{i}.yaml") for i, m in enumerate(models)]
    vmalert_replay(files, datasource, write_to, start, end, labels)
