"""Query cost of one dashboard load: samples read and evaluation time, per dashboard, raw and recorded.

Why: at hundreds of instances a dashboard that reads raw histograms errors out (Prometheus stops a
query past --query.max-samples, 50 M by default) or takes seconds per panel. This loads a synthetic
vLLM fleet (`instances` per model x 2 models, 15 s scrapes or 60 s for a day, the catalog's names, labels
and buckets; a cheap generator, not the simulator) into a real Prometheus with `promtool`, backfills the
recording rules level by level (`promtool tsdb create-blocks-from rules`), and evaluates every panel target
and annotation of each dashboard as Grafana would: one range query over the load's range with `stats=all`,
step = range / the panel's max data points (1000 where unset) rounded up to the scrape interval (at least
the target's min interval), `$__rate_interval` = max(4 x scrape interval, step + scrape interval), every
variable = All (`.*`). vLLM's own overview dashboard (read from a file outside the repository, never
copied) is measured the same way as the reference.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path


from llmdash.build import build_dashboards, build_rule_files
from llmdash.config import Config
from llmdash.dashboards import variables
from llmdash.durations import seconds
from llmdash.dashboards.walk import walk_panels
from llmdash.engines.catalog import load_engine
from llmdash.engines.model import EngineSpec
from llmdash.errors import LlmdashError
from llmdash.inputs import read_text
from llmdash.lab import replay
from llmdash.lab.promserver import PrometheusServer

SCRAPE_S = 15
POINTS = 1000                      # Grafana's default max data points for a panel of ~1000 px
# promtool parses its whole input once per block it writes (2 h by default): a day of data in blocks of up to
# 54 h (the largest TSDB range at or below this) takes one or two passes instead of fourteen
BLOCK_DURATION = "54h"
ANCHOR_NAME = "vLLM overview (anchor)"
ANCHOR_MAX_BYTES = 16 << 20   # the overview is about 100 KB; a file far larger is not it, and is never read whole
MAX_SAMPLES = 50_000_000           # Prometheus' default --query.max-samples
MODELS = ("llama-3.1-8b-instruct", "qwen2.5-7b-instruct")
SELECTED_METRIC = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")


def grafana_step(range_s: float, points: int = POINTS, scrape_s: int = SCRAPE_S) -> int:
    """Grafana's interval for `points` (the panel's max data points) over the range, never below the scrape
    interval."""
    return max(scrape_s, math.ceil(range_s / points / scrape_s) * scrape_s)


def query_as_sent(expr: str, range_s: float, step: int, scrape_s: int = SCRAPE_S) -> str:
    """The query Grafana sends: built-in intervals filled in, every template variable = All."""
    return variables.substitute(expr, {}, step, range_s, scrape_s, default=variables.ALL)


@dataclass(frozen=True)
class Query:
    """One query Grafana sends for a dashboard load."""

    title: str
    expr: str
    instant: bool = False          # a table/stat target marked instant: one evaluation at the end
    min_step_s: int = 0            # the target's (or panel's) `interval`: Grafana never steps finer
    points: int = POINTS           # the panel's `maxDataPoints`: Grafana steps range / points


def dashboard_queries(model: dict) -> list[Query]:
    """Every Prometheus target of every panel (rows included) and every annotation query."""
    out = []
    for panel in (placed.panel for placed in walk_panels(model)):
        for target in panel.get("targets", []):
            if target.get("expr"):
                interval = target.get("interval") or panel.get("interval") or ""
                out.append(Query(panel.get("title", "?"), target["expr"],
                                 bool(target.get("instant")) and not target.get("range"), _step(interval),
                                 panel.get("maxDataPoints") or POINTS))
    for annotation in model.get("annotations", {}).get("list", []):
        target = annotation.get("target") or {}
        expr = target.get("expr") or annotation.get("expr")
        if expr:
            out.append(Query(f"annotation: {annotation.get('name')}", expr,
                             min_step_s=_step(target.get("interval") or annotation.get("step") or "")))
    return out


def _step(interval: str) -> int:
    """Seconds of a Grafana min interval such as "60s" or "1m" (">" prefix allowed); 0 when unset or not a
    duration (a variable such as $__interval sets no minimum)."""
    try:
        return int(seconds(interval.strip().removeprefix(">")))
    except ValueError:
        return 0


def _series_names(spec: EngineSpec, anchor: dict | None) -> dict[str, tuple[str, tuple[float, ...] | None]]:
    """Metric name -> (type, buckets) to generate: the catalog's newest series, plus every vLLM metric the
    anchor dashboard reads that the catalog does not list (counters, gauges or histograms by suffix), so
    the reference dashboard pays for the data it would read on a real server."""
    newest = spec.supported_to
    names = {m.name: (m.type, m.buckets) for m in spec.metrics.values() if m.exposed_in(newest, newest)}
    itl_buckets = spec.metrics["vllm:inter_token_latency_seconds"].buckets
    for query in dashboard_queries(anchor or {}):
        for name in set(SELECTED_METRIC.findall(query.expr)):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if base in names or name in names:
                continue
            if base != name:
                names[base] = ("histogram", itl_buckets)
            else:
                names[name] = ("counter" if name.endswith("_total") else "gauge", None)
    return names


def write_fleet(path: Path, spec: EngineSpec, instances: int, hours: float, end: float,
                anchor: dict | None = None, scrape_s: int = SCRAPE_S) -> int:
    """OpenMetrics for `instances` replicas x 2 models of vLLM with steady traffic scraped every `scrape_s`, one
    series at a time (promtool accepts series-major order); returns the samples written."""
    names = _series_names(spec, anchor)
    steps = int(hours * 3600 // scrape_s)
    stamps = [f" {end - (steps - k) * scrape_s:.0f}\n" for k in range(steps + 1)]
    elapsed = [k * scrape_s for k in range(steps + 1)]
    samples = 0
    with open(path, "w") as out:
        def series(name: str, values) -> None:
            nonlocal samples
            out.write("".join([f"{name} {v}{t}" for v, t in zip(values, stamps)]))
            samples += len(stamps)

        for metric, (kind, buckets) in names.items():
            family = metric[: -len("_total")] if kind == "counter" and metric.endswith("_total") else metric
            out.write(f"# TYPE {family} {kind}\n")
            for m, model in enumerate(MODELS):
                for i in range(instances):
                    labels = f'job="vllm",instance="vllm-{i}:8000",model_name="{model}",engine="0"'
                    rate = 1.0 + ((i * 7 + m * 3) % 10) / 10          # requests/s, differs per replica
                    if kind == "gauge":
                        series(f"{metric}{{{labels}}}", [(k % 40) / 40 for k in range(len(stamps))])
                    elif kind == "counter":
                        series(f"{metric}{{{labels}}}", [int(rate * e) for e in elapsed])
                    else:
                        counts = [int(rate * e) for e in elapsed]
                        for j, bound in enumerate(buckets):
                            share = min(1.0, 1.5 * (j + 1) / len(buckets))
                            series(f'{metric}_bucket{{{labels},le="{spec.le(bound)}"}}',
                                   [int(c * share) for c in counts])
                        series(f'{metric}_bucket{{{labels},le="+Inf"}}', counts)
                        series(f"{metric}_count{{{labels}}}", counts)
                        series(f"{metric}_sum{{{labels}}}", [c * 0.05 for c in counts])
        out.write("# EOF\n")
    return samples


@dataclass(frozen=True)
class Cost:
    title: str
    samples: int
    seconds: float


def measure(server: PrometheusServer, queries: list[Query], start: float, end: float,
            scrape_s: int = SCRAPE_S) -> list[Cost]:
    """Samples read and wall time of each query, as Grafana would send it over [start, end] with the data
    source's scrape interval `scrape_s`."""
    costs = []
    for query in queries:
        step = max(grafana_step(end - start, query.points, scrape_s), query.min_step_s)
        expr = query_as_sent(query.expr, end - start, step, scrape_s)
        if query.instant:
            path, params = "query", {"query": expr, "time": f"{end:.0f}"}
        else:
            path, params = "query_range", {"query": expr, "start": f"{start:.0f}", "end": f"{end:.0f}",
                                           "step": str(step)}
        began = time.monotonic()
        data = server._api(path, params | {"stats": "all"})
        costs.append(Cost(query.title, int(data["stats"]["samples"]["totalQueryableSamples"]),
                          time.monotonic() - began))
    return costs


