"""The demo picture's drawing decisions: what Grafana would draw from the stored panel JSON.

These assert on the decisions (colours, limits, labels, regions), not on pixels; one test
draws a whole dashboard to check the pieces fit together.
"""

from __future__ import annotations

import json

import pytest

from llmdash.engines.catalog import load_engine
from llmdash.lab.evaluate import DashboardResult, PanelResult, Region, Series, TargetResult
from llmdash.lab.render import (
    NAMED_COLOURS,
    WARMUP_LABEL,
    axis_limits,
    format_value,
    histogram_caps,
    legend_entries,
    markdown_text,
    figure_height_in,
    panel_box,
    render_dashboard,
    shaded_regions,
    stat_text,
    threshold_colour,
    threshold_lines,
    tick_label,
)
from tests.support import paths

GENERATED = paths.GENERATED / "dashboards"
ORIGIN = 10_000.0


def stored_panel(engine: str, panel_type: str, title: str) -> dict:
    """A panel as committed in generated/: the tests read the real JSON, not a copy."""
    for panel in json.loads((GENERATED / f"{engine}.json").read_text())["panels"]:
        if panel.get("type") == panel_type and panel.get("title") == title:
            return panel
    raise KeyError(title)


def panel_result(panel: dict, expr: str = "", points=((ORIGIN, 1.0),)) -> PanelResult:
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    target = TargetResult("", panel["title"], "A", expr or panel.get("targets", [{}])[0].get("expr", ""),
                          [Series({}, list(points))])
    return PanelResult(1, panel["type"], panel["title"], "", panel["gridPos"], defaults.get("unit"), [target],
                       defaults, panel.get("options", {}))


def test_stat_tile_colour_comes_from_the_stored_thresholds():
    thresholds = stored_panel("vllm", "stat", "ITL p99")["fieldConfig"]["defaults"]["thresholds"]
    assert threshold_colour(0.05, thresholds) == NAMED_COLOURS["green"]
    assert threshold_colour(0.145, thresholds) == NAMED_COLOURS["orange"]
    assert threshold_colour(0.3, thresholds) == NAMED_COLOURS["red"]      # above critical
    assert threshold_colour(0.25, thresholds) == NAMED_COLOURS["red"]     # a step starts at its value


def test_slo_thresholds_go_from_red_up_to_green():
    thresholds = stored_panel("vllm", "timeseries", "ITL under 0.1s")["fieldConfig"]["defaults"]["thresholds"]
    assert threshold_colour(0.5, thresholds) == NAMED_COLOURS["red"]
    assert threshold_colour(0.995, thresholds) == NAMED_COLOURS["green"]


def test_threshold_lines_only_where_the_panel_sets_a_thresholds_style():
    dashed = stored_panel("vllm", "timeseries", "ITL p99")["fieldConfig"]["defaults"]
    assert threshold_lines(dashed) == [(0.1, NAMED_COLOURS["orange"], "--"), (0.25, NAMED_COLOURS["red"], "--")]
    off = stored_panel("vllm", "timeseries", "Output tokens/s")["fieldConfig"]["defaults"]
    assert threshold_lines(off) == []


def test_slo_axis_spans_zero_to_one_even_when_the_data_stays_high():
    defaults = stored_panel("vllm", "timeseries", "ITL under 0.1s")["fieldConfig"]["defaults"]
    low, high = axis_limits([0.825, 0.9, 1.0], defaults)
    assert low == 0 and 1.0 <= high <= 1.06


def test_fixed_min_and_max_win_over_the_data():
    assert axis_limits([5.0, 50.0], {"min": 0, "max": 10}) == (0, 10)


def test_soft_min_only_widens_the_range():
    low, high = axis_limits([0.02, 0.14], {"custom": {"axisSoftMin": 0}})
    assert low == 0 and high > 0.14


@pytest.mark.parametrize("value, unit, decimals, text", [
    (0.145, "s", None, "145 ms"),
    (0.0468, "s", None, "46.8 ms"),
    (9.84, "s", None, "9.84 s"),
    (0.999, "percentunit", None, "99.9%"),
    (1.0, "percentunit", None, "100%"),
    (1065.3, "suffix: tok/s", None, "1065 tok/s"),
    (4.38, "reqps", None, "4.38 req/s"),
    (1.0, "short", 2, "1.00"),
    (21, "short", None, "21"),
    (2500, "short", None, "2.50 K"),
])
def test_values_are_written_in_the_panel_unit_like_grafana(value, unit, decimals, text):
    assert format_value(value, unit, decimals) == text


def test_axis_ticks_carry_the_unit():
    assert [tick_label(v, "s") for v in (0, 0.02, 0.1, 2)] == ["0 s", "20 ms", "100 ms", "2 s"]
    assert [tick_label(v, "percentunit") for v in (0, 0.6, 1)] == ["0%", "60%", "100%"]


