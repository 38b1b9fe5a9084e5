"""Draw a dashboard from real query results: a PNG laid out like Grafana's grid.

Why: the demo has to show a person, without a Grafana, what the dashboard shows on a
KV-cache collapse — throughput flat, ITL p99 climbing, the divergence region shaded —
and it must draw what Grafana would draw from the stored JSON, not a prettier story:
stat tiles coloured by their thresholds, threshold lines where a panel sets
`thresholdsStyle`, axes in the panel's unit and within its min/max, text panels with their
content, annotation regions in their `iconColor` with a legend saying which is which.
Two marks Grafana lacks are added because without them the picture misleads: "≥" on a
latency at its histogram's top finite bucket (the true value is at least that), and the
baseline warm-up greyed out on the divergence panel (its ratio means nothing before a
full baseline window of history), where no Divergence region is drawn either.

The decisions are plain functions (`format_value`, `threshold_colour`, `axis_limits`,
`histogram_caps`, `shaded_regions`, `legend_entries`) so they can be tested without pixels.
"""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from llmdash.engines.model import UNIT_TO_SECONDS, EngineSpec  # noqa: E402
from llmdash.lab.evaluate import DashboardResult, PanelResult  # noqa: E402
from llmdash.panels.library import DIVERGENCE_TITLE  # noqa: E402

COLUMNS = 24
UNIT_HEIGHT_IN = 0.42          # one grid row, in inches
WIDTH_IN = 20.0
GAP_IN = 0.08                  # between neighbouring panels
AXIS_ROOM_IN = 0.55            # left of a chart, for the y tick labels
# Grafana's named colours (the default theme's values) as thresholds and iconColor use them.
NAMED_COLOURS = {"green": "#73BF69", "orange": "#FF9830", "red": "#F2495C", "blue": "#5794F2",
                 "yellow": "#FADE2A", "purple": "#B877D9", "text": "#464C54", "transparent": "#FFFFFF"}
REGION_KINDS = ("Preemption", "Divergence")   # the annotations drawn as shaded regions
REGION_ALPHA = 0.13
WARMUP_COLOUR = "#9e9e9e"
WARMUP_LABEL = "baseline warm-up"
_LEGEND_VAR = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_RGBA = re.compile(r"rgba?\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)")
_MARKDOWN = re.compile(r"\*\*|__|[*_`]")
_TRAILING_ZEROS = re.compile(r"(\d+\.\d*?0+)(?=\D|$)")
_SCALED = {"short": ("", " K", " Mil", " Bil", " Tri")}


# ---- decisions (testable without drawing) ----------------------------------------------------

def colour(name: str) -> str:
    """A Grafana colour (named, #hex or rgba()) as #rrggbb."""
    if name in NAMED_COLOURS:
        return NAMED_COLOURS[name]
    match = _RGBA.match(name or "")
    if match:
        return "#" + "".join(f"{int(part):02x}" for part in match.groups())
    return name if (name or "").startswith("#") else NAMED_COLOURS["text"]


def auto_decimals(value: float) -> int:
    """Grafana's decimals when a panel sets none: about two significant digits, none for integers."""
    if value == 0 or not math.isfinite(value) or float(value).is_integer():
        return 0
    magnitude = math.floor(math.log10(abs(value)))
    decimals = -magnitude + 1
    if abs(value) / 10 ** magnitude > 2.25:
        decimals += 1
    return max(0, decimals)


def _fixed(value: float, decimals: int | None) -> str:
    return f"{value:.{auto_decimals(value) if decimals is None else decimals}f}"


def format_value(value: float, unit: str | None, decimals: int | None = None) -> str:
    """A value as Grafana writes it for the panel's unit: 0.145 s -> '145 ms', 0.99 percentunit -> '99%'."""
    unit = unit or "short"
    if unit == "s":
        if value == 0:
            return "0 s"
        if abs(value) < 0.001:
            return f"{_fixed(value * 1e6, decimals)} µs"
        if abs(value) < 1:
            return f"{_fixed(value * 1000, decimals)} ms"
        if abs(value) < 60:
            return f"{_fixed(value, decimals)} s"
        return f"{_fixed(value / 60, decimals)} min"
    if unit == "percentunit":
        return f"{_fixed(value * 100, decimals)}%"
    if unit == "percent":
        return f"{_fixed(value, decimals)}%"
    if unit == "reqps":
        return f"{_fixed(value, decimals)} req/s"
    if unit.startswith("suffix:"):
        return f"{_fixed(value, decimals)}{unit[len('suffix:'):]}"
    suffixes = _SCALED["short"]
    step = 0
    while abs(value) >= 1000 and step < len(suffixes) - 1:
        value, step = value / 1000, step + 1
    return f"{_fixed(value, decimals)}{suffixes[step]}"