@dataclass(frozen=True)
class Fleet:
    """One measured fleet size: replicas per model, the range a dashboard load covers, hours of data."""

    instances: int
    range_s: float        # the dashboards' default range (20), a shorter one scaled up (200), or a day
    data_hours: float     # range + the longest lookback (the divergence's 1h baseline, 1h ago, of a 5m rate)
    with_anchor: bool     # also generate the series only vLLM's overview reads, and measure it
    scrape_s: int = SCRAPE_S
    recorded: bool = True  # also backfill the recording rules and measure the recorded dashboards

    @property
    def name(self) -> str:
        """How `--fleet` names it: instances x range, e.g. `200x24h`."""
        return f"{self.instances}x{self.range_s / 3600:g}h"


# 200 instances: a 30-minute load (scaled x6 to the 3 h default) keeps the backfill near 13 M samples. A day at
# 200 instances scraped every 15 s would be 690 M samples (a 99 GB OpenMetrics file; 20 instances took 18 min
# to backfill): at 60 s it is 170 M, and the rules' day of recorded series is left out (bench-rules measures them).
FLEETS = (Fleet(20, 3 * 3600, 4.25, True), Fleet(200, 1800, 1.6, False),
          Fleet(200, 24 * 3600, 26.25, True, scrape_s=60, recorded=False))