def test_triton_ttft_at_its_top_bucket_is_marked_at_least():
    panel = panel_result(stored_panel("tensorrt-llm-triton", "stat", "TTFT p99"), points=((ORIGIN, 5.0),))
    caps = histogram_caps(panel, load_engine("tensorrt-llm-triton"))
    assert caps == {5.0}                     # 5000 ms, the first-response histogram's last finite bucket
    assert stat_text(5.0, panel, caps) == "≥ 5 s"
    assert stat_text(4.2, panel, caps) == "4.20 s"


def test_a_value_below_the_top_bucket_has_no_mark():
    panel = panel_result(stored_panel("vllm", "stat", "ITL p99"))
    caps = histogram_caps(panel, load_engine("vllm"))
    assert caps and all(cap > 0.145 for cap in caps)
    assert stat_text(0.145, panel, caps) == "145 ms"


def test_no_value_shows_the_panel_no_value_text():
    panel = panel_result(stored_panel("vllm", "stat", "ITL p99"))
    assert stat_text(None, panel, set()) == "No traffic"


def test_text_panel_is_drawn_with_its_content():
    panel = stored_panel("lmdeploy", "text", "Preemptions")
    text = markdown_text(panel["options"]["content"])
    assert text.startswith("No preemption metric.") and "*" not in text


def test_no_tile_is_clipped_at_the_right_edge():
    panels = [p for p in json.loads((GENERATED / "vllm.json").read_text())["panels"] if p["type"] != "row"]
    rightmost = max(panels, key=lambda p: p["gridPos"]["x"] + p["gridPos"]["w"])
    assert rightmost["gridPos"]["x"] + rightmost["gridPos"]["w"] == 24
    height_in = figure_height_in([p["gridPos"] for p in panels])
    for panel in panels:
        left, bottom, width, height = panel_box(panel["gridPos"], height_in)
        assert 0 < left and left + width < 1 and 0 < bottom and bottom + height < 1, panel["title"]


def _result(annotations: dict[str, list[Region]]) -> DashboardResult:
    colours = {"Preemption": "rgba(255, 152, 48, 1)", "Divergence: ITL p99 up, throughput flat": "rgba(242, 73, 92, 1)"}
    return DashboardResult("u", "t", [], annotations, ORIGIN - 2700, ORIGIN + 1800, colours)


def test_divergence_is_not_drawn_during_the_baseline_warm_up():
    warmup_end = ORIGIN - 900
    result = _result({"Divergence: ITL p99 up, throughput flat": [
        Region("Divergence", {}, ORIGIN - 2700, ORIGIN - 2000),       # inside the warm-up: dropped
        Region("Divergence", {}, ORIGIN - 1200, ORIGIN - 600),        # straddles its end: cut
        Region("Divergence", {}, ORIGIN + 480, ORIGIN + 1800)]})
    shades = shaded_regions(result, ORIGIN, warmup_end)
    assert [(s.start, s.end) for s in shades] == [(-15.0, -10.0), (8.0, 30.0)]


def test_preemption_is_drawn_from_the_start_of_its_region():
    result = _result({"Preemption": [Region("Preemption", {}, ORIGIN - 2700, ORIGIN - 2600)]})
    assert [(s.kind, s.start) for s in shaded_regions(result, ORIGIN, ORIGIN - 900)] == [("Preemption", -45.0)]


def test_legend_names_preemption_and_divergence_in_distinct_colours():
    result = _result({"Preemption": [], "Divergence: ITL p99 up, throughput flat": []})
    entries = dict(legend_entries(result, ORIGIN - 900))
    assert set(entries) == {"Preemption", "Divergence", WARMUP_LABEL}
    assert len(set(entries.values())) == 3
    assert entries["Preemption"] == "#ff9830" and entries["Divergence"] == "#f2495c"


def test_a_whole_dashboard_draws(tmp_path):
    """Every panel type of the stored LMDeploy dashboard (stat, text, timeseries) draws into a PNG."""
    dashboard = json.loads((GENERATED / "lmdeploy.json").read_text())
    panels = [panel_result(p, points=((ORIGIN, 0.1), (ORIGIN + 60, 0.2))) if p["type"] != "text" else
              PanelResult(1, "text", p["title"], "On-call", p["gridPos"], None, [], {}, p["options"])
              for p in dashboard["panels"] if p["type"] != "row"]
    result = DashboardResult("u", "t", panels, {}, ORIGIN - 60, ORIGIN + 120)
    picture = render_dashboard(result, tmp_path / "lmdeploy.png", ORIGIN, spec=load_engine("lmdeploy"))
    assert picture.read_bytes().startswith(b"\x89PNG")



def test_an_instance_table_lists_its_largest_values_first_in_the_panel_unit():
    from llmdash.lab.evaluate import PanelResult, Series, TargetResult
    from llmdash.lab.render import table_rows
    panel = PanelResult(1, "table", "Top instances by ITL p99", "Instances", {"x": 0, "y": 0, "w": 12, "h": 8}, "s",
                        defaults={"unit": "s"}, options={})
    panel.targets.append(TargetResult("Instances", panel.title, "A", "topk(10, x)", [
        Series({"instance": "a:8000"}, [(0, 0.05)]), Series({"instance": "b:8000"}, [(0, 0.9)])]))
    assert table_rows(panel) == [("b:8000", "900 ms"), ("a:8000", "50 ms")]