def tick_label(value: float, unit: str | None) -> str:
    """An axis tick in the panel's unit, without the trailing zeros auto decimals leave on round ticks."""
    return _TRAILING_ZEROS.sub(lambda m: m.group(1).rstrip("0").rstrip("."), format_value(value, unit), count=1)


def threshold_colour(value: float | None, thresholds: dict) -> str:
    """The colour of the highest threshold step at or below `value` (the base step is null)."""
    steps = thresholds.get("steps") or [{"color": "green", "value": None}]
    chosen = steps[0]["color"]
    if value is None:
        return colour(chosen)
    for step in steps[1:]:
        if step.get("value") is not None and value >= step["value"]:
            chosen = step["color"]
    return colour(chosen)


def threshold_lines(defaults: dict) -> list[tuple[float, str, str]]:
    """(value, colour, line style) for each non-base step when the panel's thresholdsStyle draws lines."""
    mode = (defaults.get("custom", {}).get("thresholdsStyle") or {}).get("mode", "off")
    if mode == "off" or mode == "area":
        return []
    style = "--" if mode.startswith("dashed") else "-"
    return [(step["value"], colour(step["color"]), style)
            for step in (defaults.get("thresholds") or {}).get("steps", [])[1:] if step.get("value") is not None]


def axis_limits(values: list[float], defaults: dict) -> tuple[float | None, float | None]:
    """Y limits as Grafana sets them: min/max fixed; axisSoftMin/axisSoftMax widen the data range."""
    custom = defaults.get("custom", {})
    finite = [v for v in values if math.isfinite(v)]
    low = min(finite) if finite else None
    high = max(finite) if finite else None
    if custom.get("axisSoftMin") is not None:
        low = custom["axisSoftMin"] if low is None else min(low, custom["axisSoftMin"])
    if custom.get("axisSoftMax") is not None:
        high = custom["axisSoftMax"] if high is None else max(high, custom["axisSoftMax"])
    if defaults.get("min") is not None:
        low = defaults["min"]
    if defaults.get("max") is not None:
        high = defaults["max"]
    if low is not None and high is not None and high > low and defaults.get("max") is None:
        high += (high - low) * 0.05          # headroom like uPlot's, unless the max is fixed
    return low, high


def histogram_caps(panel: PanelResult, spec: EngineSpec | None) -> set[float]:
    """The top finite bucket bound, in seconds, of every latency histogram the panel's queries read:
    a quantile at that bound only says the true value is at least that."""
    if spec is None or panel.unit != "s":
        return set()
    caps = set()
    for metric in spec.metrics.values():
        if not metric.buckets or metric.unit not in UNIT_TO_SECONDS:
            continue
        if any(f"{metric.name}_bucket" in target.expr for target in panel.targets):
            caps.add(max(b for b in metric.buckets if math.isfinite(b)) * UNIT_TO_SECONDS[metric.unit])
    return caps


def is_capped(value: float, caps: set[float]) -> bool:
    return any(math.isclose(value, cap, rel_tol=1e-6) for cap in caps)


def stat_text(value: float | None, panel: PanelResult, caps: set[float]) -> str:
    """A stat tile's text: the formatted value, "≥" in front when it sits at a histogram's cap."""
    if value is None:
        return panel.defaults.get("noValue") or "No data"
    text = format_value(value, panel.unit, panel.defaults.get("decimals"))
    return f"≥ {text}" if is_capped(value, caps) else text


def stat_value(panel: PanelResult) -> float | None:
    """lastNotNull of the tile's series (the tiles query one aggregated series; several are summed)."""
    values = [s.points[-1][1] for t in panel.targets[:1] for s in t.series if s.points]
    return sum(values) if values else None


def region_kind(annotation: str) -> str | None:
    return next((kind for kind in REGION_KINDS if annotation.startswith(kind)), None)


@dataclass
class Shade:
    kind: str
    colour: str
    start: float     # minutes from the origin
    end: float


def shaded_regions(result: DashboardResult, origin: float, warmup_end: float | None = None) -> list[Shade]:
    """Preemption and Divergence regions in their annotation's colour; Divergence is cut to what
    follows the baseline warm-up (before it, the baseline is not a baseline)."""
    shades = []
    for name, regions in result.annotations.items():
        kind = region_kind(name)
        if kind is None:
            continue
        for region in regions:
            start, end = region.start, region.end
            if kind == "Divergence" and warmup_end is not None:
                if end < warmup_end:
                    continue
                start = max(start, warmup_end)
            shades.append(Shade(kind, colour(result.colours.get(name, "")), (start - origin) / 60,
                                (end - origin) / 60))
    return shades


