"""Dashboards against Grafana's own published schema (@grafana/schema 13.2.3, dashboards/grafana_schema/)."""

import copy
import json
import sys

import pytest
from grafanalib import core

from llmdash.cli.main import main
from llmdash.dashboards import postprocess
from llmdash.dashboards.schema import schema_problems
from tests.support.catalogs import ENGINES
from tests.support.paths import ROOT, SUPPORT

GENERATED = sorted((ROOT / "generated" / "dashboards").glob("*.json"))
THIRD_PARTY = SUPPORT / "third_party"  # hand-written in the forms other projects publish (its README.md)
VLLM = json.loads((ROOT / "generated" / "dashboards" / "vllm.json").read_text())


def _first(dashboard: dict, kind: str) -> tuple[int, dict]:
    return next((i, p) for i, p in enumerate(dashboard["panels"]) if p["type"] == kind)


def test_every_generated_dashboard_is_found():
    assert [p.stem for p in GENERATED] == sorted(["fleet", *ENGINES])


@pytest.mark.parametrize("path", GENERATED, ids=lambda p: p.stem)
def test_generated_dashboard_conforms_to_grafana_schema(path):
    assert schema_problems(json.loads(path.read_text())) == []


def _misspelled_legend_option(d):
    i, panel = _first(d, "timeseries")
    panel["options"]["legend"]["displayMod"] = "list"
    return (f"panel {panel['title']!r} $.panels[{i}].options.legend: Additional properties are not allowed "
            "('displayMod' was unexpected) (Grafana schema)")


def _misspelled_stat_option(d):
    i, panel = _first(d, "stat")
    panel["options"]["colorMod"] = panel["options"].pop("colorMode")
    return (f"panel {panel['title']!r} $.panels[{i}].options: Additional properties are not allowed "
            "('colorMod' was unexpected) (Grafana schema)")


def _string_grid_width(d):
    i, panel = _first(d, "stat")
    panel["gridPos"]["w"] = "12"
    return f"panel {panel['title']!r} $.panels[{i}].gridPos.w: '12' is not of type 'number' (Grafana schema)"


def _string_line_width(d):
    i, panel = _first(d, "timeseries")
    panel["fieldConfig"]["defaults"]["custom"]["lineWidth"] = "2"
    return (f"panel {panel['title']!r} $.panels[{i}].fieldConfig.defaults.custom.lineWidth: '2' is not of type "
            "'number' (Grafana schema)")


def _string_reduce_limit(d):
    i, panel = _first(d, "stat")
    panel["options"]["reduceOptions"]["limit"] = "5"
    return (f"panel {panel['title']!r} $.panels[{i}].options.reduceOptions.limit: '5' is not of type 'number' "
            "(Grafana schema)")


def _unknown_legend_mode(d):
    i, panel = _first(d, "timeseries")
    panel["options"]["legend"]["displayMode"] = "sideways"
    return (f"panel {panel['title']!r} $.panels[{i}].options.legend.displayMode: 'sideways' is not one of "
            "['hidden', 'list', 'table'] (Grafana schema)")


def _legend_without_show_legend(d):
    i, panel = _first(d, "timeseries")
    del panel["options"]["legend"]["showLegend"]
    return (f"panel {panel['title']!r} $.panels[{i}].options.legend: 'showLegend' is a required property "
            "(Grafana schema)")


def _stat_custom_field_option(d):
    i, panel = _first(d, "stat")
    panel["fieldConfig"]["defaults"]["custom"]["lineWidth"] = 1
    return (f"panel {panel['title']!r} $.panels[{i}].fieldConfig.defaults.custom: Additional properties are not "
            "allowed ('lineWidth' was unexpected) (Grafana schema)")


def _misspelled_table_option(d):
    i, panel = _first(d, "table")
    panel["options"]["showHeadr"] = panel["options"].pop("showHeader")
    return (f"panel {panel['title']!r} $.panels[{i}].options: Additional properties are not allowed "
            "('showHeadr' was unexpected) (Grafana schema)")


def _table_cell_options_without_type(d):
    i, panel = _first(d, "table")
    panel["fieldConfig"]["defaults"]["custom"]["cellOptions"] = {}
    return (f"panel {panel['title']!r} $.panels[{i}].fieldConfig.defaults.custom.cellOptions: 'type' is a required "
            "property (Grafana schema)")


