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
         steps: list[dict], width: int = 3, decimals: int | None = None) -> core.Stat:
    return core.Stat(
        title=title, description=description, dataSource=DATASOURCE, targets=targets(queries),
        format=unit, thresholds=steps, reduceCalc="lastNotNull", graphMode="area", colorMode="background",
        textMode="value", noValue="No traffic", decimals=decimals, maxDataPoints=None,
        gridPos=core.GridPos(h=TILE_HEIGHT, w=width, x=0, y=0),
    )


def timeseries(title: str, description: str, queries: list[tuple[str, str]], unit: str,
               steps: list[dict] | None = None, width: int = 8, height: int = CHART_HEIGHT,
               stacked: bool = False, soft_max: float | None = None) -> core.TimeSeries:
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
        gridPos=core.GridPos(h=height, w=width, x=0, y=0), extraJson=extra,
    )


def text(title: str, description: str, content: str, width: int, height: int = TILE_HEIGHT) -> core.Text:
    return core.Text(title=title, description=description, content=content, mode="markdown",
                     gridPos=core.GridPos(h=height, w=width, x=0, y=0))


def row(title: str) -> core.RowPanel:
    return core.RowPanel(title=title, collapsed=False, gridPos=core.GridPos(h=1, w=24, x=0, y=0))