def legend_entries(result: DashboardResult, warmup_end: float | None = None) -> list[tuple[str, str]]:
    """(label, colour) for the figure legend: each shaded annotation present, and the warm-up."""
    entries = []
    for name in result.annotations:
        kind = region_kind(name)
        if kind and all(label != kind for label, _ in entries):
            entries.append((kind, colour(result.colours.get(name, ""))))
    if warmup_end is not None and warmup_end > result.start:
        entries.append((WARMUP_LABEL, WARMUP_COLOUR))
    return entries


def figure_height_in(grids: list[dict]) -> float:
    """The grid's rows plus room for the heading and the legend."""
    return max(g["y"] + g["h"] for g in grids) * UNIT_HEIGHT_IN + 1.0


def panel_box(grid: dict, height_in: float, left_room_in: float = 0.0) -> list[float]:
    """[left, bottom, width, height] in figure fractions for a gridPos; every panel stays inside the
    figure (the rightmost ends a gap before the edge), charts keep `left_room_in` for tick labels."""
    unit_w = WIDTH_IN / COLUMNS
    left_in = grid["x"] * unit_w + GAP_IN + left_room_in
    width_in = grid["w"] * unit_w - 2 * GAP_IN - left_room_in
    top = 0.9 / height_in
    y0 = top + grid["y"] * UNIT_HEIGHT_IN / height_in
    h = grid["h"] * UNIT_HEIGHT_IN / height_in
    return [left_in / WIDTH_IN, 1 - y0 - h + 0.35 / height_in, width_in / WIDTH_IN, h - 0.62 / height_in]


def markdown_text(content: str) -> str:
    """A text panel's markdown as plain text: emphasis and code marks dropped."""
    return _MARKDOWN.sub("", content).strip()


# ---- drawing ---------------------------------------------------------------------------------

def _legend(fmt: str, labels: dict[str, str], ref_id: str) -> str:
    if fmt:
        return _LEGEND_VAR.sub(lambda m: labels.get(m.group(1), ""), fmt).strip() or ref_id
    return ", ".join(f"{v}" for k, v in sorted(labels.items())) or ref_id


def _shade(ax, shades: list[Shade]) -> None:
    """A light fill per region, and a solid marker strip under the plot as Grafana draws one."""
    strip = {kind: i for i, kind in enumerate(REGION_KINDS)}
    for shade in shades:
        low = 0.035 * strip[shade.kind]
        if shade.end > shade.start:
            ax.axvspan(shade.start, shade.end, color=shade.colour, alpha=REGION_ALPHA, lw=0, zorder=1)
            ax.axvspan(shade.start, shade.end, ymin=low, ymax=low + 0.03, color=shade.colour, lw=0, zorder=3)
        else:
            ax.axvline(shade.start, color=shade.colour, alpha=0.8, lw=1.5, zorder=3)


def _timeseries(ax, panel: PanelResult, result: DashboardResult, origin: float, shades: list[Shade],
                caps: set[float], warmup_end: float | None) -> None:
    values = []
    for target in panel.targets:
        for series in target.series:
            if not series.points:
                continue
            xs = [(t - origin) / 60 for t, _ in series.points]
            ys = [v for _, v in series.points]
            values += ys
            ax.plot(xs, ys, lw=1.2, label=_legend(target.legend, series.labels, target.ref_id), zorder=4)
    _shade(ax, shades)
    for value, line_colour, style in threshold_lines(panel.defaults):
        ax.axhline(value, color=line_colour, ls=style, lw=1, zorder=2)
    for cap in sorted(caps):
        if any(is_capped(v, caps) for v in values):
            ax.axhline(cap, color="#555555", ls=":", lw=1, zorder=2)
            ax.text(0.99, cap, f"top bucket: values here are ≥ {format_value(cap, panel.unit)}", fontsize=6,
                    ha="right", va="bottom", transform=ax.get_yaxis_transform(), color="#555555")
    x_start = (result.start - origin) / 60
    if warmup_end is not None and panel.title == DIVERGENCE_TITLE and warmup_end > result.start:
        end = (warmup_end - origin) / 60
        ax.axvspan(x_start, end, color=WARMUP_COLOUR, alpha=0.35, lw=0, zorder=5)
        ax.text((x_start + end) / 2, 0.5, WARMUP_LABEL, ha="center", va="center", fontsize=8,
                transform=ax.get_xaxis_transform(), color="#333333", zorder=6)
    ax.axvline(0, color="#555555", lw=0.8, ls="--")
    ax.set_xlim(x_start, (result.end - origin) / 60)
    low, high = axis_limits(values, panel.defaults)
    if low is not None and high is not None and high > low:
        ax.set_ylim(low, high)
    unit = panel.unit
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: tick_label(v, unit)))
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.25)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6, loc="upper left", frameon=False)