def _panel_nested_in_collapsed_row(d):
    i, row = _first(d, "row")
    _, chart = _first(d, "timeseries")
    nested = copy.deepcopy(chart)
    nested["options"]["legend"]["placement"] = "left"
    row["collapsed"], row["panels"] = True, [nested]
    return (f"panel {nested['title']!r} $.panels[{i}].panels[0].options.legend.placement: 'left' is not one of "
            "['bottom', 'right'] (Grafana schema)")


def _empty_variable_current(d):
    d["templating"]["list"][0]["current"] = {}
    return "$.templating.list[0].current: 'text' is a required property (Grafana schema)"


def _unknown_panel_type(d):
    i, panel = _first(d, "timeseries")
    panel["type"] = "piechart"
    return (f"panel {panel['title']!r} $.panels[{i}].type: 'piechart' has no Grafana schema here "
            "(known: stat, table, text, timeseries)")


@pytest.mark.parametrize("mistake", [
    _misspelled_legend_option, _misspelled_stat_option, _string_grid_width, _string_line_width,
    _string_reduce_limit, _unknown_legend_mode, _legend_without_show_legend, _stat_custom_field_option,
    _misspelled_table_option, _table_cell_options_without_type, _panel_nested_in_collapsed_row,
    _empty_variable_current, _unknown_panel_type,
], ids=lambda f: f.__name__.strip("_"))
def test_deviation_is_one_line_naming_panel_and_path(mistake):
    dashboard = copy.deepcopy(VLLM)
    expected = mistake(dashboard)
    assert expected in schema_problems(dashboard)


def test_every_grafanalib_legend_gets_show_legend_as_grafana_migrates_it():
    """Any panel grafanalib builds, with its defaults, leaves postprocess conforming (V37 legend rule)."""
    shown = core.TimeSeries(title="shown", dataSource="x", targets=[core.Target(expr="up", refId="A")],
                            gridPos=core.GridPos(h=8, w=12, x=0, y=0))
    hidden = core.TimeSeries(title="hidden", dataSource="x", targets=[core.Target(expr="up", refId="A")],
                             legendDisplayMode="hidden", gridPos=core.GridPos(h=8, w=12, x=12, y=0))
    model = postprocess.to_grafana(core.Dashboard(title="t", uid="t", panels=[shown, hidden]), [], [], "1m", 288)
    legends = {p["title"]: p["options"]["legend"] for p in model["panels"]}
    assert legends["shown"]["showLegend"] is True and legends["shown"]["displayMode"] == "list"
    assert legends["hidden"]["showLegend"] is False and legends["hidden"]["displayMode"] == "list"
    assert [p for p in schema_problems(model) if ".options" in p] == []


def test_build_refuses_a_dashboard_that_violates_the_schema(tmp_path, monkeypatch, capsys):
    grafana_model = postprocess.to_grafana

    def with_bad_legend(*args):
        model = grafana_model(*args)
        _first(model, "timeseries")[1]["options"]["legend"]["displayMode"] = "sideways"
        return model

    monkeypatch.setattr(postprocess, "to_grafana", with_bad_legend)
    out = tmp_path / "generated"
    monkeypatch.setattr(sys, "argv", ["llmdash", "build", "--out", str(out)])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith("error: the dashboard for ") and err.count("\n") == 1
    assert "options.legend.displayMode: 'sideways' is not one of" in err and "panel '" in err
    assert not out.exists()


def test_third_party_dashboards_show_their_real_deviations():
    """The check separates real deviations from noise: each slip that dashboards published by other projects
    commonly carry is one line naming where it is, and nothing else in them is reported."""
    found = {p.stem: schema_problems(json.loads(p.read_text())) for p in sorted(THIRD_PARTY.glob("*.json"))}
    assert found == {
        "exported_for_sharing": [
            "$: Additional properties are not allowed ('__elements', '__inputs', '__requires' were unexpected) "
            "(Grafana schema)",
            "panel 'Running requests' $.panels[0].datasource: Additional properties are not allowed ('default' was "
            "unexpected) (Grafana schema)",
            "panel 'Running requests' $.panels[0].fieldConfig.defaults.thresholds.steps[0]: 'value' is a required "
            "property (Grafana schema)",
        ],
        "link_without_tooltip": ["$.links[0]: 'tooltip' is a required property (Grafana schema)"],
    }
