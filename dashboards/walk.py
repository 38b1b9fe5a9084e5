"""One walk over a dashboard's panels, so every reader agrees which row a panel is in.

Grafana keeps an expanded row's panels beside it in the top-level list (a panel belongs to the
nearest row above it) and a collapsed row's panels inside the row's own `panels`; on load it
orders panels by gridPos (y, then x), so list order means nothing. Review, lab, doctor and
validation all read panels this way through `walk_panels`. The models come from files, git
revisions and live Grafana servers, so a malformed one (a string gridPos.y, no gridPos, a panel
that is not an object) is walked as well as it can be, never raised on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

ROW = "row"


@dataclass(frozen=True)
class PanelInRow:
    """A panel and the row it belongs to (None above the first row, and for a row itself).

    `nested`: the panel sits in its row's own `panels` list (a collapsed row's children), so
    Grafana lays it out only once the row is expanded.
    """

    panel: dict
    row: dict | None
    nested: bool = False

    @property
    def is_row(self) -> bool:
        return self.panel.get("type") == ROW

    @property
    def row_title(self) -> str:
        """The title of the row the panel is in; "" above the first row."""
        return str(self.row.get("title") or "") if self.row is not None else ""


def grid_value(panel: Any, key: str, default: int = 0) -> int:
    """gridPos `key` ("x", "y", "w", "h") of `panel`, `default` when missing or not an integer."""
    grid = panel.get("gridPos") if isinstance(panel, dict) else None
    value = grid.get(key) if isinstance(grid, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def grid_order(panel: Any) -> tuple[int, int]:
    """Grafana's display order: by gridPos y, then x."""
    return grid_value(panel, "y"), grid_value(panel, "x")


def walk_panels(dashboard: Any) -> Iterator[PanelInRow]:
    """Every panel and row of `dashboard` in grid order, each with its row; a row's own `panels`
    follow the row, in grid order among themselves."""
    panels = dashboard.get("panels") if isinstance(dashboard, dict) else None
    row: dict | None = None
    for panel in _objects_in_grid_order(panels):
        if panel.get("type") == ROW:
            row = panel
            yield PanelInRow(panel, None)
            for child in _objects_in_grid_order(panel.get("panels")):
                yield PanelInRow(child, row, nested=True)
        else:
            yield PanelInRow(panel, row)


def _objects_in_grid_order(panels: Any) -> list[dict]:
    if not isinstance(panels, list):
        return []
    return sorted((p for p in panels if isinstance(p, dict)), key=grid_order)
