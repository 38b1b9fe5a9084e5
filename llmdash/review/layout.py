"""A picture of a dashboard's grid, so a reviewer sees a layout change without a Grafana.

Row bands, panel boxes with title and type on Grafana's 24-column grid; with an old
model, both layouts side by side and the panels `diff_dashboard` reports as changed
highlighted: orange where changed, red where removed (old side), green where added (new side).
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # noqa: E402  (backend must be chosen first)
from matplotlib.patches import Rectangle  # noqa: E402

from llmdash.dashboards.walk import grid_value  # noqa: E402
from llmdash.review.compare import Change, diff_dashboard, place_panels, split_where  # noqa: E402
from llmdash.errors import LlmdashError  # noqa: E402

GRID_COLUMNS = 24
# Grafana's grid cell is 30 px high and a column about 1/24 of ~1900 px: keep that aspect.
INCHES_PER_COLUMN = 0.5
INCHES_PER_ROW_UNIT = 0.19
PICTURE_FORMATS = (".png", ".svg")

PANEL_FILL, PANEL_EDGE = "#f4f6f9", "#8a94a6"
ROW_FILL = "#dfe5ee"
# (fill, edge) per highlight status
HIGHLIGHT = {"changed": ("#ffe3c2", "#e8590c"), "removed": ("#ffd6d6", "#c92a2a"), "added": ("#d3f9d8", "#2b8a3e")}


@dataclass
class LayoutPicture:
    """What was drawn: the file and which panel labels were drawn highlighted on each side."""

    path: Path
    highlighted_new: set[str] = field(default_factory=set)
    highlighted_old: set[str] = field(default_factory=set)
    other_changes: list[Change] = field(default_factory=list)


def check_picture_path(out: Path) -> Path:
    """Refuse an unsupported picture format before anything is built or written."""
    if out.suffix.lower() not in PICTURE_FORMATS:
        raise LlmdashError(f"--out {out}: picture must end in .png or .svg")
    return out


def changed_panels(old: dict, new: dict) -> tuple[dict[str, str], dict[str, str], list[Change]]:
    """Panel labels to highlight in the old and new layout ("changed", "removed", "added"),
    and the changes not tied to a panel."""
    old_placed, new_placed = place_panels(old), place_panels(new)
    old_labels, new_labels = [p.label for p in old_placed], [p.label for p in new_placed]
    # A retitled or re-rowed panel keeps its id: find its old box that way.
    old_by_id = {(p.panel.get("id"), p.panel.get("type")): p.label for p in old_placed if p.label not in new_labels}
    previous = {p.label: old_by_id.get((p.panel.get("id"), p.panel.get("type"))) for p in new_placed}
    in_old: dict[str, str] = {}
    in_new: dict[str, str] = {}
    elsewhere: list[Change] = []
    for change in diff_dashboard(old, new):
        owner, _ = split_where(change.where)
        if owner in new_labels:
            if change.kind == "panel-added":
                in_new[owner] = "added"
                continue
            in_new.setdefault(owner, "changed")
            old_label = owner if owner in old_labels else previous.get(owner)
            if old_label:
                in_old[old_label] = "changed"
        elif owner in old_labels:
            in_old[owner] = "removed"
        else:
            elsewhere.append(change)
    return in_old, in_new, elsewhere


def render_layout(new: dict, out: Path, old: dict | None = None, *, new_caption: str = "",
                  old_caption: str = "") -> LayoutPicture:
    """Draw `new` (and `old` beside it) to `out` (.png or .svg), written atomically."""
    picture = LayoutPicture(check_picture_path(out))
    sides = [(new, new_caption or _title(new), {})]
    if old is not None:
        old_marks, new_marks, picture.other_changes = changed_panels(old, new)
        sides = [(old, old_caption or _title(old), old_marks), (new, new_caption or _title(new), new_marks)]
    height = max(_grid_height(model) for model, _, _ in sides)
    figure, axes = plt.subplots(
        1, len(sides), squeeze=False,
        figsize=(GRID_COLUMNS * INCHES_PER_COLUMN * len(sides), max(3.0, height * INCHES_PER_ROW_UNIT + 1.2)))
    try:
        drawn = []
        for ax, (model, caption, marks) in zip(axes[0], sides):
            drawn.append(set(draw_layout(ax, model, height, marks)))
            ax.set_title(caption, fontsize=12, loc="left")
        if old is not None:
            picture.highlighted_old, picture.highlighted_new = drawn
        if picture.other_changes:
            kinds = sorted({c.kind for c in picture.other_changes})
            figure.text(0.01, 0.005, f"also changed (not drawn): {len(picture.other_changes)} x {', '.join(kinds)}",
                        fontsize=9, color=HIGHLIGHT["removed"][1])
        figure.tight_layout(rect=(0, 0.02, 1, 1))
        _save(figure, out)
    finally:
        plt.close(figure)
    return picture


def draw_layout(ax, dashboard: dict, height: int, marks: dict[str, str]) -> list[str]:
    """Row bands and panel boxes on a 24-column grid, `marks` (label -> status) highlighted;
    returns the labels drawn highlighted."""
    ax.set_xlim(0, GRID_COLUMNS)
    ax.set_ylim(height, 0)
    ax.set_xticks(range(0, GRID_COLUMNS + 1, 6))
    ax.tick_params(labelsize=7, colors="#8a94a6")
    for column in range(GRID_COLUMNS + 1):
        ax.axvline(column, color="#eef1f5", linewidth=0.5, zorder=0)
    drawn: list[str] = []
    for item in place_panels(dashboard):
        x, y, w, h = (grid_value(item.panel, k) for k in ("x", "y", "w", "h"))
        marked = item.label in marks
        if marked:
            drawn.append(item.label)
            fill, edge = HIGHLIGHT[marks[item.label]]
        if item.is_row:
            collapsed = bool(item.panel.get("collapsed"))
            ax.add_patch(Rectangle((0, y), GRID_COLUMNS, max(h, 1), facecolor=fill if marked else ROW_FILL,
                                   edgecolor=edge if marked else ROW_FILL, linewidth=2 if marked else 0.5))
            suffix = f"  (collapsed, {len(item.panel.get('panels') or [])} panels)" if collapsed else ""
            ax.text(0.3, y + max(h, 1) / 2, f"▾ {item.title}{suffix}", va="center", fontsize=9, fontweight="bold")
            continue
        if item.nested:
            continue
        box = Rectangle((x + 0.08, y + 0.12), w - 0.16, h - 0.24, facecolor=fill if marked else PANEL_FILL,
                        edgecolor=edge if marked else PANEL_EDGE, linewidth=2.5 if marked else 0.8)
        ax.add_patch(box)
        title = textwrap.fill(item.title or f"panel #{item.panel.get('id')}", width=max(6, int(w * 5.5)),
                              break_long_words=False)
        ax.text(x + 0.35, y + 0.45, title, va="top", fontsize=8, fontweight="bold", clip_path=box, clip_on=True)
        ax.text(x + w - 0.3, y + h - 0.4, str(item.panel.get("type", "?")), va="bottom", ha="right",
                fontsize=7, color="#5c6678", clip_path=box, clip_on=True)
    ax.set_yticks([])
    return drawn


def _grid_height(dashboard: dict) -> int:
    bottoms = [grid_value(p.panel, "y") + grid_value(p.panel, "h") for p in place_panels(dashboard)]
    return max(bottoms, default=1)


def _title(dashboard: dict) -> str:
    return str(dashboard.get("title") or dashboard.get("uid") or "dashboard")


def _save(figure, out: Path) -> None:
    """Write next to the target and rename, so a failed render leaves no half-written picture."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        figure.savefig(partial, format=out.suffix.lower().lstrip("."), dpi=100)
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
