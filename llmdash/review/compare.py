"""Semantic comparison of Grafana dashboard models and Prometheus rule files: the change list.

A raw JSON diff of a dashboard drowns the one change that matters in ids, gridPos
numbers and escaped PromQL. This module compares what a reviewer sees instead:
panels are matched by their title within their row (never by list position), positions
are compared relative to the row, and every changed PromQL expression is reported as a
before/after pair. `llmdash diff`, `llmdash layout --base` and `publish --dry-run` all
use it, so the comparison exists once; `llmdash.review.render` shows the list it makes.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from llmdash.dashboards.v2 import is_v2
from llmdash.dashboards.walk import grid_order, grid_value, walk_panels
from llmdash.errors import LlmdashError
from llmdash.review.v2view import VARIABLE_TYPES, classic_view, spec_of
from llmdash.inputs import read_text, read_yaml, shorten

# Fields Grafana owns or rewrites on every save/load; they say nothing about the dashboard.
SERVER_OWNED_KEYS = ("id", "version", "iteration")
# The Grafana build that last rendered a panel, stamped on UI save.
VOLATILE_PANEL_KEYS = ("pluginVersion",)
# Variable types whose option list Grafana re-queries on load instead of reading it.
QUERIED_VARIABLE_TYPES = ("query", "datasource")
# A built dashboard is ~100 KB; a generated/ file far above that is not one, and is not read.
MAX_OUTPUT_BYTES = 16 << 20
GRID_KEYS = ("x", "y", "w", "h")
V2_DIR = "dashboards-v2"      # where `llmdash build` writes the schema v2 twins
V2_SUFFIX = "(schema v2)"     # what follows a v2 twin's stem in the change list


@dataclass(frozen=True)
class Change:
    """One reviewer-visible difference.

    `kind` is one of: dashboard-added, dashboard-removed, panel-added, panel-removed,
    panel-moved, panel-resized, title, description, unit, thresholds, expr, variable,
    annotation, link, setting, rule-added, rule-removed, rule-changed. Every changed PromQL
    expression (panel query, annotation query, alert or recording rule) has kind "expr".
    `where` is a human label such as `row "Throughput vs latency" / panel "ITL p99"`;
    `before`/`after` are display strings, None when the thing did not exist.
    """

    kind: str
    where: str
    before: str | None
    after: str | None


# --------------------------------------------------------------------------- normalise


def normalise(dashboard: dict) -> dict:
    """A copy without server-owned and volatile fields, panels in Grafana's display order.

    Two models that differ only in key order, panel list order, tag order, `id`,
    `version`, `iteration`, panel `pluginVersion` or viewer state of queried variables
    (`current`, re-queried `options`) normalise equal.
    """
    model = copy.deepcopy(dashboard)
    if is_v2(model):
        return _normalise_v2(model)
    for key in SERVER_OWNED_KEYS:
        model.pop(key, None)
    if isinstance(model.get("panels"), list):
        model["panels"] = _normalise_panels(model["panels"])
    if isinstance(model.get("tags"), list):
        model["tags"] = sorted(model["tags"], key=str)
    for variable in _list_at(model, "templating"):
        if isinstance(variable, dict):
            variable.pop("current", None)
            if variable.get("type") in QUERIED_VARIABLE_TYPES:
                variable.pop("options", None)
    return model


def _normalise_v2(model: dict) -> dict:
    """The v2 counterpart: Grafana stamps its build on `vizConfig.version` when it saves an element (what
    `pluginVersion` is in v1), and re-queries the options of query and datasource variables."""
    spec = spec_of(model)
    for element in (spec.get("elements") or {}).values() if isinstance(spec.get("elements"), dict) else ():
        viz = (element.get("spec") or {}).get("vizConfig") if isinstance(element, dict) else None
        if isinstance(viz, dict):
            viz.pop("version", None)
    if isinstance(spec.get("tags"), list):
        spec["tags"] = sorted(spec["tags"], key=str)
    for variable in spec.get("variables") or [] if isinstance(spec.get("variables"), list) else ():
        if isinstance(variable, dict) and isinstance(variable.get("spec"), dict):
            variable["spec"].pop("current", None)
            if variable.get("kind") in VARIABLE_TYPES:
                variable["spec"].pop("options", None)
    return model


def _normalise_panels(panels: list) -> list:
    for panel in panels:
        if isinstance(panel, dict):
            for key in VOLATILE_PANEL_KEYS:
                panel.pop(key, None)
            if isinstance(panel.get("panels"), list):
                panel["panels"] = _normalise_panels(panel["panels"])
    return sorted(panels, key=_grid_order)


def _grid_order(panel: Any) -> tuple:
    """Grafana sorts panels by gridPos (y, then x) on load; list order carries no meaning."""
    if not isinstance(panel, dict):
        return (0, 0, 0, "")
    panel_id = panel.get("id")
    return (*grid_order(panel), panel_id if isinstance(panel_id, int) else 0, str(panel.get("title", "")))


def _list_at(model: dict, section: str) -> list:
    holder = model.get(section)
    if isinstance(holder, dict) and isinstance(holder.get("list"), list):
        return holder["list"]
    return []


# --------------------------------------------------------------------------- panel identity


@dataclass
class PlacedPanel:
    """A panel with the row it sits in and its position relative to that row."""

    label: str
    row: str | None
    panel: dict
    offset_y: int
    nested: bool = False  # in its row's own `panels` (a collapsed row's): not laid out until the row expands

    @property
    def is_row(self) -> bool:
        return self.panel.get("type") == "row"

    @property
    def title(self) -> str:
        return str(self.panel.get("title") or "")


def place_panels(dashboard: dict) -> list[PlacedPanel]:
    """Every panel and row of a dashboard with a stable label, in display order.

    A panel belongs to the nearest row above it (or to a collapsed row's `panels`); its
    label is `row "<row>" / panel "<title>"`, falling back to the panel id when the title
    is empty or repeated within the row.
    """
    placed: list[PlacedPanel] = []
    for item in walk_panels(normalise(dashboard)):
        if item.is_row:
            placed.append(PlacedPanel("", None, item.panel, 0))
            continue
        row_title = str(item.row.get("title") or f"#{item.row.get('id')}") if item.row is not None else None
        row_bottom = grid_value(item.row, "y") + grid_value(item.row, "h", 1) if item.row is not None else 0
        top = grid_value(item.panel, "y", row_bottom if item.nested else 0)
        placed.append(PlacedPanel("", row_title, item.panel, top - row_bottom, item.nested))
    _assign_labels(placed)
    return placed


def _assign_labels(placed: list[PlacedPanel]) -> None:
    def base(item: PlacedPanel) -> str:
        name = _quoted(item.title) if item.title else f"#{item.panel.get('id')}"
        if item.is_row:
            return f"row {name}"
        return f"{_row_name(item.row)} / panel {name}" if item.row is not None else f"panel {name}"

    counts: dict[str, int] = {}
    for item in placed:
        counts[base(item)] = counts.get(base(item), 0) + 1
    for item in placed:
        label = base(item)
        item.label = label if counts[label] == 1 else f"{label} #{item.panel.get('id')}"


# --------------------------------------------------------------------------- dashboards


def diff_dashboard(old: dict | None, new: dict | None) -> list[Change]:
    """What a reviewer needs to know about going from `old` to `new` (None = absent)."""
    if old is None and new is None:
        return []
    if old is None:
        if is_v2(new):
            return diff_dashboard(None, classic_view(normalise(new)))
        changes = [Change("dashboard-added", "dashboard", None, _text(new.get("title")))]
        return changes + _panel_changes({"panels": []}, new)
    if new is None:
        if is_v2(old):
            return diff_dashboard(classic_view(normalise(old)), None)
        return [Change("dashboard-removed", "dashboard", _text(old.get("title")), None)]
    if is_v2(old) or is_v2(new):
        return _diff_v2(old, new)
    old_n, new_n = normalise(old), normalise(new)
    changes: list[Change] = []
    for key in ("title", "description"):
        if old_n.get(key) != new_n.get(key):
            changes.append(Change(key, "dashboard", _text(old_n.get(key)), _text(new_n.get(key))))
    changes += _panel_changes(old_n, new_n)
    changes += _variable_changes(_list_at(old_n, "templating"), _list_at(new_n, "templating"))
    changes += _annotation_changes(_list_at(old_n, "annotations"), _list_at(new_n, "annotations"))
    changes += _keyed_changes("link", "link", _keyed(old_n.get("links") or [], ("title", "url")),
                              _keyed(new_n.get("links") or [], ("title", "url")))
    for section in ("templating", "annotations"):
        changes += _setting_changes(f"dashboard / {section}", _beside_list(old_n.get(section)),
                                    _beside_list(new_n.get(section)))
    handled = {"title", "description", "panels", "templating", "annotations", "links"}
    changes += _setting_changes("dashboard", _without(old_n, handled), _without(new_n, handled))
    if not changes and old_n != new_n:
        changes.append(_unitemised(old_n, new_n))
    return changes


def _diff_v2(old: dict, new: dict) -> list[Change]:
    """Element by element, through the classic view (llmdash.review.v2view), so a v2 change is named by row and
    panel title as a v1 one is; either side may be classic (a dashboard Grafana stores in the other schema)."""
    changes = diff_dashboard(classic_view(normalise(old)), classic_view(normalise(new)))
    if not changes and normalise(old) != normalise(new):
        changes.append(Change("setting", "dashboard", None, "models differ in a field not itemised here; "
                                                            "compare the JSON"))
    return changes


def _beside_list(section: Any) -> Any:
    """A templating/annotations section without its `list` (compared entry by entry elsewhere)."""
    return _without(section, {"list"}) if isinstance(section, dict) else section


def _unitemised(old: dict, new: dict) -> Change:
    """The honest last word when models differ but nothing above names how, so publish never shows an empty diff.

    The usual case is a vertical shift of whole rows, which keeps every panel's place within its row.
    """
    if _drop_grid_y(old) == _drop_grid_y(new):
        return Change("panel-moved", "dashboard", None, "rows shifted vertically; order, sizes and rows unchanged")
    return Change("setting", "dashboard", None, "models differ in a field not itemised here; compare the JSON")


def _drop_grid_y(model: dict) -> dict:
    def strip(panels):
        return [{**p, "gridPos": _without(p.get("gridPos") or {}, {"y"}), "panels": strip(p.get("panels") or [])}
                if isinstance(p, dict) else p for p in panels]

    return {**model, "panels": strip(model.get("panels") or [])}


def _panel_changes(old: dict, new: dict) -> list[Change]:
    old_list, new_list = place_panels(old), place_panels(new)
    changes = _row_renames(old_list, new_list)
    old_placed = {p.label: p for p in old_list}
    new_placed = {p.label: p for p in new_list}
    pairs = [(old_placed[label], new_placed[label]) for label in new_placed if label in old_placed]
    gone = [p for label, p in old_placed.items() if label not in new_placed]
    came = [p for label, p in new_placed.items() if label not in old_placed]

    # A panel whose title is unique among the unmatched ones moved to another row.
    for before, after in _pair_by(gone, came, lambda p: p.title if p.title and not p.is_row else None):
        changes.append(Change("panel-moved", after.label, _row_name(before.row), _row_name(after.row)))
        pairs.append((before, after))
    # Same id and type but a new title: the panel was renamed.
    for before, after in _pair_by(gone, came, lambda p: (p.panel.get("type"), p.panel.get("id"))):
        changes.append(Change("title", after.label, before.title, after.title))
        pairs.append((before, after))

    for item in gone:
        changes.append(Change("panel-removed", item.label, _panel_summary(item), None))
        changes += _query_changes(item.label, item.panel, {})
    changes += _row_order_changes(old_placed, new_placed)
    for before, after in pairs:
        changes += _compare_panel(before, after)
    for item in came:
        changes.append(Change("panel-added", item.label, None, _panel_summary(item)))
        changes += _query_changes(item.label, {}, item.panel)
    return changes


def _row_renames(old_list: list[PlacedPanel], new_list: list[PlacedPanel]) -> list[Change]:
    """Report renamed rows (same id, new title) and relabel their old children to match.

    Without this, renaming a row would report every panel in it as moved.
    """
    new_labels = {p.label for p in new_list}
    old_labels = {p.label for p in old_list}
    gone = [p for p in old_list if p.is_row and p.label not in new_labels]
    came = [p for p in new_list if p.is_row and p.label not in old_labels]
    renamed = _pair_by(gone, came, lambda p: p.panel.get("id"))
    changes = [Change("title", after.label, before.title, after.title) for before, after in renamed]
    titles = {before.title: after.title for before, after in renamed if before.title and after.title}
    for item in old_list:
        if item.is_row and item.title in titles:
            item.panel = {**item.panel, "title": titles[item.title]}
        elif item.row in titles:
            item.row = titles[item.row]
    _assign_labels(old_list)
    return changes


def _row_name(row: str | None) -> str:
    return f"row {_quoted(row)}" if row is not None else "(no row)"


def _pair_by(gone: list[PlacedPanel], came: list[PlacedPanel], key) -> list[tuple[PlacedPanel, PlacedPanel]]:
    """Pair unmatched panels whose key is unique on both sides; removes them from the lists."""

    def unique(items):
        seen: dict = {}
        for item in items:
            k = key(item)
            if k is not None:
                seen.setdefault(k, []).append(item)
        return {k: v[0] for k, v in seen.items() if len(v) == 1}

    old_by, new_by = unique(gone), unique(came)
    pairs = [(old_by[k], new_by[k]) for k in new_by if k in old_by]
    for before, after in pairs:
        gone.remove(before)
        came.remove(after)
    return pairs


def _row_order_changes(old_placed: dict, new_placed: dict) -> list[Change]:
    """Rows that left the common order; rows added or removed elsewhere do not count as moves."""
    old_rows = [label for label, p in old_placed.items() if p.is_row and label in new_placed]
    new_rows = [label for label, p in new_placed.items() if p.is_row and label in old_placed]
    kept = set()
    for block in difflib.SequenceMatcher(a=old_rows, b=new_rows, autojunk=False).get_matching_blocks():
        kept.update(old_rows[block.a:block.a + block.size])
    return [Change("panel-moved", label, f"row {old_rows.index(label) + 1} of {len(old_rows)}",
                   f"row {new_rows.index(label) + 1} of {len(new_rows)}")
            for label in new_rows if label not in kept]


def _panel_summary(item: PlacedPanel) -> str:
    grid = item.panel.get("gridPos") or {}
    if item.is_row:
        return f"row at y={grid.get('y', 0)}"
    return (f"{item.panel.get('type', '?')} {grid.get('w', '?')}x{grid.get('h', '?')} "
            f"at x={grid.get('x', '?')} y=+{item.offset_y}")


def _compare_panel(before: PlacedPanel, after: PlacedPanel) -> list[Change]:
    where = after.label
    old, new = before.panel, after.panel
    changes: list[Change] = []
    old_grid, new_grid = old.get("gridPos") or {}, new.get("gridPos") or {}
    if not after.is_row:
        old_pos = (old_grid.get("x"), before.offset_y)
        new_pos = (new_grid.get("x"), after.offset_y)
        if old_pos != new_pos:
            changes.append(Change("panel-moved", where, f"x={old_pos[0]} y=+{old_pos[1]}",
                                  f"x={new_pos[0]} y=+{new_pos[1]}"))
        old_size = (old_grid.get("w"), old_grid.get("h"))
        new_size = (new_grid.get("w"), new_grid.get("h"))
        if old_size != new_size:
            changes.append(Change("panel-resized", where, f"{old_size[0]}x{old_size[1]}",
                                  f"{new_size[0]}x{new_size[1]}"))
    if old.get("description") != new.get("description"):
        changes.append(Change("description", where, _text(old.get("description")), _text(new.get("description"))))
    old_defaults = (old.get("fieldConfig") or {}).get("defaults") or {}
    new_defaults = (new.get("fieldConfig") or {}).get("defaults") or {}
    if old_defaults.get("unit") != new_defaults.get("unit"):
        changes.append(Change("unit", where, _text(old_defaults.get("unit")), _text(new_defaults.get("unit"))))
    if old_defaults.get("thresholds") != new_defaults.get("thresholds"):
        changes.append(Change("thresholds", where, _thresholds(old_defaults.get("thresholds")),
                              _thresholds(new_defaults.get("thresholds"))))
    changes += _query_changes(where, old, new)
    ignored = {"id", "gridPos", "title", "description", "targets", "panels"}
    changes += _setting_changes(where, _panel_rest(old, ignored), _panel_rest(new, ignored))
    return changes


def _panel_rest(panel: dict, ignored: set) -> dict:
    rest = _without(panel, ignored)
    defaults = (rest.get("fieldConfig") or {}).get("defaults")
    if isinstance(defaults, dict):
        rest["fieldConfig"] = dict(rest["fieldConfig"])
        rest["fieldConfig"]["defaults"] = _without(defaults, {"unit", "thresholds"})
    return rest


def _query_changes(where: str, old: dict, new: dict) -> list[Change]:
    old_targets = _keyed(old.get("targets") or [], ("refId",))
    new_targets = _keyed(new.get("targets") or [], ("refId",))
    changes: list[Change] = []
    for ref in list(old_targets) + [r for r in new_targets if r not in old_targets]:
        before, after = old_targets.get(ref), new_targets.get(ref)
        query_where = f"{where} / query {ref}"
        old_expr = before.get("expr") if before else None
        new_expr = after.get("expr") if after else None
        if old_expr != new_expr:
            changes.append(Change("expr", query_where, _text(old_expr), _text(new_expr)))
        if before and after:
            changes += _setting_changes(query_where, _without(before, {"expr", "refId"}),
                                        _without(after, {"expr", "refId"}))
    return changes


def _variable_changes(old: list, new: list) -> list[Change]:
    return _keyed_changes("variable", "variable", _keyed(old, ("name",)), _keyed(new, ("name",)))


def _annotation_changes(old: list, new: list) -> list[Change]:
    old_by, new_by = _keyed(old, ("name",)), _keyed(new, ("name",))
    changes: list[Change] = []
    for name in list(old_by) + [n for n in new_by if n not in old_by]:
        before, after = old_by.get(name), new_by.get(name)
        where = f"annotation {_quoted(name)}"
        old_expr, new_expr = _annotation_expr(before), _annotation_expr(after)
        if before is None or after is None:  # its query follows as an expr pair
            changes.append(Change("annotation", where, _summary(before and _annotation_rest(before)),
                                  _summary(after and _annotation_rest(after))))
        else:
            changes += _setting_changes(where, _annotation_rest(before), _annotation_rest(after), kind="annotation")
        if old_expr != new_expr:
            changes.append(Change("expr", where, old_expr, new_expr))
    return changes


def _annotation_expr(annotation: dict | None) -> str | None:
    if not annotation:
        return None
    target = annotation.get("target")
    expr = target.get("expr") if isinstance(target, dict) else None
    return _text(expr if expr is not None else annotation.get("expr"))


def _annotation_rest(annotation: dict) -> dict:
    rest = _without(annotation, {"expr"})
    if isinstance(rest.get("target"), dict):
        rest["target"] = _without(rest["target"], {"expr"})
    return rest


def _keyed_changes(kind: str, noun: str, old_by: dict, new_by: dict) -> list[Change]:
    changes: list[Change] = []
    for name in list(old_by) + [n for n in new_by if n not in old_by]:
        before, after = old_by.get(name), new_by.get(name)
        where = f"{noun} {_quoted(name)}"
        if before is None or after is None:
            changes.append(Change(kind, where, _summary(before), _summary(after)))
        else:
            changes += _setting_changes(where, before, after, kind=kind)
    return changes


def _keyed(items: Iterable, fields: tuple[str, ...]) -> dict[str, dict]:
    """Index list entries by the first present field (position as last resort); repeats get #n."""
    keyed: dict[str, dict] = {}
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            item = {"value": item}
        name = next((str(item[f]) for f in fields if item.get(f) not in (None, "")), f"#{position + 1}")
        keyed[_unique_key(keyed, name)] = item
    return keyed


def _unique_key(taken: dict, name: str) -> str:
    """`name`, or `name #2`, `name #3`… when an earlier entry already has it."""
    key, n = name, 1
    while key in taken:
        n += 1
        key = f"{name} #{n}"
    return key


def _setting_changes(where: str, old: Any, new: Any, kind: str = "setting", path: str = "") -> list[Change]:
    """Leaf-level differences between two JSON values, labelled with their dotted path."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[Change] = []
        for key in list(old) + [k for k in new if k not in old]:
            if key not in new:
                changes.append(Change(kind, _join(where, path, key), _json(old[key]), None))
            elif key not in old:
                changes.append(Change(kind, _join(where, path, key), None, _json(new[key])))
            else:
                sub = f"{path}.{key}" if path else str(key)
                changes += _setting_changes(where, old[key], new[key], kind, sub)
        return changes
    return [Change(kind, f"{where} / {path}" if path else where, _json(old), _json(new))]


def _join(where: str, path: str, key: Any) -> str:
    return f"{where} / {path}.{key}" if path else f"{where} / {key}"


def _without(mapping: dict, keys: set) -> dict:
    return {k: v for k, v in mapping.items() if k not in keys}


def _thresholds(thresholds: Any) -> str | None:
    """`green | orange ≥ 0.5 | red ≥ 1 (absolute)`: how Grafana's threshold editor reads."""
    if thresholds is None:
        return None
    if not isinstance(thresholds, dict) or not isinstance(thresholds.get("steps"), list):
        return _json(thresholds)
    steps = []
    for step in thresholds["steps"]:
        if not isinstance(step, dict):
            steps.append(_json(step))
        elif step.get("value") is None:
            steps.append(str(step.get("color")))
        else:
            steps.append(f"{step.get('color')} ≥ {step.get('value')}")
    return " | ".join(steps) + f" ({thresholds.get('mode', 'absolute')})"


def _summary(item: dict | None) -> str | None:
    return None if item is None else _json(item)


def _quoted(name: str) -> str:
    """Label quoting that keeps a title containing quotes or " / " unambiguous."""
    return json.dumps(name, ensure_ascii=False)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


# --------------------------------------------------------------------------- rule files


def diff_rules(old: dict | None, new: dict | None) -> list[Change]:
    """Alert and recording rules added, removed or changed, keyed by alert/record name."""
    old_rules, new_rules = _index_rules(old), _index_rules(new)
    changes: list[Change] = []
    for label in list(old_rules) + [name for name in new_rules if name not in old_rules]:
        before, after = old_rules.get(label), new_rules.get(label)
        if after is None:
            changes.append(Change("rule-removed", label, _text(before.get("expr")), None))
        elif before is None:
            changes.append(Change("rule-added", label, None, _text(after.get("expr"))))
        else:
            if before.get("expr") != after.get("expr"):
                changes.append(Change("expr", label, _text(before.get("expr")), _text(after.get("expr"))))
            changes += _setting_changes(label, _without(before, {"expr"}), _without(after, {"expr"}),
                                        kind="rule-changed")
    changes += _group_changes(old, new)
    return changes


def _index_rules(rule_file: dict | None) -> dict[str, dict]:
    """`alert "X"` -> rule with its group name; repeated names are told apart by severity."""
    entries: list[tuple[str, dict]] = []
    for group in _groups(rule_file):
        for rule in group.get("rules") or []:
            if not isinstance(rule, dict):
                continue
            noun = "alert" if "alert" in rule else "record"
            entries.append((f"{noun} {_quoted(str(rule.get(noun)))}", {**rule, "group": group.get("name")}))
    counts: dict[str, int] = {}
    for label, _ in entries:
        counts[label] = counts.get(label, 0) + 1
    indexed: dict[str, dict] = {}
    for label, rule in entries:
        if counts[label] > 1:
            severity = (rule.get("labels") or {}).get("severity")
            label = f"{label} [severity={severity}]" if severity else label
        indexed[_unique_key(indexed, label)] = rule
    return indexed


def _group_changes(old: dict | None, new: dict | None) -> list[Change]:
    def settings(rule_file):
        return {str(g.get("name")): _without(g, {"name", "rules"}) for g in _groups(rule_file)}

    old_groups, new_groups = settings(old), settings(new)
    changes: list[Change] = []
    for name in old_groups.keys() & new_groups.keys():
        changes += _setting_changes(f"group {_quoted(name)}", old_groups[name], new_groups[name], kind="rule-changed")
    return sorted(changes, key=lambda c: c.where)


def _groups(rule_file: dict | None) -> list[dict]:
    if not isinstance(rule_file, dict):
        return []
    return [g for g in rule_file.get("groups") or [] if isinstance(g, dict)]


# --------------------------------------------------------------------------- build outputs


@dataclass
class BuildOutput:
    """What `llmdash build` writes: dashboards by file stem, rule files by engine."""

    dashboards: dict[str, dict]
    rules: dict[str, dict]


def load_output(root: Path, shown: str | None = None) -> BuildOutput:
    """Read `<root>/dashboards/*.json` and `<root>/rules/*.rules.yaml`; missing folders are empty.

    The files may come from a git revision, so each is read bounded (`MAX_OUTPUT_BYTES`, YAML as
    strictly as a config) and a dashboard whose grid is not numbers is refused here, in one line
    naming the file as `shown` (default `root`) followed by its path below it.
    """
    def where(path: Path) -> str:
        return f"{shown or root}/{path.relative_to(root).as_posix()}"

    dashboards: dict[str, dict] = {}
    rules: dict[str, dict] = {}
    for path in sorted((root / "dashboards").glob("*.json")):
        try:
            dashboards[path.stem] = _checked_dashboard(json.loads(read_text(path, "dashboard", MAX_OUTPUT_BYTES)))
        except (ValueError, RecursionError) as exc:
            raise LlmdashError(f"{where(path)}: not a readable dashboard JSON file ({_first_line(exc)})") from None
        except LlmdashError as exc:
            raise LlmdashError(f"{where(path)}: {str(exc).removeprefix(f'{path}: ')}") from None
    # The schema v2 twins (generated/dashboards-v2/), compared element by element under their own name.
    for path in sorted((root / V2_DIR).glob("*.json")):
        try:
            dashboards[f"{path.stem} {V2_SUFFIX}"] = _checked_dashboard(
                json.loads(read_text(path, "dashboard", MAX_OUTPUT_BYTES)))
        except (ValueError, RecursionError) as exc:
            raise LlmdashError(f"{where(path)}: not a readable dashboard JSON file ({_first_line(exc)})") from None
    for path in sorted((root / "rules").glob("*.rules.yaml")):
        try:
            rules[path.name[: -len(".rules.yaml")]] = read_yaml(path, "rule file") or {}
        except LlmdashError as exc:
            raise LlmdashError(f"{where(path)}: not a readable rule file "
                               f"({str(exc).removeprefix(f'{path}: ')})") from None
    return BuildOutput(dashboards, rules)


def _checked_dashboard(model: Any) -> dict:
    """`model`, if it is a dashboard object whose gridPos values are integers (Grafana's grid is)."""
    if not isinstance(model, dict):
        raise LlmdashError("not a dashboard (a JSON object)")
    for placed in walk_panels(model):
        grid = placed.panel.get("gridPos")
        for key, value in grid.items() if isinstance(grid, dict) else ():
            if key in GRID_KEYS and (not isinstance(value, int) or isinstance(value, bool)):
                raise LlmdashError(f"panel {shorten(placed.panel.get('title'))} gridPos.{key} is {shorten(value)}, "
                                   "not an integer")
    return model


def diff_outputs(old: BuildOutput, new: BuildOutput) -> dict[str, list[Change]]:
    """Changes per dashboard stem (rule-file changes filed under the same name), sorted by name."""
    report: dict[str, list[Change]] = {}
    for name in sorted(old.dashboards.keys() | new.dashboards.keys()):
        report[name] = diff_dashboard(old.dashboards.get(name), new.dashboards.get(name))
    for name in sorted(old.rules.keys() | new.rules.keys()):
        report.setdefault(name, []).extend(diff_rules(old.rules.get(name), new.rules.get(name)))
    return dict(sorted(report.items()))


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# --------------------------------------------------------------------------- change labels


_OBJECT = (r'(?:(?:row|panel|variable|annotation|link|alert|record|group) "(?:[^"\\]|\\.)*"'
           r'(?: \[[^\]]*\])?(?: #\d+)?|(?:row|panel) #\S+|dashboard)')
_HEADER = re.compile(rf"{_OBJECT}(?: / {_OBJECT})*")


def split_where(where: str) -> tuple[str, str]:
    """`row "A" / panel "B" / query A` -> (`row "A" / panel "B"`, `query A`)."""
    match = _HEADER.match(where)
    if not match:
        return where, ""
    return match.group(0), where[match.end():].removeprefix(" / ")
