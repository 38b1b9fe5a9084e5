"""The schema v2 rendering of a dashboard (`dashboard.grafana.app/v2`, Grafana 13's default model), converted
from the composed classic model, so both come from one composition (`assemble.ROWS`, `fleet`, `postprocess`).

Grafana 13 migrates a classic dashboard to v2 when it is opened and stores v2 after the first UI save; a team
that manages dashboards as resources (Git Sync, grafana-operator's GrafanaManifest, the Terraform provider)
wants the v2 object itself. What changes besides the notation: panels become `elements` keyed by a stable
name (the `llmdash.vocabulary.Panel` key where the panel has one, a slug of its title otherwise), and the
layout is a `RowsLayout`, one row per on-call question, each collapsed exactly where the classic row is (so both
schemas open alike). Queries, variables, annotations, links, units and thresholds are carried over unchanged in
content.

The conversion is total over what llmdash composes: a classic key it does not know is an error naming it,
never silently dropped (so a new panel option must be taught here before it ships). The target is the v2
types of `@grafana/schema` (`dist/types/schema/dashboard/v2/types.spec.gen.d.ts`); Grafana's own converter
(apps/dashboard/pkg/migration/conversion) is the model for the enum spellings used below.
"""

from __future__ import annotations

import re

from llmdash.errors import LlmdashError
from llmdash.vocabulary import PANEL_TITLES

API_GROUP = "dashboard.grafana.app"
API_VERSION = "v2"      # served by Grafana 13 beside v1 (apps/dashboard/kinds/manifest.cue `versions`)
RESOURCE_API_VERSION = f"{API_GROUP}/{API_VERSION}"
KIND = "Dashboard"
QUERY_VERSION = "v0"    # DataQueryKind.version: the datasource query schema's version, v0 for every plugin today

CURSOR_SYNC = {0: "Off", 1: "Crosshair", 2: "Tooltip"}
VARIABLE_HIDE = {0: "dontHide", 1: "hideLabel", 2: "hideVariable"}
VARIABLE_REFRESH = {0: "never", 1: "onDashboardLoad", 2: "onTimeRangeChanged"}
VARIABLE_SORT = {0: "disabled", 1: "alphabeticalAsc", 2: "alphabeticalDesc", 3: "numericalAsc", 4: "numericalDesc",
                 5: "alphabeticalCaseInsensitiveAsc", 6: "alphabeticalCaseInsensitiveDesc", 7: "naturalAsc",
                 8: "naturalDesc"}
WEEK_START = ("saturday", "monday", "sunday")

# Classic keys the conversion reads, per part; any other key is refused (see the module docstring).
DASHBOARD_KEYS = {"annotations", "description", "editable", "fiscalYearStartMonth", "graphTooltip", "id", "links",
                  "liveNow", "panels", "refresh", "schemaVersion", "tags", "templating", "time", "timepicker",
                  "timezone", "title", "uid", "weekStart"}
PANEL_KEYS = {"datasource", "description", "fieldConfig", "gridPos", "id", "interval", "links", "maxDataPoints",
              "options", "targets", "title", "transformations", "type"}
ROW_KEYS = {"collapsed", "gridPos", "id", "panels", "title", "type"}
TRANSFORMATION_KEYS = {"id", "options", "disabled", "filter", "topic"}
DATASOURCE_VARIABLE_KEYS = {"type", "name", "label", "query", "hide", "includeAll", "multi", "options", "refresh",
                            "regex", "current", "allValue", "skipUrlSync", "description"}
QUERY_VARIABLE_KEYS = DATASOURCE_VARIABLE_KEYS | {"datasource", "definition", "sort"}
ANNOTATION_KEYS = {"builtIn", "datasource", "enable", "hide", "iconColor", "name", "target", "filter"}
DASHBOARD_LINK_KEYS = {"title", "type", "icon", "tooltip", "url", "tags", "asDropdown", "targetBlank", "includeVars",
                       "keepTime"}
PANEL_LINK_KEYS = {"title", "url", "targetBlank", "type", "icon", "tooltip"}   # v2 DataLink keeps the first three
ELEMENT_KEYS = {title: str(key) for key, title in PANEL_TITLES.items()}


