"""Draw a dashboard from real query results: a PNG laid out like Grafana's grid.

Why: the demo has to show a person, without a Grafana, what the dashboard shows on a
KV-cache collapse — throughput flat, ITL p99 climbing, the divergence region shaded.
Panels sit where their gridPos puts them (24 columns); time is in minutes from the
onset; annotation regions are shaded on every time series.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from llmdash.lab.evaluate import DashboardResult, PanelResult, Region  # noqa: E402

COLUMNS = 24
UNIT_HEIGHT_IN = 0.42          # one grid row, in inches
WIDTH_IN = 20.0
REGION_COLOURS = {"Divergence": "#e02f44", "Preemption": "#ff9830"}
REGION_ALPHA = {"Divergence": 0.25, "Preemption": 0.12}
_LEGEND_VAR = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def _legend(fmt: str, labels: dict[str, str], ref_id: str) -> str:
    if fmt:
        return _LEGEND_VAR.sub(lambda m: labels.get(m.group(1), ""), fmt).strip() or ref_id
    return ", ".join(f"{v}" for k, v in sorted(labels.items())) or ref_id


def _format(value: float, unit: str | None) -> str:
    if unit == "percentunit":
        return f"{value * 100:.0f}%"
    if unit == "s":
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _shade(ax, regions: list[Region], origin: float) -> None:
    for region in regions:
        kind = next((key for key in REGION_COLOURS if key in region.name), "Preemption")
        start, end = (region.start - origin) / 60, (region.end - origin) / 60
        if end > start:
            ax.axvspan(start, end, color=REGION_COLOURS[kind], alpha=REGION_ALPHA[kind], lw=0,
                       zorder=2 if kind == "Divergence" else 1)
        else:
            ax.axvline(start, color=REGION_COLOURS[kind], alpha=0.7, lw=1.5)


def _timeseries(ax, panel: PanelResult, result: DashboardResult, origin: float) -> None:
    for target in panel.targets:
        for series in target.series:
            if not series.points:
                continue
            xs = [(t - origin) / 60 for t, _ in series.points]
            ys = [v for _, v in series.points]
            ax.plot(xs, ys, lw=1.3, label=_legend(target.legend, series.labels, target.ref_id))
    _shade(ax, [r for name, rs in result.annotations.items() for r in rs
                if any(key in name for key in REGION_COLOURS)], origin)
    ax.axvline(0, color="#555555", lw=0.8, ls="--")
    ax.set_xlim((result.start - origin) / 60, (result.end - origin) / 60)
    if panel.unit == "percentunit":
        ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.25)
    if ax.lines[1:] or ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6, loc="upper left", frameon=False)


def _stat(ax, panel: PanelResult) -> None:
    values = [s.points[-1][1] for t in panel.targets[:1] for s in t.series if s.points]
    text = _format(sum(values), panel.unit) if values else "No data"
    ax.text(0.5, 0.42, text, ha="center", va="center", fontsize=16, weight="bold", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def render_dashboard(result: DashboardResult, path: Path, origin: float, heading: str = "") -> Path:
    """Write `result` as a PNG at `path`; `origin` (epoch s) is time 0 on every x axis."""
    bottom = max(p.grid["y"] + p.grid["h"] for p in result.panels)
    height = bottom * UNIT_HEIGHT_IN + 0.8
    fig = plt.figure(figsize=(WIDTH_IN, height), dpi=90)
    fig.suptitle(heading or result.title, x=0.01, y=1 - 0.25 / height, ha="left", fontsize=13, weight="bold")
    top = 0.7 / height

    def box(grid: dict) -> list[float]:
        left, width = grid["x"] / COLUMNS, grid["w"] / COLUMNS
        y0 = top + grid["y"] * UNIT_HEIGHT_IN / height
        h = grid["h"] * UNIT_HEIGHT_IN / height
        return [left + 0.035 * width + 0.004, 1 - y0 - h + 0.35 / height, width * 0.93, h - 0.62 / height]

    seen_rows = set()
    for panel in result.panels:
        if panel.row and panel.row not in seen_rows:
            seen_rows.add(panel.row)
            first_y = min(p.grid["y"] for p in result.panels if p.row == panel.row)
            fig.text(0.005, 1 - top - (first_y - 0.55) * UNIT_HEIGHT_IN / height, panel.row, fontsize=11,
                     weight="bold", color="#333333")
        ax = fig.add_axes(box(panel.grid))
        ax.set_title(panel.title, fontsize=9, loc="left")
        if panel.type == "timeseries":
            _timeseries(ax, panel, result, origin)
        elif panel.type == "stat":
            _stat(ax, panel)
        else:
            ax.set_axis_off()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
