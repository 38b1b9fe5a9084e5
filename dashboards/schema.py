"""Check a dashboard against Grafana's own published model, not only our idea of it.

The JSON schemas in `grafana_schema/` are generated from the TypeScript types of the npm package
`@grafana/schema` (source, version, licence and every relaxation: `grafana_schema/README.md`).
Interfaces stay closed, so a misspelled option, a string where a number belongs or an unknown enum
value is reported here instead of being silently dropped or defaulted by Grafana.
"""

from __future__ import annotations

import collections
import json
from functools import cache
from pathlib import Path

SCHEMA_DIR = Path(__file__).parent / "grafana_schema"
# Panel types we emit -> (schema of `options`, schema of `fieldConfig.defaults.custom`).
PANEL_SCHEMAS = {
    "timeseries": ("timeseries.options", "timeseries.fieldconfig"),
    "stat": ("stat.options", "stat.fieldconfig"),
    "text": ("text.options", "text.fieldconfig"),
    "table": ("table.options", "table.fieldconfig"),
}
ROW = "row"  # the dashboard schema's RowPanel covers it whole: rows have no options or field config


@cache
def _validator(name: str):
    """Compiled once per process; jsonschema is imported only when a dashboard is checked."""
    from jsonschema import Draft7Validator  # the generator writes draft-07

    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    definitions = schema.pop("definitions", {})
    return Draft7Validator({**_inline_refs(schema, definitions), "definitions": definitions})


def _inline_refs(node, definitions: dict, expanding: tuple = ()):
    """Replace each `#/definitions/X` reference by X itself: resolving references is about half of
    jsonschema's time on our dashboards, and the build must stay fast. A recursive definition keeps
    its reference (the root keeps `definitions`, so it still resolves)."""
    if isinstance(node, list):
        return [_inline_refs(item, definitions, expanding) for item in node]
    if not isinstance(node, dict):
        return node
    name = node.get("$ref", "").removeprefix("#/definitions/")
    if name in definitions and name not in expanding:
        return _inline_refs(definitions[name], definitions, (*expanding, name))  # draft-07: $ref siblings ignored
    return {key: _inline_refs(value, definitions, expanding) for key, value in node.items()}


def schema_problems(dashboard: dict) -> list[str]:
    """One line per violation of the Grafana schema, naming the panel and the JSON path. The same
    dashboard is checked once per process (builds in one process repeat it: build, then diff or doctor)."""
    return list(_problems_of(json.dumps(dashboard, sort_keys=True)))


@cache
def _problems_of(text: str) -> tuple[str, ...]:
    dashboard = json.loads(text)
    titles = {path: panel.get("title") for path, panel in _panels(dashboard)}
    problems = [_line(error, (), titles) for error in _errors("dashboard", dashboard)]
    for path, panel in _panels(dashboard):
        kind = panel.get("type")
        if kind == ROW:
            continue
        if kind not in PANEL_SCHEMAS:
            problems.append(f"panel {titles[path]!r} {_json_path((*path, 'type'))}: {kind!r} has no Grafana "
                            f"schema here (known: {', '.join(sorted(PANEL_SCHEMAS))})")
            continue
        options_schema, custom_schema = PANEL_SCHEMAS[kind]
        if "options" in panel:
            problems += [_line(e, (*path, "options"), titles) for e in _errors(options_schema, panel["options"])]
        custom = _get(panel, "fieldConfig", "defaults", "custom")
        if custom is not None:
            problems += [_line(e, (*path, "fieldConfig", "defaults", "custom"), titles)
                         for e in _errors(custom_schema, custom)]
    return tuple(dict.fromkeys(problems))  # a non-object `options` fails both the dashboard and the panel schema


def _get(node, *keys):
    """node[k1][k2]..., or None where a level is missing or not an object (the dashboard schema reports that)."""
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _panels(dashboard: dict, base: tuple = ()):
    """(JSON path, panel) for every panel, rows' nested panels included."""
    panels = dashboard.get("panels")
    for index, panel in enumerate(panels if isinstance(panels, list) else []):
        if isinstance(panel, dict):
            yield (*base, "panels", index), panel
            yield from _panels(panel, (*base, "panels", index))


