"""Checks every dashboard must pass before it is written or published.

Four layers: what Grafana's loader relies on (uid form, unique ids, gridPos inside the
24-column grid, datasource refs, refIds); conformance to Grafana's own published schema
(`llmdash.dashboards.schema`: the dashboard model and each panel's options and field config);
Python ports of the useful grafana/dashboard-linter rules; and PromQL parsed by a real parser
(promql-parser), with llmdash's own rules on top: quantiles over `sum by (le, …)`, counters only
inside rate/increase, and every series present in the engine's catalog for the versions the
dashboard covers.
"""

from __future__ import annotations

import re
from typing import Callable

import promql_parser as pp

from llmdash.dashboards.promql_walk import PromqlWalk, parse
from llmdash.dashboards.schema import schema_problems
from llmdash.dashboards.walk import walk_panels
from llmdash.engines.model import HISTOGRAM_PARTS, EngineSpec
from llmdash.vocabulary import ALERTS_SERIES, LOG_PREEMPTIONS, PANEL_TITLES, Panel

UID = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
MODERN_TYPES = {"timeseries", "stat", "bargauge", "heatmap", "text", "row", "table", "state-timeline"}
STANDARD_UNITS = {"s", "ms", "short", "reqps", "percentunit", "percent", "none", "bytes", "ops"}
RANGE_FUNCTIONS = {"rate", "increase", "irate"}
PRESENCE_AGGREGATIONS = {"group", "count"}
# Every panel rates over one window (the recorded window), so no two panels, and no raw and recorded
# dashboard, disagree because of their windows. (type, key) of the panels allowed another window: a trailing
# baseline is a window by definition, and the paused-requests tile reads the Preemption annotation's window (a
# latest-iteration gauge needs many scrapes).
FIXED_WINDOW_PANELS = {("timeseries", Panel.DIVERGENCE), ("stat", Panel.PAUSED)}
PANEL_KEYS = {title: key for key, title in PANEL_TITLES.items()}   # a panel's stable key, from its title


BUILT_IN_SERIES = frozenset({ALERTS_SERIES})
# written by Prometheus itself for firing and pending alerts
RECORDED_NAME = re.compile(r"^[a-z][a-z_]*:llm_[a-z0-9_]+:[a-z0-9_]+$")


def validate_dashboard(dashboard: dict, spec: EngineSpec | None,
                       recorded: Callable[[str], bool] = lambda name: False) -> list[str]:
    """All problems found, as one line each; empty when the dashboard is fit to ship. `recorded` tells the
    series the recording rules write, which a recorded dashboard may read; with no `spec` (the fleet
    dashboard), the only series it may read."""
    problems = structural(dashboard) + schema_problems(dashboard) + lint(dashboard)
    for where, expr in expressions(dashboard):
        problems += [f"{where}: {p}" for p in check_expr(expr, spec, lambda n: n in BUILT_IN_SERIES or recorded(n))]
    return problems


def looks_recorded(name: str) -> bool:
    """A name of llmdash's recording-rule layer, when the config that names them exactly is not at hand."""
    return RECORDED_NAME.match(name) is not None


def validate_rules(rule_file: dict, spec: EngineSpec) -> list[str]:
    """Every rule expression parses and reads only catalog series, series recorded in the same file, or the
    ruler's own `ALERTS` (a warning waits while the page is pending)."""
    problems = []
    rules = [rule for group in rule_file["groups"] for rule in group["rules"]]
    recorded = frozenset(rule["record"] for rule in rules if "record" in rule)
    for rule in rules:
        where = f"rule {rule.get('record') or rule.get('alert')}"
        problems += [f"{where}: {p}" for p in check_expr(rule["expr"], spec,
                                                          lambda n: n in BUILT_IN_SERIES or n in recorded)]
    return problems


def expressions(dashboard: dict) -> list[tuple[str, str]]:
    found = []
    for panel in (placed.panel for placed in walk_panels(dashboard)):
        for target in panel.get("targets", []):
            found.append((f"panel {panel.get('title')!r} target {target.get('refId')}", target.get("expr", "")))
    for entry in dashboard.get("annotations", {}).get("list", []):
        if "target" in entry and "expr" in entry["target"]:
            found.append((f"annotation {entry['name']!r}", entry["target"]["expr"]))
    return found


