#!/usr/bin/env python3
"""Relax ts-json-schema-generator's output only where Grafana itself is laxer; write *.schema.json.

usage: relax.py RAW_DIR OUT_DIR PKG_DIR        (stdlib only; run by regenerate.sh)

The generator keeps every interface closed (additionalProperties: false) and every non-optional
field required. Each relaxation below cites the declaration in @grafana/schema (PKG_DIR) that
justifies it, is recorded as a "$comment" on the definition it changes, and fails the run when the
cited default no longer exists (re-check after a version bump). Deliberately NOT relaxed, because
they are real deviations a dashboard must fix: VizLegendOptions.showLegend (no default in the
package) and VariableOption.text/value (a variable's `current`).
"""

import json
import os
import re
import sys

RAW, OUT, PKG = sys.argv[1:4]
DASHBOARD_MJS = "dist/esm/raw/dashboard/x/types.gen.mjs"
COMMON_MJS = "dist/esm/common/common.gen.mjs"
STAT_MJS = "dist/esm/raw/composable/stat/panelcfg/x/types.gen.mjs"
TEXT_MJS = "dist/esm/raw/composable/text/panelcfg/x/types.gen.mjs"
TABLE_MJS = "dist/esm/raw/composable/table/panelcfg/x/types.gen.mjs"
VENEER = "dist/types/veneer/dashboard.types.d.ts"
COMMON = "dist/types/common/common.gen.d.ts"
V2 = "dist/types/schema/dashboard/v2/types.spec.gen.d.ts"
GENERATED = {"dashboard": "dashboard.json", "timeseries.options": "timeseries.Options.json",
             "timeseries.fieldconfig": "timeseries.FieldConfig.json", "stat.options": "stat.Options.json",
             "text.options": "text.Options.json", "table.options": "table.Options.json",
             "table.fieldconfig": "table.FieldConfig.json", "dashboard.v2": "dashboard.v2.json"}
# Panel types whose panelcfg declares no FieldConfig: fieldConfig.defaults.custom takes no keys.
NO_FIELD_CONFIG = {"stat": "dist/types/raw/composable/stat/panelcfg/x/types.gen.d.ts",
                   "text": "dist/types/raw/composable/text/panelcfg/x/types.gen.d.ts"}

# Required properties the package defaults (CUE `field: T | *default`; Grafana fills them in):
# (schema, definition, properties, .mjs holding the default, name of the default const).
UNREQUIRE = [
    ("dashboard", "AnnotationPanelFilter", ["ids"], DASHBOARD_MJS, "defaultAnnotationPanelFilter"),
    ("dashboard", "AnnotationQuery", ["enable"], DASHBOARD_MJS, "defaultAnnotationQuery"),
    ("dashboard", "AnnotationTarget", ["tags"], DASHBOARD_MJS, "defaultAnnotationTarget"),
    ("dashboard", "Dashboard", ["schemaVersion"], DASHBOARD_MJS, "defaultDashboard"),
    ("dashboard", "DashboardLink", ["asDropdown", "includeVars", "keepTime", "tags", "targetBlank"], DASHBOARD_MJS,
     "defaultDashboardLink"),
    ("dashboard", "FieldConfigSource", ["overrides"], DASHBOARD_MJS, "defaultFieldConfigSource"),
    ("dashboard", "GridPos", ["h", "w", "x", "y"], DASHBOARD_MJS, "defaultGridPos"),
    ("dashboard", "MatcherConfig", ["id"], DASHBOARD_MJS, "defaultMatcherConfig"),
    ("dashboard", "RowPanel", ["collapsed", "panels"], DASHBOARD_MJS, "defaultRowPanel"),
    ("dashboard", "ThresholdsConfig", ["steps"], DASHBOARD_MJS, "defaultThresholdsConfig"),
    # TimeSeriesLegendOptions extends common.VizLegendOptions, whose calcs default to []
    ("timeseries.options", "TimeSeriesLegendOptions", ["calcs"], COMMON_MJS, "defaultVizLegendOptions"),
    ("stat.options", "Options", ["colorMode", "graphMode", "justifyMode", "percentChangeColorMode",
                                 "showPercentChange", "textMode", "wideLayout"], STAT_MJS, "defaultOptions"),
    ("stat.options", "ReduceDataOptions", ["calcs"], COMMON_MJS, "defaultReduceDataOptions"),
    ("text.options", "Options", ["content", "mode"], TEXT_MJS, "defaultOptions"),
    ("text.options", "CodeOptions", ["language", "showLineNumbers", "showMiniMap"], TEXT_MJS, "defaultCodeOptions"),
    ("table.options", "Options", ["frameIndex", "showHeader"], TABLE_MJS, "defaultOptions"),
    # the table's FieldConfig extends common.TableFieldOptions; its module has no defaultFieldConfig
    ("table.fieldconfig", "FieldConfig", ["align", "inspect"], COMMON_MJS, "defaultTableFieldOptions"),
]

NULLABLE_DATASOURCE = {"anyOf": [{"$ref": "#/definitions/DataSourceRef"}, {"type": "null"}]}
# common.DataQuery: "Specific implementations will *extend* this interface", so it stays open.
DATA_QUERY = {
    "type": "object", "additionalProperties": True, "required": ["refId"],
    "properties": {"refId": {"type": "string"}, "hide": {"type": "boolean"},
                   "queryType": {"type": "string"}, "datasource": {}, "key": {"type": "string"}},
    "$comment": f"relaxed: {COMMON} `interface DataQuery` (open: datasource plugins extend it); "
                f"{VENEER} `AnnotationQuery<TQuery extends DataQuery>` target?: TQuery",
}