def _errors(schema: str, instance) -> list:
    """The leaf errors: for anyOf/oneOf, those of the branch the instance came closest to."""
    leaves = []
    pending = list(_validator(schema).iter_errors(instance))
    while pending:
        error = pending.pop()
        if not error.context:
            leaves.append(error)
            continue
        branches = collections.defaultdict(list)
        for sub in error.context:
            branches[sub.relative_schema_path[0]].append(sub)
        # Fewest errors wins (a stat panel fails RowPanel on many keys, Panel on the one typo);
        # on a tie, the branch whose errors reach deepest into the instance.
        pending += min(branches.values(), key=lambda errs: (len(errs), -max(len(e.path) for e in errs)))
    return sorted(leaves, key=lambda e: [str(p) for p in e.absolute_path])


def _line(error, prefix: tuple, titles: dict, noun: str = "panel") -> str:
    path = (*prefix, *error.absolute_path)
    panel = max((p for p in titles if path[:len(p)] == p), key=len, default=None)
    message = error.message if len(error.message) <= 200 else error.message[:197] + "..."
    where = "" if not panel else f"panel {titles[panel]!r} " if noun == "panel" else \
        f"{noun} {panel[-1]!r} (panel {titles[panel]!r}) "
    return f"{where}{_json_path(path)}: {message} (Grafana schema)"


def _json_path(path: tuple) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


# ---------------------------------------------------------------- schema v2

V2_SCHEMA = "dashboard.v2"   # the `Spec` of dashboard.grafana.app/v2 (grafana_schema/README.md)


def v2_schema_problems(resource: dict, api_version: str, kind: str) -> list[str]:
    """One line per violation in a v2 Dashboard resource: its envelope (`api_version`, `kind`, a
    metadata.name), its spec against the v2 `Spec`, and each panel element's options and custom field config
    against the same panel schemas as v1 (v2 leaves `VizConfigSpec.options` open: `Record<string, any>`)."""
    return list(_v2_problems_of(json.dumps(resource, sort_keys=True), api_version, kind))


@cache
def _v2_problems_of(text: str, api_version: str, kind: str) -> tuple[str, ...]:
    resource = json.loads(text)
    problems = []
    if resource.get("apiVersion") != api_version or resource.get("kind") != kind:
        problems.append(f"$: apiVersion/kind {resource.get('apiVersion')!r}/{resource.get('kind')!r}, "
                        f"not {api_version!r}/{kind!r}")
    name = _get(resource, "metadata", "name")
    if not isinstance(name, str) or not name:
        problems.append("$.metadata.name: the dashboard uid is missing")
    spec = resource.get("spec")
    titles = {}
    elements = _get(resource, "spec", "elements")
    for key, element in (elements.items() if isinstance(elements, dict) else ()):
        titles[("spec", "elements", key)] = _get(element, "spec", "title")
    problems += [_line(error, ("spec",), titles, "element") for error in _errors(V2_SCHEMA, spec)]
    for path, title in titles.items():
        viz = _get(resource, *path, "spec", "vizConfig")
        kind_ = _get(viz, "group")
        if _get(resource, *path, "kind") != "Panel" or not isinstance(viz, dict):
            continue
        if kind_ not in PANEL_SCHEMAS:
            problems.append(f"element {path[-1]!r} {_json_path((*path, 'spec', 'vizConfig', 'group'))}: {kind_!r} "
                            f"has no Grafana schema here (known: {', '.join(sorted(PANEL_SCHEMAS))})")
            continue
        options_schema, custom_schema = PANEL_SCHEMAS[kind_]
        at = (*path, "spec", "vizConfig", "spec")
        if "options" in (viz.get("spec") or {}):
            problems += [_line(e, (*at, "options"), titles, "element") for e in _errors(options_schema,
                                                                                         viz["spec"]["options"])]
        custom = _get(viz, "spec", "fieldConfig", "defaults", "custom")
        if custom is not None:
            problems += [_line(e, (*at, "fieldConfig", "defaults", "custom"), titles, "element")
                         for e in _errors(custom_schema, custom)]
    return tuple(dict.fromkeys(problems))