def _stat(ax, panel: PanelResult, caps: set[float]) -> None:
    value = stat_value(panel)
    background = panel.options.get("colorMode") == "background"
    fill = threshold_colour(value, panel.defaults.get("thresholds") or {})
    if background and value is not None:
        ax.set_facecolor(fill)
    text_colour = "white" if background and value is not None else fill
    if panel.options.get("graphMode") == "area" and panel.targets and panel.targets[0].series:
        points = panel.targets[0].series[0].points
        spark = ax.inset_axes([0, 0, 1, 0.45], zorder=0)
        spark.fill_between(range(len(points)), [v for _, v in points], color="white" if background else fill,
                           alpha=0.3, lw=0)
        spark.set_axis_off()
        spark.set_xlim(0, max(len(points) - 1, 1))
    ax.text(0.5, 0.5, stat_text(value, panel, caps), ha="center", va="center", fontsize=16, weight="bold",
            transform=ax.transAxes, color=text_colour, zorder=3)
    ax.set_xticks([])
    ax.set_yticks([])


def _text(ax, panel: PanelResult, width_in: float) -> None:
    chars = max(12, int(width_in * 11))
    wrapped = "\n".join(textwrap.fill(part, chars) for part in markdown_text(panel.options.get("content", ""))
                        .splitlines() if part.strip())
    ax.text(0.04, 0.92, wrapped, ha="left", va="top", fontsize=8, transform=ax.transAxes, color="#222222")
    ax.set_xticks([])
    ax.set_yticks([])


def table_rows(panel: PanelResult, limit: int = 6) -> list[tuple[str, str]]:
    """(instance, value) of an instant table at the end of the range, largest first, as Grafana sorts it."""
    unit = panel.defaults.get("unit")
    rows = [(s.labels.get("instance", " ".join(s.labels.values())), s.points[-1][1])
            for t in panel.targets for s in t.series if s.points]
    return [(name, format_value(value, unit)) for name, value in sorted(rows, key=lambda r: -r[1])[:limit]]


def _table(ax, panel: PanelResult) -> None:
    rows = table_rows(panel)
    lines = [f"{name:<28.28} {value:>10}" for name, value in rows] or ["No data"]
    ax.text(0.04, 0.9, "\n".join(lines), ha="left", va="top", fontsize=7, family="monospace",
            transform=ax.transAxes, color="#222222")
    ax.set_xticks([])
    ax.set_yticks([])


def render_dashboard(result: DashboardResult, path: Path, origin: float, heading: str = "",
                     spec: EngineSpec | None = None, warmup_end: float | None = None) -> Path:
    """Write `result` as a PNG at `path`; `origin` (epoch s) is time 0 on every x axis. `spec` gives the
    histograms' top buckets for "≥"; `warmup_end` (epoch s) is when the divergence baseline is whole."""
    height = figure_height_in([p.grid for p in result.panels])
    fig = plt.figure(figsize=(WIDTH_IN, height), dpi=90)
    fig.suptitle(heading or result.title, x=0.01, y=1 - 0.2 / height, ha="left", fontsize=13, weight="bold")
    entries = legend_entries(result, warmup_end)
    if entries:
        fig.legend(handles=[Patch(color=c, alpha=0.6, label=f"{label} (annotation)" if label != WARMUP_LABEL
                                  else label) for label, c in entries],
                   loc="upper right", bbox_to_anchor=(0.995, 1 - 0.05 / height), ncol=len(entries), fontsize=9,
                   frameon=False, title="shaded:", title_fontsize=9)
    top = 0.9 / height
    unit_w = WIDTH_IN / COLUMNS      # inches per grid column
    shades = shaded_regions(result, origin, warmup_end)

    seen_rows = set()
    for panel in result.panels:
        if panel.row and panel.row not in seen_rows:
            seen_rows.add(panel.row)
            first_y = min(p.grid["y"] for p in result.panels if p.row == panel.row)
            fig.text(0.005, 1 - top - (first_y - 0.55) * UNIT_HEIGHT_IN / height, panel.row, fontsize=11,
                     weight="bold", color="#333333")
        chart = panel.type == "timeseries"
        ax = fig.add_axes(panel_box(panel.grid, height, AXIS_ROOM_IN if chart else 0.0))
        ax.set_title(panel.title, fontsize=9, loc="left")
        caps = histogram_caps(panel, spec)
        if chart:
            _timeseries(ax, panel, result, origin, shades, caps, warmup_end)
        elif panel.type == "stat":
            _stat(ax, panel, caps)
        elif panel.type == "text":
            _text(ax, panel, panel.grid["w"] * unit_w)
        elif panel.type == "table":
            _table(ax, panel)
        else:
            ax.set_axis_off()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
