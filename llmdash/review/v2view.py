"""A schema v2 dashboard seen the way the comparison sees a classic one, so `llmdash diff`, `publish` and
`--dry-run` name a v2 change exactly as a v1 one: `row "Preemption" / panel "KV-cache usage"`.

The projection keeps what a reviewer reads (each element with its name, kind, queries, units, thresholds,
options and links; each row with its title and collapse; the grid within the row; variables, annotations,
links, settings) and puts it where `llmdash.review.compare` looks for it: rows as row panels in layout
order, an element's grid below its row, its queries as targets. The element name stays on the panel
(`element`), so renaming an element is a reported change, not a silent re-pairing.
"""

from __future__ import annotations

from typing import Any

from llmdash.dashboards.v2 import is_v2

VARIABLE_TYPES = {"QueryVariable": "query", "DatasourceVariable": "datasource"}   # the classic `type` they render
SPEC_HANDLED = {"elements", "layout", "variables", "annotations", "links", "title", "description"}


def spec_of(model: dict) -> dict:
    """The spec of a v2 resource, or the model itself when it is a v2 spec already (publish's form)."""
    return model["spec"] if isinstance(model.get("spec"), dict) and "elements" in model["spec"] else model


def classic_view(model: dict) -> dict:
    """`model` (a v2 resource or spec) in the shape `compare.diff_dashboard` walks; a classic model as is."""
    if not is_v2(model):
        return model
    spec = spec_of(model)
    elements = spec.get("elements") if isinstance(spec.get("elements"), dict) else {}
    view = {key: value for key, value in spec.items() if key not in SPEC_HANDLED}
    view |= {"title": spec.get("title"), "description": spec.get("description"), "links": spec.get("links") or [],
             "panels": _panels(spec.get("layout"), elements),
             "templating": {"list": [_flat(v) for v in _list(spec.get("variables"))]},
             "annotations": {"list": [_annotation(a) for a in _list(spec.get("annotations"))]}}
    return view


def _list(value: Any) -> list:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _panels(layout: Any, elements: dict) -> list:
    """Rows in order, each followed by its elements, y counted on as Grafana stacks the rows."""
    panels: list = []
    y = 0
    rows = (layout or {}).get("spec", {}).get("rows") if (layout or {}).get("kind") == "RowsLayout" else None
    sections = rows if isinstance(rows, list) else [{"spec": {"title": "", "layout": layout, "hideHeader": True}}]
    for number, row in enumerate(_list(sections), start=1):
        spec = row.get("spec") if isinstance(row.get("spec"), dict) else {}
        if not spec.get("hideHeader"):
            panels.append({"type": "row", "id": f"row-{number}", "title": spec.get("title", ""),
                           "collapsed": bool(spec.get("collapse")), "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}})
            y += 1
        items = _list(((spec.get("layout") or {}).get("spec") or {}).get("items"))
        bottom = y
        for item in items:
            placed = item.get("spec") if isinstance(item.get("spec"), dict) else {}
            name = str((placed.get("element") or {}).get("name", ""))
            grid = {"x": placed.get("x", 0), "y": y + _number(placed.get("y")), "w": placed.get("width", 0),
                    "h": placed.get("height", 0)}
            panels.append(_element(name, elements.get(name), grid))
            bottom = max(bottom, grid["y"] + _number(grid["h"]))
        y = bottom
    return panels


def _number(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _element(name: str, element: Any, grid: dict) -> dict:
    spec = element.get("spec") if isinstance(element, dict) and isinstance(element.get("spec"), dict) else {}
    viz = spec.get("vizConfig") if isinstance(spec.get("vizConfig"), dict) else {}
    viz_spec = viz.get("spec") if isinstance(viz.get("spec"), dict) else {}
    data = (spec.get("data") or {}).get("spec") or {} if isinstance(spec.get("data"), dict) else {}
    panel = {"element": name, "id": spec.get("id"), "title": spec.get("title", ""), "type": viz.get("group"),
             "gridPos": grid, "description": spec.get("description"), "links": spec.get("links") or [],
             "fieldConfig": viz_spec.get("fieldConfig"), "options": viz_spec.get("options"),
             "targets": [_query(q) for q in _list(data.get("queries"))],
             "transformations": data.get("transformations") or []}
    if element is None:
        panel["missing"] = "the layout refers to an element that does not exist"
    return {key: value for key, value in panel.items() if value not in (None, [])}


def _query(query: dict) -> dict:
    spec = query.get("spec") if isinstance(query.get("spec"), dict) else {}
    data = spec.get("query") if isinstance(spec.get("query"), dict) else {}
    target = {"refId": spec.get("refId"), **(data.get("spec") if isinstance(data.get("spec"), dict) else {})}
    target["datasource"] = {"type": data.get("group"), "uid": (data.get("datasource") or {}).get("name")}
    if spec.get("hidden"):
        target["hide"] = True
    return target


def _flat(variable: dict) -> dict:
    spec = variable.get("spec") if isinstance(variable.get("spec"), dict) else {}
    return {"kind": variable.get("kind"), "type": VARIABLE_TYPES.get(variable.get("kind"), variable.get("kind")),
            **spec}


def _annotation(annotation: dict) -> dict:
    spec = dict(annotation.get("spec")) if isinstance(annotation.get("spec"), dict) else {}
    query = spec.pop("query", None)
    if isinstance(query, dict):
        spec["target"] = query.get("spec")
        spec["datasource"] = {"type": query.get("group"), "uid": (query.get("datasource") or {}).get("name")}
    return spec
