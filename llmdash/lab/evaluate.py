"""Evaluate a dashboard's panels and annotations on a Prometheus, the way Grafana would.

Why: a panel is only as good as its query on real data. This takes the dashboard JSON
as stored (never rewriting its expressions), substitutes the Grafana variables
(`$__rate_interval`, `$__interval`, `$__range`, `${datasource}`, multi-value variables
as All), runs every target as a range query, and turns annotation results into regions
like Grafana's Prometheus annotation support: a sample is active when
its value is > 0, active samples no more than one step apart are merged, and every
returned series is processed separately.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from llmdash.errors import LlmdashError

SCRAPE_INTERVAL_S = 15.0       # the Prometheus data source's scrape interval setting
_VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)(?::\w+)?\]\]|\$(\w+)")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(duration: str) -> float:
    """'60s', '5m', '1h' -> seconds."""
    match = _DURATION.match(duration.strip())
    if not match:
        raise LlmdashError(f"not a duration: {duration!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def promql_duration(value_s: float) -> str:
    return f"{int(value_s)}s" if float(value_s).is_integer() else f"{int(value_s * 1000)}ms"


def rate_interval(step_s: float, scrape_s: float = SCRAPE_INTERVAL_S) -> float:
    """Grafana's $__rate_interval: max($__interval + scrape interval, 4 x scrape interval)."""
    return max(step_s + scrape_s, 4 * scrape_s)


def variable_values(dashboard: dict) -> dict[str, str]:
    """Template variables as PromQL text: multi-value/All as their allValue (default .*)."""
    values = {}
    for var in dashboard.get("templating", {}).get("list", []):
        name = var["name"]
        if var.get("type") == "datasource":
            values[name] = "prometheus"
        elif var.get("includeAll") or var.get("multi"):
            values[name] = var.get("allValue") or ".*"
        else:
            current = (var.get("current") or {}).get("value")
            if isinstance(current, list):
                current = current[0] if current else None
            if current is None:
                raise LlmdashError(f"dashboard variable ${name} has no current value to substitute")
            values[name] = str(current)
    return values


def substitute(expr: str, variables: dict[str, str], step_s: float, range_s: float,
               scrape_s: float = SCRAPE_INTERVAL_S) -> str:
    """Concrete PromQL: Grafana's built-in and dashboard variables replaced."""
    builtins = {
        "__rate_interval": promql_duration(rate_interval(step_s, scrape_s)),
        "__interval": promql_duration(step_s),
        "__interval_ms": str(int(step_s * 1000)),
        "__range": promql_duration(range_s),
        "__range_s": str(int(range_s)),
    }

    def replace(match: re.Match) -> str:
        name = match.group(1) or match.group(2) or match.group(3)
        if name in builtins:
            return builtins[name]
        if name in variables:
            return variables[name]
        raise LlmdashError(f"unknown dashboard variable ${name} in {expr[:80]!r}")
    return _VAR.sub(replace, expr)


@dataclass
class Series:
    labels: dict[str, str]
    points: list[tuple[float, float]]


@dataclass
class TargetResult:
    row: str
    panel: str
    ref_id: str
    expr: str
    series: list[Series]
    legend: str = ""

    @property
    def has_data(self) -> bool:
        return any(s.points for s in self.series)


@dataclass
class Region:
    """One annotation region (a point when start == end), for one returned series."""

    name: str
    labels: dict[str, str]
    start: float
    end: float


@dataclass
class PanelResult:
    id: int
    type: str
    title: str
    row: str
    grid: dict
    unit: str | None
    targets: list[TargetResult] = field(default_factory=list)
    defaults: dict = field(default_factory=dict)   # fieldConfig.defaults: thresholds, min/max, decimals
    options: dict = field(default_factory=dict)    # panel options: colorMode, content of a text panel


@dataclass
class DashboardResult:
    uid: str
    title: str
    panels: list[PanelResult]
    annotations: dict[str, list[Region]]
    start: float
    end: float
    colours: dict[str, str] = field(default_factory=dict)   # annotation name -> its iconColor

    def panel(self, title: str, row: str | None = None) -> PanelResult:
        for p in self.panels:
            if p.title == title and (row is None or p.row == row):
                return p
        raise KeyError(f"no panel {title!r}" + (f" in row {row!r}" if row else ""))

    def regions(self, name_part: str) -> list[Region]:
        """Regions of every annotation whose name contains `name_part`."""
        return [r for name, regions in self.annotations.items() if name_part in name for r in regions]


def _series(result: list[dict]) -> list[Series]:
    return [Series(r["metric"], [(float(t), float(v)) for t, v in r["values"]]) for r in result]


def panels_in_order(dashboard: dict) -> list[tuple[str, dict]]:
    """(row title, panel) in grid order; a panel belongs to the row above it."""
    row = ""
    out = []
    for panel in sorted(dashboard.get("panels", []), key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"])):
        if panel.get("type") == "row":
            row = panel.get("title", "")
            out.append((row, panel))
            for child in panel.get("panels", []):   # collapsed rows keep children inside
                out.append((row, child))
        else:
            out.append((row, panel))
    return out


def to_regions(name: str, series: list[Series], step_s: float) -> list[Region]:
    """Grafana's processEvents: value > 0 is active; active samples <= step apart merge."""
    regions = []
    for s in series:
        current: Region | None = None
        for t, v in s.points:
            if not v > 0:
                continue
            if current is not None and t - current.end <= step_s:
                current.end = t
            else:
                current = Region(name, s.labels, t, t)
                regions.append(current)
    return regions


def evaluate_dashboard(dashboard: dict, server, start: float, end: float, step_s: float = 60.0,
                       scrape_s: float = SCRAPE_INTERVAL_S, annotations: bool = True,
                       panel_filter=None) -> DashboardResult:
    """Run every panel target (and annotation) of `dashboard` over [start, end] on `server`."""
    variables = variable_values(dashboard)
    range_s = end - start
    panels = []
    for row, panel in panels_in_order(dashboard):
        if panel.get("type") == "row":
            continue
        if panel_filter and not panel_filter(row, panel):
            continue
        defaults = panel.get("fieldConfig", {}).get("defaults", {})
        result = PanelResult(panel.get("id"), panel.get("type"), panel.get("title", ""), row, panel["gridPos"],
                             defaults.get("unit"), defaults=defaults, options=panel.get("options", {}))
        for target in panel.get("targets", []):
            if not target.get("expr") or target.get("hide"):
                continue
            expr = substitute(target["expr"], variables, step_s, range_s, scrape_s)
            series = _series(server.query_range(expr, start, end, step_s))
            result.targets.append(TargetResult(row, result.title, target.get("refId", ""), expr, series,
                                               target.get("legendFormat", "")))
        panels.append(result)
    regions: dict[str, list[Region]] = {}
    colours: dict[str, str] = {}
    if annotations:
        for ann in dashboard.get("annotations", {}).get("list", []):
            target = ann.get("target") or {}
            if ann.get("builtIn") or not target.get("expr") or not ann.get("enable", True):
                continue
            ann_step = max(seconds(target.get("interval") or "60s"), step_s)
            expr = substitute(target["expr"], variables, ann_step, range_s, scrape_s)
            series = _series(server.query_range(expr, start, end, ann_step))
            regions[ann["name"]] = to_regions(ann["name"], series, ann_step)
            colours[ann["name"]] = ann.get("iconColor", "")
    return DashboardResult(dashboard.get("uid", ""), dashboard.get("title", ""), panels, regions, start, end, colours)