# ---- structure ---------------------------------------------------------------------------------

def structural(d: dict) -> list[str]:
    problems = []
    if not isinstance(d.get("title"), str) or not d["title"].strip():
        problems.append("dashboard: empty title")
    if not isinstance(d.get("uid"), str) or not UID.match(d["uid"]):
        problems.append(f"dashboard: uid {d.get('uid')!r} is not lowercase [a-z0-9-], starting with a letter, ≤ 40")
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 39:
        problems.append(f"dashboard: schemaVersion {d.get('schemaVersion')!r} is below 39")
    if d.get("id") is not None:
        problems.append("dashboard: id must be null (a numeric id means 'update by id' to Grafana)")
    for tag in d.get("tags", []):
        if len(tag) > 50:
            problems.append(f"dashboard: tag {tag!r} is longer than 50 characters")
    ids = set()
    panels = d.get("panels")
    if not isinstance(panels, list) or not panels:
        return problems + ["dashboard: no panels"]
    for panel in (placed.panel for placed in walk_panels(d)):
        where = f"panel {panel.get('title')!r}"
        pid = panel.get("id")
        if not isinstance(pid, int) or pid < 1 or pid in ids:
            problems.append(f"{where}: id {pid!r} is not a unique positive integer")
        ids.add(pid)
        if panel.get("type") not in MODERN_TYPES:
            problems.append(f"{where}: type {panel.get('type')!r} is not a modern (non-Angular) panel type")
        grid = panel.get("gridPos") or {}
        h, w, x, y = (grid.get(k) for k in ("h", "w", "x", "y"))
        if not all(isinstance(v, int) for v in (h, w, x, y)) or h < 1 or not 1 <= w <= 24 or x < 0 or x + w > 24 \
                or y < 0:
            problems.append(f"{where}: gridPos {grid!r} is outside the 24-column grid")
        if panel.get("type") in ("row", "text"):
            continue
        if panel.get("datasource") != {"type": "prometheus", "uid": "${datasource}"}:
            problems.append(f"{where}: datasource is not the ${{datasource}} variable")
        ref_ids = [t.get("refId") for t in panel.get("targets", [])]
        if any(not r for r in ref_ids) or len(set(ref_ids)) != len(ref_ids):
            problems.append(f"{where}: target refIds {ref_ids} are not unique and non-empty")
        for target in panel.get("targets", []):
            if target.get("datasource") != panel.get("datasource"):
                problems.append(f"{where}: target {target.get('refId')} datasource differs from the panel's")
        steps = panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps")
        if not isinstance(steps, list) or not steps or steps[0].get("value") is not None:
            problems.append(f"{where}: thresholds.steps must be a list starting with a null base")
    problems += _overlaps(panels)
    return problems


def _overlaps(panels: list[dict]) -> list[str]:
    cells = {}
    problems = []
    for panel in panels:
        g = panel.get("gridPos") or {}
        if not all(isinstance(g.get(k), int) for k in ("h", "w", "x", "y")):
            continue
        for cx in range(g["x"], g["x"] + g["w"]):
            for cy in range(g["y"], g["y"] + g["h"]):
                other = cells.setdefault((cx, cy), panel.get("title"))
                if other != panel.get("title"):
                    problems.append(f"panel {panel.get('title')!r}: overlaps panel {other!r}")
                    return problems
    return problems


# ---- dashboard-linter ports --------------------------------------------------------------------