def defaults(mjs: str, const: str) -> tuple[set[str], int]:
    """Keys of `const <const> = {...}` in the package's .mjs, and the line it starts on."""
    with open(os.path.join(PKG, mjs)) as handle:
        source = handle.read()
    found = re.search(r"^const %s = \{\n(.*?)^\};" % const, source, re.S | re.M)
    if not found:
        sys.exit(f"stale relaxation: {const} not found in {mjs}")
    return set(re.findall(r"^  (\w+):", found.group(1), re.M)), source[: found.start()].count("\n") + 1


def note(definition: dict, text: str) -> None:
    definition["$comment"] = f"{definition['$comment']} | {text}" if "$comment" in definition else text


def relax(schemas: dict[str, dict]) -> None:
    for name, definition_name, props, mjs, const in UNREQUIRE:
        keys, line = defaults(mjs, const)
        definition = schemas[name]["definitions"][definition_name]
        for prop in props:
            if prop not in keys:
                sys.exit(f"stale relaxation: {const} has no {prop}")
            definition["required"].remove(prop)
        if not definition["required"]:
            del definition["required"]
        note(definition, f"relaxed: not required {props} (defaulted in {mjs}:{line} `{const}`)")

    d = schemas["dashboard"]["definitions"]
    # The veneer (what Grafana's code uses) re-exports common.DataSourceRef, which adds apiVersion.
    d["DataSourceRef"]["properties"]["apiVersion"] = {"type": "string"}
    note(d["DataSourceRef"], f"relaxed: +apiVersion ({VENEER}: `export type {{ CommonDataSourceRef as "
                             f"DataSourceRef }}`; {COMMON} `interface DataSourceRef {{ apiVersion?: string ... }}`)")
    # Keys the classic JSON carries that the raw v1 types lag behind (the v2 schema has them).
    d["VariableModel"]["properties"]["datasource"] = NULLABLE_DATASOURCE
    d["VariableModel"]["properties"]["definition"] = {"type": "string"}
    d["VariableModel"]["properties"]["filters"] = {"type": "array", "items": {"type": "object"}}
    note(d["VariableModel"], f"relaxed: datasource nullable ({VENEER} `interface VariableModel`: datasource?: "
                             f"DataSourceRef | null); +definition:string ({V2} `QueryVariableSpec` definition?: "
                             f"string); +filters:array ({V2} `AdhocVariableSpec` filters: AdHocFilterWithLabels[])")
    d["FieldConfig"]["properties"]["fieldMinMax"] = {"type": "boolean"}
    note(d["FieldConfig"], f"relaxed: +fieldMinMax:boolean ({V2} `interface FieldConfig` fieldMinMax?: boolean)")
    # Annotations: datasource optional and nullable, target any DataQuery, datasource-specific keys
    # (Prometheus expr, step, titleFormat, ...) at top level, which v2 keeps in legacyOptions.
    query = d["AnnotationQuery"]
    query["required"] = [r for r in query["required"] if r != "datasource"]
    query["properties"]["datasource"] = NULLABLE_DATASOURCE
    query["properties"]["target"] = {"anyOf": [{"$ref": "#/definitions/AnnotationTarget"},
                                               {"$ref": "#/definitions/DataQuery"}]}
    query["properties"]["snapshotData"] = {}
    query["additionalProperties"] = True
    d["DataQuery"] = DATA_QUERY
    note(query, f"relaxed: datasource optional+nullable, target may be any DataQuery, +snapshotData ({VENEER} "
                f"`interface AnnotationQuery<TQuery extends DataQuery = DataQuery>`); open for datasource-specific "
                f"keys ({V2} `AnnotationQuerySpec` legacyOptions?: Record<string, any>)")

    # The real deviations must stay required.
    assert "showLegend" in schemas["timeseries.options"]["definitions"]["TimeSeriesLegendOptions"]["required"]
    assert {"text", "value"} <= set(d["VariableOption"]["required"])
    # Schema v2 is taken as generated (no relaxation): the package ships no defaults for it (no .mjs under
    # dist/esm/schema/dashboard/v2), so nothing it requires may be left out. Checks that it is still the model
    # llmdash writes: a rows layout, elements by name, a variable's current value required.
    v2 = schemas["dashboard.v2"]["definitions"]
    assert {"elements", "layout", "variables", "annotations"} <= set(v2["Spec"]["required"])
    assert {"RowsLayoutKind", "GridLayoutItemSpec", "ElementReference"} <= set(v2)
    assert "current" in v2["QueryVariableSpec"]["required"]


def write(name: str, schema: dict) -> None:
    with open(os.path.join(OUT, f"{name}.schema.json"), "w") as handle:
        json.dump(schema, handle, indent=2, sort_keys=True)
        handle.write("\n")


def main() -> None:
    schemas = {}
    for name, raw in GENERATED.items():
        with open(os.path.join(RAW, raw)) as handle:
            schemas[name] = json.load(handle)
    relax(schemas)
    for name, schema in schemas.items():
        write(name, schema)
    for panel_type, declaration in NO_FIELD_CONFIG.items():
        write(f"{panel_type}.fieldconfig", {
            "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "additionalProperties": False, "properties": {},
            "$comment": f"synthetic: {declaration} declares no FieldConfig, so fieldConfig.defaults.custom "
                        f"of a {panel_type} panel takes no keys"})


main()