class ConversionError(LlmdashError):
    """The classic model holds something the v2 rendering does not know how to carry."""


def to_v2(classic: dict) -> dict:
    """The `dashboard.grafana.app/v2` Dashboard resource (apiVersion, kind, metadata.name = uid, spec) that
    renders `classic`, a model as `postprocess.to_grafana` returns it."""
    _known("the dashboard", classic, DASHBOARD_KEYS)
    elements, rows = _layout(classic.get("panels") or [])
    time, picker = classic.get("time") or {}, classic.get("timepicker") or {}
    time_settings = {"timezone": classic.get("timezone", "browser"), "from": time.get("from", "now-6h"),
                     "to": time.get("to", "now"), "autoRefresh": classic.get("refresh") or "",
                     "autoRefreshIntervals": list(picker.get("refresh_intervals") or []), "hideTimepicker": False,
                     "fiscalYearStartMonth": classic.get("fiscalYearStartMonth", 0)}
    if classic.get("weekStart") in WEEK_START:
        time_settings["weekStart"] = classic["weekStart"]
    spec = {
        "title": classic["title"], "description": classic.get("description", ""),
        "tags": list(classic.get("tags") or []),
        "editable": classic.get("editable", True), "liveNow": classic.get("liveNow", False), "preload": False,
        "cursorSync": _mapped("graphTooltip", classic.get("graphTooltip", 0), CURSOR_SYNC),
        "timeSettings": time_settings,
        "links": [_dashboard_link(link) for link in classic.get("links") or []],
        "variables": [_variable(v) for v in (classic.get("templating") or {}).get("list") or []],
        "annotations": [_annotation(a) for a in (classic.get("annotations") or {}).get("list") or []],
        "elements": elements,
        "layout": {"kind": "RowsLayout", "spec": {"rows": rows}},
    }
    return {"apiVersion": RESOURCE_API_VERSION, "kind": KIND, "metadata": {"name": classic["uid"]}, "spec": spec}


def is_v2(model: dict) -> bool:
    """A v2 resource, or a v2 spec (publish carries it as the spec plus its uid)."""
    spec = model.get("spec") if model.get("kind") == KIND else model
    return isinstance(spec, dict) and "elements" in spec and "layout" in spec


# ------------------------------------------------------------------ layout and elements


def _layout(panels: list) -> tuple[dict, list]:
    """Elements by name, and one RowsLayoutRow per classic row with its panels' grid relative to the row."""
    elements: dict[str, dict] = {}
    rows: list[dict] = []
    current: dict | None = None
    top = 0
    for panel in panels:
        if panel.get("type") == "row":
            _known(f"row {panel.get('title')!r}", panel, ROW_KEYS)
            current = _row(panel["title"], collapse=bool(panel.get("collapsed")))
            rows.append(current)
            top = panel["gridPos"]["y"] + panel["gridPos"]["h"]
            for nested in panel.get("panels") or []:   # a collapsed classic row holds its panels itself
                _place(nested, current, elements, top)
            continue
        if current is None:   # panels above the first row: a row without a header keeps them on top
            current = _row("", collapse=False, hide_header=True)
            rows.append(current)
        _place(panel, current, elements, top)
    return elements, rows


def _row(title: str, *, collapse: bool, hide_header: bool = False) -> dict:
    spec = {"title": title, "collapse": collapse,
            "layout": {"kind": "GridLayout", "spec": {"items": []}}}
    if hide_header:
        spec["hideHeader"] = True
    return {"kind": "RowsLayoutRow", "spec": spec}


def _place(panel: dict, row: dict, elements: dict, top: int) -> None:
    name = _element_name(panel, row["spec"]["title"], elements)
    elements[name] = _element(panel)
    grid = panel["gridPos"]
    row["spec"]["layout"]["spec"]["items"].append({"kind": "GridLayoutItem", "spec": {
        "x": grid["x"], "y": grid["y"] - top, "width": grid["w"], "height": grid["h"],
        "element": {"kind": "ElementReference", "name": name}}})