DEFAULT_RANGE_S = 3 * 3600


def recorded_config(config: Config) -> Config | None:
    """The config with `dashboard.use_recording_rules: true`, or None when this version has no such setting."""
    from dataclasses import fields, replace

    if "use_recording_rules" not in {f.name for f in fields(config.dashboard)}:
        return None
    return replace(config, dashboard=replace(config.dashboard, use_recording_rules=True))


def rules_cost_per_minute(server: PrometheusServer, rule_model: dict, at: float) -> int:
    """Samples the rule groups read per minute: each rule as an instant query at `at`, x evaluations/min."""
    total = 0
    for group in rule_model["groups"]:
        per_minute = 60 / seconds(group.get("interval", "1m"))
        for rule in group["rules"]:
            data = server._api("query", {"query": rule["expr"], "time": f"{at:.0f}", "stats": "all"})
            total += int(data["stats"]["samples"]["totalQueryableSamples"] * per_minute)
    return total


@dataclass(frozen=True)
class Row:
    fleet: int
    range_s: float
    dashboard: str
    mode: str
    samples: int
    seconds: float
    largest: Cost
    scale: float          # to the default range at 1000 instances
    costs: tuple[Cost, ...] = ()   # every query of the load, in dashboard order

    @property
    def largest_at_1000(self) -> float:
        return self.largest.samples * self.scale