def lint(d: dict) -> list[str]:
    problems = []
    variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    if variables.get("datasource", {}).get("type") != "datasource":
        problems.append("template-datasource-rule: no templated datasource variable")
    for name, variable in variables.items():
        if variable.get("type") == "query" and variable.get("refresh") != 2:
            problems.append(f"template-on-time-change-reload-rule: variable {name!r} does not refresh on time change")
    windows: dict[str, list[str]] = {}     # range window -> the panels rating over it
    for panel in (placed.panel for placed in walk_panels(d)):
        kind = panel.get("type")
        where = f"panel {panel.get('title')!r}"
        if kind == "row":
            continue
        if not panel.get("title") or not panel.get("description"):
            problems.append(f"panel-title-description-rule: {where} lacks a title or a description")
        if kind == "text":
            continue
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
        if not unit or not (unit in STANDARD_UNITS or unit.startswith("suffix:")):
            problems.append(f"panel-units-rule: {where} has no valid unit ({unit!r})")
        if not panel.get("targets"):
            problems.append(f"panel-no-targets-rule: {where} has no targets")
        if (panel.get("type"), PANEL_KEYS.get(panel.get("title"))) not in FIXED_WINDOW_PANELS:
            for target in panel.get("targets", []):
                for window in re.findall(r"\[([^\]]+)\]", target.get("expr", "")):
                    windows.setdefault(window, []).append(where)
    if len(windows) > 1:
        usual = max(windows, key=lambda w: len(windows[w]))
        problems += [f"target-one-window-rule: {where} rates over [{window}], the other panels over [{usual}]"
                     for window, places in sorted(windows.items()) if window != usual for where in places[:3]]
    return problems


# ---- PromQL ------------------------------------------------------------------------------------

# A dashboard filter (`label=~"$var"`) costs promql-parser a regular-expression compile, and the latency queries
# that read mixed bucket layouts carry hundreds of them (a build parsed for 1.2 s with them, 0.18 s without).
# The lint judges series names and where each is read, never a matcher's value: it parses a filter as an equality.
VARIABLE_FILTER = re.compile(r'=~"\$(\w+)"')


def check_expr(expr: str, spec: EngineSpec | None, known: Callable[[str], bool] = lambda name: False) -> list[str]:
    """Problems in one expression; `known` tells extra series names allowed (recorded or built-in)."""
    try:
        tree = parse(VARIABLE_FILTER.sub(r'="\1"', expr))
    except Exception as exc:  # the parser raises its own ValueError/RuntimeError subtypes
        return [f"does not parse as PromQL: {exc}"]
    return _Lint(spec, known).walk(tree, False)


def _series_kind(name: str, spec: EngineSpec) -> tuple[str | None, str | None]:
    """(catalog metric name, kind of this series) for a scraped series name, (None, None) if unknown."""
    if name in spec.metrics:   # a native histogram is read by its base name, and is cumulative like its series
        metric = spec.metrics[name]
        return name, "counter" if metric.type == "histogram" else metric.type
    for part in HISTOGRAM_PARTS:
        base = name.removesuffix(f"_{part}")
        if base != name and base in spec.metrics and spec.metrics[base].type == "histogram":
            return base, "counter"  # every histogram series is cumulative
    return None, None


def _unwrap(node):
    while isinstance(node, pp.ParenExpr):
        node = node.expr
    return node


def _read_selector(node):
    """The selector a counter reading reads: the selector itself, or the native histogram a native read of a
    classic part takes (`histogram_count(h)`, `histogram_sum(h)`, `promql.native_at_or_under`: `… or
    histogram_count(h)`)."""
    node = _unwrap(node)
    if isinstance(node, pp.BinaryExpr) and str(node.op) == "or":
        node = _unwrap(node.rhs)
    if isinstance(node, pp.Call) and node.func.name in ("histogram_count", "histogram_sum") and len(node.args) == 1:
        node = _unwrap(node.args[0])
    return node


def _same_series(a, b, offset: bool) -> bool:
    """Both readings of one series; `a` shifted back (offset), `b` not."""
    a, b = _read_selector(a), _read_selector(b)
    return (isinstance(a, pp.VectorSelector) and isinstance(b, pp.VectorSelector) and a.name == b.name
            and str(a.matchers) == str(b.matchers) and bool(a.offset) == offset and not b.offset)