def element_name(title: str, panel_type: str = "") -> str:
    """The Panel key of a panel with this title where llmdash.vocabulary has one, else a slug of the title; a
    stat tile gets `_tile` (tiles and charts share Panel keys: the library titles both KV-cache usage with
    Panel.KV_USAGE), so removing either never renames the other."""
    base = ELEMENT_KEYS.get(title) or re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_") or "panel"
    return f"{base}_tile" if panel_type == "stat" and not base.endswith("_tile") else base


def _element_name(panel: dict, row_title: str, taken: dict) -> str:
    """Stable across builds: from the title and kind, then the row, then a counter; never the list position."""
    base = element_name(str(panel.get("title") or ""), panel.get("type", ""))
    candidates = [base, f"{base}_{element_name(row_title)}" if row_title else base]
    for candidate in candidates:
        if candidate not in taken:
            return candidate
    number = 2
    while f"{candidates[-1]}_{number}" in taken:
        number += 1
    return f"{candidates[-1]}_{number}"


def _element(panel: dict) -> dict:
    what = f"panel {panel.get('title')!r}"
    _known(what, panel, PANEL_KEYS)
    datasource = panel.get("datasource")
    queries = [_panel_query(target, datasource, what) for target in panel.get("targets") or []]
    field_config = panel.get("fieldConfig") or {"defaults": {}, "overrides": []}
    spec = {
        "id": panel["id"], "title": panel.get("title", ""), "description": panel.get("description", ""),
        "links": [_panel_link(link, what) for link in panel.get("links") or []],
        "data": {"kind": "QueryGroup", "spec": {
            "queries": queries,
            "transformations": [_transformation(t, what) for t in panel.get("transformations") or []],
            "queryOptions": {key: panel[key] for key in ("interval", "maxDataPoints") if panel.get(key)}}},
        "vizConfig": {"kind": "VizConfig", "group": panel["type"], "version": "",
                      "spec": {"options": panel.get("options") or {},
                               "fieldConfig": {"defaults": field_config.get("defaults") or {},
                                               "overrides": field_config.get("overrides") or []}}},
    }
    return {"kind": "Panel", "spec": spec}


def _panel_query(target: dict, panel_datasource: dict | None, what: str) -> dict:
    datasource = target.get("datasource") or panel_datasource
    if "refId" not in target:
        raise ConversionError(f"{what}: a query without refId has no v2 form")
    spec = {k: v for k, v in target.items() if k not in ("refId", "datasource", "hide")}
    return {"kind": "PanelQuery", "spec": {"refId": target["refId"], "hidden": bool(target.get("hide", False)),
                                           "query": _data_query(datasource, spec, what)}}


def _data_query(datasource: dict | None, spec: dict, what: str) -> dict:
    """DataQueryKind: the datasource type is the group, its uid (here `${datasource}`) the datasource name."""
    if not isinstance(datasource, dict) or not datasource.get("type"):
        raise ConversionError(f"{what}: a query without a datasource type has no v2 form")
    query = {"kind": "DataQuery", "group": datasource["type"], "version": QUERY_VERSION, "spec": spec}
    if datasource.get("uid"):
        query["datasource"] = {"name": datasource["uid"]}
    return query


def _transformation(transformation: dict, what: str) -> dict:
    _known(f"{what} transformation", transformation, TRANSFORMATION_KEYS)
    spec = {k: v for k, v in transformation.items() if k != "id"}
    spec.setdefault("options", {})
    return {"kind": "Transformation", "group": transformation["id"], "spec": spec}


def _panel_link(link: dict, what: str) -> dict:
    _known(f"{what} link", link, PANEL_LINK_KEYS)
    result = {"title": link["title"], "url": link["url"]}
    if "targetBlank" in link:
        result["targetBlank"] = link["targetBlank"]
    return result


# ------------------------------------------------------------------ dashboard settings


