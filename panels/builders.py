"""Thin constructors over grafanalib's modern panel types.

They fix grafanalib 0.7.1's defaults once (Stat thresholds as a list, maxDataPoints unset,
targets bound to the datasource variable, explicit sizes) so the panel library only says
what to show. Positions and ids are filled in by the dashboard assembly.
"""

from __future__ import annotations

from grafanalib import core


DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
TILE_HEIGHT = 4
CHART_HEIGHT = 8


def thresholds(levels, base: str = "green") -> list[dict]:
    """Grafana threshold steps: `base`, then orange at warning and red at critical."""
    if levels is None:
        return [{"color": base, "value": None}]
    return [{"color": "green", "value": None},
            {"color": "orange", "value": levels.warning},
            {"color": "red", "value": levels.critical}]


def targets(queries: list[tuple[str, str]]) -> list[core.Target]:
    return [core.Target(expr=expr, legendFormat=legend, refId=chr(ord("A") + i), datasource=DATASOURCE)
            for i, (expr, legend) in enumerate(queries)]


def stat(title: str, description: str, queries: list[tuple[str, str]], unit: str,
         steps: list[dict], width: int = 3, decimals: int | None = None,
         mappings: list[dict] | None = None) -> core.Stat:
    return core.Stat(
        title=title, description=description, dataSource=DATASOURCE, targets=targets(queries),
        format=unit, thresholds=steps, reduceCalc="lastNotNull", graphMode="area", colorMode="background",
        textMode="value", noValue="No traffic", decimals=decimals, maxDataPoints=None, mappings=mappings or [],
        gridPos=core.GridPos(h=TILE_HEIGHT, w=width, x=0, y=0),
    )


def timeseries(title: str, description: str, queries: list[tuple[str, str]], unit: str,
               steps: list[dict] | None = None, width: int = 8, height: int = CHART_HEIGHT,
               stacked: bool = False, soft_max: float | None = None,
               mappings: list[dict] | None = None) -> core.TimeSeries:
    extra = {"fieldConfig": {"defaults": {"custom": {"axisSoftMin": 0}}}}
    if soft_max is not None:
        extra["fieldConfig"]["defaults"]["custom"]["axisSoftMax"] = soft_max
    return core.TimeSeries(
        title=title, description=description, dataSource=DATASOURCE, targets=targets(queries), unit=unit,
        thresholds=steps or [{"color": "green", "value": None}],
        thresholdsStyleMode="dashed" if steps and len(steps) > 1 else "off",
        legendDisplayMode="list", legendPlacement="bottom", tooltipMode="multi", tooltipSort="desc",
        fillOpacity=10, showPoints="never", spanNulls=False, maxDataPoints=None,
        stacking={"mode": "normal", "group": "A"} if stacked else {},
        gridPos=core.GridPos(h=height, w=width, x=0, y=0), extraJson=extra, mappings=mappings or [],
    )


def text(title: str, description: str, content: str, width: int, height: int = TILE_HEIGHT) -> core.Text:
    return core.Text(title=title, description=description, content=content, mode="markdown",
                     gridPos=core.GridPos(h=height, w=width, x=0, y=0))


def row(title: str) -> core.RowPanel:
    return core.RowPanel(title=title, collapsed=False, gridPos=core.GridPos(h=1, w=24, x=0, y=0))


class Table:
    """A modern table panel of instant queries (grafanalib 0.7.1 only has the legacy table's model).

    `columns` renames each query's value column (`Value #A` → its title) and gives it a unit; the
    queries' series are merged into one row per label set, sorted by `sort_by` (a column title),
    largest first (smallest with `ascending`). `data_links` are data links on the `link_column`, as Grafana's
    `${__data.fields.x}` URLs; `links`, set after construction, the panel's own (a runbook), as on grafanalib's.
    """

    def __init__(self, title: str, description: str, columns: list[tuple[str, str, str]], sort_by: str,
                 width: int = 12, height: int = CHART_HEIGHT, hidden: tuple[str, ...] = (),
                 data_links: list[dict] | None = None, link_column: str | None = None, ascending: bool = False):
        self.title, self.description, self.columns, self.sort_by = title, description, columns, sort_by
        self.ascending = ascending
        self.hidden, self.data_links, self.link_column = hidden, data_links or [], link_column
        self.links: list[dict] = []
        self.gridPos = core.GridPos(h=height, w=width, x=0, y=0)

    def to_json_data(self) -> dict:
        refs = [chr(ord("A") + i) for i in range(len(self.columns))]
        value = (lambda ref: "Value") if len(self.columns) == 1 else (lambda ref: f"Value #{ref}")
        overrides = [{"matcher": {"id": "byName", "options": value(ref)},
                      "properties": [{"id": "unit", "value": unit}, {"id": "displayName", "value": title}]}
                     for ref, (_, title, unit) in zip(refs, self.columns)]
        if self.data_links and self.link_column:
            overrides.append({"matcher": {"id": "byName", "options": self.link_column},
                              "properties": [{"id": "links", "value": self.data_links}]})
        return {
            "type": "table", "title": self.title, "description": self.description, "datasource": DATASOURCE,
            "gridPos": self.gridPos, **({"links": self.links} if self.links else {}),
            "targets": [{"expr": expr, "refId": ref, "datasource": DATASOURCE, "legendFormat": "__auto"}
                        for ref, (expr, _, _) in zip(refs, self.columns)],
            "fieldConfig": {"defaults": {"unit": self.columns[0][2] if len(self.columns) == 1 else "short",
                                         "thresholds": {"mode": "absolute", "steps": [
                {"color": "green", "value": None}]}, "custom": {"align": "auto", "cellOptions": {"type": "auto"}}},
                "overrides": overrides},
            "options": {"showHeader": True, "cellHeight": "sm",
                        "sortBy": [{"displayName": self.sort_by, "desc": not self.ascending}]},
            "transformations": ([{"id": "merge", "options": {}}] if len(self.columns) > 1 else []) + [
                {"id": "organize", "options": {"excludeByName": {"Time": True, **{h: True for h in self.hidden}},
                                                "indexByName": {}, "renameByName": {}}}],
        }

