"""Turn grafanalib 0.7.1 output into the JSON current Grafana (11+, schemaVersion 39) stores.

grafanalib is frozen at 0.7.1 and emits a 2018-era model: schemaVersion 12, legacy
dashboard keys, legacy target fields, panels without ids, no built-in annotation.
Loading such a model makes Grafana migrate it in the browser, and the first UI save then
shows up as drift. Everything that leaves llmdash goes through `to_grafana`, then the
validator.
"""

from __future__ import annotations

import json

from grafanalib import core
from grafanalib._gen import DashboardEncoder

from llmdash.vocabulary import Annotations

SCHEMA_VERSION = 39
LEGACY_DASHBOARD_KEYS = ("rows", "style", "hideControls", "sharedCrosshair", "gnetId", "version", "__inputs")
LEGACY_TARGET_KEYS = ("intervalFactor", "step", "metric", "target", "query", "format", "hide", "instant", "interval")
LEGACY_PANEL_KEYS = ("span", "minSpan", "height", "error", "cacheTimeout", "timeFrom", "timeShift",
                     "hideTimeOverride", "interval", "repeat", "transparent", "maxDataPoints", "editable")
BUILT_IN_ANNOTATION = {
    "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True, "hide": True,
    "iconColor": Annotations.BUILT_IN.color, "name": Annotations.BUILT_IN.name, "type": "dashboard",
}


def to_grafana(dashboard: core.Dashboard, variables: list[dict], annotations: list[dict], min_interval: str,
               max_data_points: int) -> dict:
    """The stored model; every query panel gets `min_interval` as its Min interval (Grafana never steps finer) and
    `max_data_points` as its Max data points (Grafana steps range / max data points where that is coarser)."""
    model = json.loads(json.dumps(dashboard.to_json_data(), cls=DashboardEncoder))
    for key in LEGACY_DASHBOARD_KEYS:
        model.pop(key, None)
    model["id"] = None
    model["schemaVersion"] = SCHEMA_VERSION
    model["templating"] = {"list": variables}
    model["annotations"] = {"list": [BUILT_IN_ANNOTATION, *annotations]}
    model["timepicker"] = {"refresh_intervals": model["timepicker"]["refresh_intervals"]}
    model["fiscalYearStartMonth"] = 0
    model["liveNow"] = False
    model["weekStart"] = ""
    for number, panel in enumerate(model["panels"], start=1):
        _panel(panel, number, min_interval, max_data_points)
    return model


def _drop_nulls(node):
    """grafanalib writes null for every unset option; Grafana wants them absent (threshold bases and open
    value-mapping ranges excepted)."""
    if isinstance(node, dict):
        return {k: _drop_nulls(v) for k, v in node.items() if v is not None or k in ("value", "from", "to")}
    if isinstance(node, list):
        return [_drop_nulls(v) for v in node]
    return node


def _panel(panel: dict, number: int, min_interval: str, max_data_points: int) -> None:
    cleaned = _drop_nulls(panel)
    panel.clear()
    panel.update(cleaned)
    panel["id"] = number
    for key in LEGACY_PANEL_KEYS:
        panel.pop(key, None)
    for key in ("links", "transformations"):
        if not panel.get(key):
            panel.pop(key, None)
    if panel["type"] == "row":
        for key in ("targets", "datasource", "thresholds", "description", "fieldConfig"):
            panel.pop(key, None)
        panel["panels"] = []
        return
    if panel["type"] == "text":
        for key in ("targets", "datasource", "thresholds"):
            panel.pop(key, None)
        return
    panel["interval"] = min_interval
    panel["maxDataPoints"] = max_data_points
    for target in panel["targets"]:
        for key in LEGACY_TARGET_KEYS:
            target.pop(key, None)
        target["editorMode"] = "code"
        if panel["type"] == "table":  # a table shows the latest value of each series: one instant query
            target.update(instant=True, range=False, format="table")
        else:
            target["range"] = True
    if panel["type"] == "timeseries":
        panel.pop("thresholds", None)
    legend = panel.get("options", {}).get("legend")
    if isinstance(legend, dict):
        _show_legend(legend)


def _show_legend(legend: dict) -> None:
    """grafanalib hides a legend with displayMode "hidden" and never sets showLegend, which the schema
    requires. Write what Grafana's own V37 migration (apps/dashboard/pkg/migration/schemaversion/v37.go)
    makes of it, since at schemaVersion 39 Grafana no longer runs that migration on our JSON."""
    if legend.get("displayMode") == "hidden" or legend.get("showLegend") is False:
        legend["displayMode"] = "list"
        legend["showLegend"] = False
    else:
        legend["showLegend"] = True
