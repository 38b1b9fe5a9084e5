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

from dataclasses import dataclass, field

from llmdash import durations
from llmdash.dashboards import variables as grafana
from llmdash.dashboards.variables import variable_values
from llmdash.dashboards.walk import walk_panels
from llmdash.errors import LlmdashError

SCRAPE_INTERVAL_S = 15.0       # the Prometheus data source's scrape interval setting


def seconds(duration: str) -> float:
    """Seconds in a dashboard's duration ('60s', '5m'); a malformed one is the user's mistake, said in one line."""
    try:
        return durations.seconds(duration)
    except ValueError as exc:
        raise LlmdashError(str(exc)) from None


def concrete_query(expr: str, values: dict[str, str], step_s: float, range_s: float,
               scrape_s: float = SCRAPE_INTERVAL_S) -> str:
    """Concrete PromQL: Grafana's built-in and dashboard variables replaced; an unknown variable is an error."""
    return grafana.substitute(expr, values, step_s, range_s, scrape_s)


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
    """(row title, panel) in grid order, a row with its own title; `walk_panels` says which row a panel is in."""
    return [(str(p.panel.get("title") or "") if p.is_row else p.row_title, p.panel) for p in walk_panels(dashboard)]


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
        step = max(step_s, seconds(panel["interval"]) if panel.get("interval") else 0.0)   # Grafana's Min interval
        for target in panel.get("targets", []):
            if not target.get("expr") or target.get("hide"):
                continue
            expr = concrete_query(target["expr"], variables, step, range_s, scrape_s)
            series = _series(server.query_range(expr, start, end, step))
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
            expr = concrete_query(target["expr"], variables, ann_step, range_s, scrape_s)
            series = _series(server.query_range(expr, start, end, ann_step))
            regions[ann["name"]] = to_regions(ann["name"], series, ann_step)
            colours[ann["name"]] = ann.get("iconColor", "")
    return DashboardResult(dashboard.get("uid", ""), dashboard.get("title", ""), panels, regions, start, end, colours)