def _dashboard_link(link: dict) -> dict:
    _known(f"dashboard link {link.get('title')!r}", link, DASHBOARD_LINK_KEYS)
    return {"title": link["title"], "type": link["type"], "icon": link.get("icon", "external link"),
            "tooltip": link.get("tooltip", ""), "url": link.get("url", ""), "tags": list(link.get("tags") or []),
            "asDropdown": link.get("asDropdown", False), "targetBlank": link.get("targetBlank", False),
            "includeVars": link.get("includeVars", False), "keepTime": link.get("keepTime", False)}


def _variable(variable: dict) -> dict:
    kind, what = variable.get("type"), f"variable {variable.get('name')!r}"
    if kind not in ("query", "datasource"):
        raise ConversionError(f"{what}: type {kind!r} has no v2 rendering here (known: datasource, query)")
    _known(what, variable, QUERY_VARIABLE_KEYS if kind == "query" else DATASOURCE_VARIABLE_KEYS)
    spec = {
        "name": variable["name"], "label": variable.get("label", ""),
        "hide": _mapped(f"{what} hide", variable.get("hide", 0), VARIABLE_HIDE),
        "refresh": _mapped(f"{what} refresh", variable.get("refresh", 1), VARIABLE_REFRESH),
        "regex": variable.get("regex", ""), "skipUrlSync": variable.get("skipUrlSync", False),
        # v2 requires `current`; without one in the classic model Grafana selects the default data source
        # or All on load, which an empty option leaves it to do.
        "current": variable.get("current") or {"text": "", "value": ""},
        "options": variable.get("options") or [], "multi": variable.get("multi", False),
        "includeAll": variable.get("includeAll", False), "allowCustomValue": True,
    }
    for key in ("allValue", "description"):
        if key in variable:
            spec[key] = variable[key]
    if kind == "datasource":
        return {"kind": "DatasourceVariable", "spec": {**spec, "pluginId": variable["query"]}}
    query = variable["query"] if isinstance(variable["query"], dict) else {"query": variable["query"]}
    spec |= {"query": _data_query(variable.get("datasource"), query, what),
             "sort": _mapped(f"{what} sort", variable.get("sort", 0), VARIABLE_SORT)}
    if "definition" in variable:
        spec["definition"] = variable["definition"]
    return {"kind": "QueryVariable", "spec": spec}


def _annotation(annotation: dict) -> dict:
    """The query goes to `query.spec`; what v1 keeps beside it (Prometheus titleFormat, tagKeys, ... and the
    built-in's `type`) to `legacyOptions`, where v2 keeps datasource-specific annotation settings."""
    what = f"annotation {annotation.get('name')!r}"
    spec = {"name": annotation["name"], "enable": annotation.get("enable", True),
            "hide": annotation.get("hide", False), "iconColor": annotation["iconColor"],
            "builtIn": bool(annotation.get("builtIn", 0)),
            "query": _data_query(annotation.get("datasource"), dict(annotation.get("target") or {}), what)}
    if "filter" in annotation:
        spec["filter"] = annotation["filter"]
    legacy = {k: v for k, v in annotation.items() if k not in ANNOTATION_KEYS}
    if legacy:
        spec["legacyOptions"] = legacy
    return {"kind": "AnnotationQuery", "spec": spec}


def _mapped(what: str, value, table: dict):
    if value not in table:
        raise ConversionError(f"{what} {value!r} has no v2 value (known: {', '.join(map(str, table))})")
    return table[value]


def _known(what: str, node: dict, keys: set) -> None:
    unknown = sorted(set(node) - keys)
    if unknown:
        raise ConversionError(f"{what}: {', '.join(unknown)} has no v2 rendering in llmdash.dashboards.v2; "
                              "teach the conversion before emitting it")


def rendered(classic: dict) -> dict:
    """`to_v2(classic)`, refused (exit 2) when the result breaks Grafana's v2 schema: what build and publish use."""
    from llmdash.dashboards.schema import v2_schema_problems

    resource = to_v2(classic)
    problems = v2_schema_problems(resource, RESOURCE_API_VERSION, KIND)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise LlmdashError(f"the v2 rendering of {classic.get('uid')} is invalid: {problems[0]}{more}")
    return resource