def run(config: Config, anchor_path: Path, fleets: tuple[Fleet, ...] = FLEETS,
        progress=lambda message: None) -> tuple[list[Row], dict[int, int]]:
    """Rows for every fleet size, dashboard and mode, and the vLLM rules' samples per minute per size."""
    try:
        anchor = json.loads(read_text(anchor_path, "file", ANCHOR_MAX_BYTES))
    except LlmdashError as exc:
        raise LlmdashError(f"cannot read vLLM's overview dashboard: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise LlmdashError(f"cannot read vLLM's overview dashboard {anchor_path}: "
                           f"not a dashboard JSON file ({type(exc).__name__})") from None
    spec = load_engine("vllm")
    modes = {"raw": config, "recorded": recorded_config(config)}
    boards = {mode: build_dashboards(cfg) for mode, cfg in modes.items() if cfg is not None}
    rules = build_rule_files(config)["vllm"]
    rows, rule_costs = [], {}
    for fleet in fleets:
        end = (time.time() // 3600) * 3600 - 3600
        server = PrometheusServer()
        try:
            began = time.monotonic()
            path = server.dir / "fleet.om"
            samples = write_fleet(path, spec, fleet.instances, fleet.data_hours, end,
                                  anchor if fleet.with_anchor else None, fleet.scrape_s)
            server.backfill(path, max_block_duration=BLOCK_DURATION)
            path.unlink()
            progress(f"{fleet.instances} instances x {len(MODELS)} models: {samples} samples backfilled "
                     f"({fleet.data_hours:g} h, {fleet.scrape_s} s scrapes) in {time.monotonic() - began:.0f} s")
            server.start()
            if fleet.recorded and any(r.get("record") for g in rules["groups"] for r in g["rules"]):
                began = time.monotonic()
                replay.prometheus_record(server, [rules], end - fleet.data_hours * 3600, end)
                progress(f"recorded series backfilled in {time.monotonic() - began:.0f} s")
            start = end - fleet.range_s
            scale = (1000 / fleet.instances) * (DEFAULT_RANGE_S / fleet.range_s)
            measured = {(ANCHOR_NAME, "raw"): dashboard_queries(anchor)} if fleet.with_anchor else {}
            measured |= {(name, mode): dashboard_queries(model) for mode, models in boards.items()
                         for name, model in models.items() if fleet.recorded or mode == "raw"}
            for (name, mode), queries in measured.items():
                costs = measure(server, queries, start, end, fleet.scrape_s)
                if not any(c.samples for c in costs):
                    continue                          # another engine's dashboard: nothing to read here
                largest = max(costs, key=lambda c: c.samples, default=Cost("-", 0, 0.0))
                rows.append(Row(fleet.instances, fleet.range_s, name, mode, sum(c.samples for c in costs),
                                sum(c.seconds for c in costs), largest, scale, tuple(costs)))
            if fleet.recorded:
                rule_costs[fleet.instances] = rules_cost_per_minute(server, rules, end)
        finally:
            server.stop()
    return rows, rule_costs


def table(rows: list[Row], rule_costs: dict[int, int], fleets: tuple[Fleet, ...] = FLEETS) -> str:
    """Markdown: one row per fleet size and range, dashboard and mode, with the ratios to vLLM's overview."""
    lines = ["Synthetic vLLM fleet, 2 models; one dashboard load = every panel target and annotation "
             "as Grafana sends it (a range query with step = range / the panel's max data points (1000 where unset) "
             "rounded up to the scrape interval, or the target's min interval if larger; an instant query for "
             "targets marked instant; $__rate_interval = max(4 x scrape, step + scrape); variables = All), "
             "dashboards that read nothing on vLLM data left out; "
             "samples = Prometheus' stats.samples.totalQueryableSamples. "
             + "; ".join(f"{f.instances} instances: {f.range_s / 3600:g} h range over {f.data_hours:g} h of data "
                         f"scraped every {f.scrape_s} s" for f in fleets) + ". The largest panel is scaled to the "
             f"3 h default range at 1000 instances; ⚠ marks more than {MAX_SAMPLES // 1_000_000} M samples "
             "(--query.max-samples).", "",
             "| instances | range | dashboard | mode | samples | × vLLM overview | eval s | × its eval s "
             "| largest panel | its samples | at 1000 instances, 3 h |", "|---" * 11 + "|"]
    for fleet in fleets:
        here = [r for r in rows if (r.fleet, r.range_s) == (fleet.instances, fleet.range_s)]
        anchor = next((r for r in here if r.dashboard == ANCHOR_NAME), None)
        for r in here:
            ratio = f"{r.samples / anchor.samples:.2f}" if anchor and anchor.samples else "-"
            time_ratio = f"{r.seconds / anchor.seconds:.2f}" if anchor and anchor.seconds else "-"
            flag = " ⚠" if r.largest_at_1000 > MAX_SAMPLES else ""
            lines.append(f"| {r.fleet} | {r.range_s / 3600:g} h | {r.dashboard} | {r.mode} | {r.samples:,} | {ratio} "
                         f"| {r.seconds:.2f} | {time_ratio} | {r.largest.title} | {r.largest.samples:,} "
                         f"| {r.largest_at_1000 / 1e6:.1f} M{flag} |")
    if rule_costs:
        lines += ["", "vLLM rules' own evaluation: " + "; ".join(
            f"{n} instances: {cost:,} samples/min" for n, cost in sorted(rule_costs.items()))]
    return "\n".join(lines + slowest_queries(rows, fleets)) + "\n"


SLOWEST = 8   # queries listed per dashboard where the time goes


def slowest_queries(rows: list[Row], fleets: tuple[Fleet, ...]) -> list[str]:
    """Where the evaluation time goes, at the longest range measured beside the anchor: each raw dashboard's
    slowest queries (a panel with several targets is one line per target)."""
    beside = [f for f in fleets if f.with_anchor]
    if not beside:
        return []
    fleet = max(beside, key=lambda f: (f.range_s, f.instances))
    here = [r for r in rows if (r.fleet, r.range_s, r.mode) == (fleet.instances, fleet.range_s, "raw") and r.costs]
    if not here:
        return []
    lines = ["", f"Slowest queries at {fleet.instances} instances, {fleet.range_s / 3600:g} h (raw):", "",
             "| dashboard | query | eval s | share of the load's eval s | samples |", "|---" * 5 + "|"]
    for r in here:
        for cost in sorted(r.costs, key=lambda c: -c.seconds)[:SLOWEST]:
            share = cost.seconds / r.seconds if r.seconds else 0.0
            lines.append(f"| {r.dashboard} | {cost.title} | {cost.seconds:.2f} | {share:.0%} | {cost.samples:,} |")
    return lines
