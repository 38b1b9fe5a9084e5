"""`llmdash demo`: the dashboards on a KV-cache collapse, end to end, on a local Prometheus.

Builds the dashboards, simulates the `kv-collapse` scenario for every engine, backfills
it into a throw-away Prometheus, evaluates every panel and annotation exactly as stored
in the dashboards, draws one PNG per engine and says when each annotation fired
relative to the onset.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Callable

from llmdash.build import build_dashboards
from llmdash.durations import seconds
from llmdash.lab.evaluate import DashboardResult, evaluate_dashboard
from llmdash.lab.promserver import PrometheusServer, load_scenarios
from llmdash.lab.render import render_dashboard
from llmdash.engines.catalog import load_engine
from llmdash.errors import LlmdashError
from llmdash.lab.emitters import simulated_engines
from llmdash.lab.scenarios import PRIMARY

SCENARIO = "kv-collapse"
SHOWN_BEFORE_ONSET_S = 45 * 60
STEP_S = 15.0
ROW = "Throughput vs latency"


def _model_points(result: DashboardResult, title: str, label: str):
    try:
        panel = result.panel(title, ROW)
    except KeyError:
        return None
    for series in panel.targets[0].series if panel.targets else []:
        if series.labels.get(label) == PRIMARY:
            return series.points
    return None


def _change(points, onset: float, end: float) -> tuple[float, float] | None:
    before = [v for t, v in points if onset - 1800 <= t < onset]
    after = [v for t, v in points if onset + 600 <= t <= end]
    return (statistics.mean(before), statistics.mean(after)) if before and after else None


def summarise(engine: str, result: DashboardResult, onset: float, end: float) -> str:
    """One paragraph: annotation timing relative to the onset, and what the key panels did."""
    label = load_engine(engine).model_label
    lines = [f"{engine} ({PRIMARY}):"]
    for name, regions in result.annotations.items():
        if not any(key in name for key in ("Divergence", "Preemption")):
            continue
        mine = [r for r in regions if r.labels.get(label) == PRIMARY]
        if not mine:
            lines.append(f"  {name}: did not fire")
            continue
        spans = ", ".join(f"{(r.start - onset) / 60:+.1f}..{(r.end - onset) / 60:+.1f} min" for r in mine[:4])
        more = f" (+{len(mine) - 4} more)" if len(mine) > 4 else ""
        lines.append(f"  {name}: fired {spans}{more} after the onset")
    for title in ("Output tokens/s", "ITL p99", "TPOT p99", "TTFT p99", "Mean time per token"):
        points = _model_points(result, title, label)
        change = _change(points, onset, end) if points else None
        if change:
            before, after = change
            lines.append(f"  {title}: {before:.3g} -> {after:.3g} (x{after / before:.2f}) "
                         "30 min before vs from 10 min after the onset")
    return "\n".join(lines)


def evaluate(dashboard: dict, server: PrometheusServer, window) -> DashboardResult:
    """The dashboard over what the demo shows of `window`: from SHOWN_BEFORE_ONSET_S before its onset to its end."""
    return evaluate_dashboard(dashboard, server, window.onset - SHOWN_BEFORE_ONSET_S, window.end, STEP_S)


def run_demo(config, out_dir: Path, seed: int = 1, progress: Callable[[str], None] = print) -> list[Path]:
    """Write out_dir/<engine>.png for every built dashboard; return the paths."""
    started = time.monotonic()

    def say(message: str) -> None:
        progress(f"[{time.monotonic() - started:5.1f}s] {message}")

    dashboards = build_dashboards(config)
    specs = {e: load_engine(e) for e in dashboards if e != "fleet"}
    engines = [e for e in simulated_engines(specs) if e in dashboards]
    if not engines:
        raise LlmdashError(f"no built dashboard has a simulator emitter (built: {', '.join(dashboards)})")
    say(f"built {len(dashboards)} dashboards: {', '.join(dashboards)}")
    server = PrometheusServer()
    try:
        say(f"simulating the {SCENARIO} scenario for {len(engines)} engines (105 minutes of traffic)")
        window = load_scenarios(server, [SCENARIO], engines, seed, progress=say)[SCENARIO]
        server.start()
        say(f"local Prometheus ready on {server.url}")
        # the data starts with the scenario: the divergence baselines (a window ending baseline_offset
        # ago) have their first values one offset later, and are whole one window after that
        warmup_end = window.start + seconds(config.divergence.baseline_offset)
        paths, summaries = [], []
        for engine in engines:
            result = evaluate(dashboards[engine], server, window)
            heading = (f"{dashboards[engine].get('title', engine)} — simulated {SCENARIO}, "
                       "x axis: minutes from the onset (dashed)")
            paths.append(render_dashboard(result, out_dir / f"{engine}.png", window.onset, heading,
                                          load_engine(engine), warmup_end))
            summaries.append(summarise(engine, result, window.onset, window.end))
            say(f"wrote {paths[-1]}")
    finally:
        server.stop()
    progress("\nWhen the annotations fired (onset = prompts start growing past the KV budget):")
    for summary in summaries:
        progress(summary)
    return paths