def _is_increments(node) -> bool:
    """`promql.increments`: `(c - (c offset s <= c)) or (c and (c offset s > c))`, what a counter gained since
    `s` ago, a reset counted from 0 as rate() counts it. The one reading of a counter outside a range function
    that cannot mistake a reset for a fall."""
    node = _unwrap(node)
    if not (isinstance(node, pp.BinaryExpr) and str(node.op) == "or"):
        return False
    gained, reset = _unwrap(node.lhs), _unwrap(node.rhs)
    if not (isinstance(gained, pp.BinaryExpr) and str(gained.op) == "-" and isinstance(reset, pp.BinaryExpr)
            and str(reset.op) == "and"):
        return False
    before, fell = _unwrap(gained.rhs), _unwrap(reset.rhs)
    counter = _unwrap(gained.lhs)
    return (isinstance(before, pp.BinaryExpr) and str(before.op) == "<=" and isinstance(fell, pp.BinaryExpr)
            and str(fell.op) == ">" and _same_series(_unwrap(before.lhs), counter, True)
            and _same_series(counter, _unwrap(before.rhs), False)
            and _same_series(counter, _unwrap(reset.lhs), False)
            and _same_series(_unwrap(fell.lhs), counter, True) and _same_series(counter, _unwrap(fell.rhs), False)
            and _read_selector(before.lhs).offset == _read_selector(fell.lhs).offset)


class _Lint(PromqlWalk):
    """Catalog and counter rules per selector; the context passed down is whether the selector is read inside
    rate()/increase() (or asked only whether it exists)."""

    def __init__(self, spec: EngineSpec | None, gauges: Callable[[str], bool]):
        self.spec = spec
        self.gauges = gauges

    def walk(self, node, in_range_function: bool = False) -> list[str]:
        if _is_increments(node):   # still a series the catalog must know, read as a range function reads it
            return self.walk(_read_selector(_unwrap(_unwrap(node).lhs).lhs), True)
        return super().walk(node, in_range_function)

    def selector(self, node, in_range_function: bool) -> list[str]:
        spec = self.spec
        if self.gauges(node.name):
            return []
        if spec is None:
            return [f"series {node.name!r} is not recorded by llmdash's rules"]
        if node.name == LOG_PREEMPTIONS and spec.log_patterns:  # the counter the engine's mtail program writes
            return [] if in_range_function else [f"counter {node.name!r} is used outside rate()/increase()"]
        metric, kind = _series_kind(node.name, spec)
        if metric is None:
            return [f"series {node.name!r} is not in the {spec.id} catalog"]
        if not spec.metrics[metric].exposed_in(spec.supported_from, spec.supported_to):
            return [f"series {node.name!r} is not exported by {spec.id} {spec.versions}"]
        if kind == "counter" and not in_range_function:
            return [f"counter {node.name!r} is used outside rate()/increase()"]
        return []

    def call(self, node, in_range_function: bool) -> list[str]:
        name = node.func.name
        problems = _quantile_problems(node.args[1]) if name == "histogram_quantile" else []
        return problems + [p for arg in node.args for p in self.walk(arg, name in RANGE_FUNCTIONS)]

    def binary(self, node, in_range_function: bool) -> list[str]:
        # `and`/`unless` ask only which series exist on their right, never their values; a set operator passes its
        # left side's values (and `or` its right side's) through unchanged, so under a presence aggregation they
        # are still only asked whether they exist
        op = str(node.op)
        passed = in_range_function and op in ("and", "or", "unless")
        return self.walk(node.lhs, passed) + self.walk(node.rhs, op in ("and", "unless") or (passed and op == "or"))

    def aggregate(self, node, in_range_function: bool) -> list[str]:
        # a presence aggregation asks whether series exist, never reads a value
        return self.walk(node.expr, str(node.op) in PRESENCE_AGGREGATIONS)

    def wrapper(self, node, in_range_function: bool) -> list[str]:
        return self.walk(node.expr, in_range_function and isinstance(node, pp.ParenExpr))


def _quantile_problems(arg) -> list[str]:
    """Each branch under histogram_quantile must be `sum by (le, …)`; anything else mixes instances wrongly."""
    while isinstance(arg, pp.ParenExpr):
        arg = arg.expr
    if isinstance(arg, pp.BinaryExpr) and str(arg.op) == "or":
        return _quantile_problems(arg.lhs) + _quantile_problems(arg.rhs)
    if isinstance(arg, pp.AggregateExpr) and str(arg.op) == "sum" and arg.modifier is not None \
            and "By" in str(arg.modifier.type) and "le" in arg.modifier.labels:
        return []
    return [f"histogram_quantile over {str(arg)[:80]!r} is not sum by (le, …)"]
