"""The schema v2 twins in generated/dashboards-v2/: Grafana's v2 types, and the same content as the classic ones."""

import copy
import json

import pytest

from llmdash.dashboards import v2
from llmdash.dashboards.schema import v2_schema_problems
from llmdash.errors import LlmdashError
from llmdash.vocabulary import PANEL_TITLES, Panel
from tests.support.catalogs import ENGINES
from tests.support.paths import GENERATED

NAMES = sorted(["fleet", *ENGINES])


def _pair(name: str) -> tuple[dict, dict]:
    return (json.loads((GENERATED / "dashboards" / f"{name}.json").read_text()),
            json.loads((GENERATED / "dashboards-v2" / f"{name}.json").read_text()))


def _classic_panels(classic: dict):
    """(row title, panel) of every non-row panel."""
    row = ""
    for panel in classic["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
            continue
        yield row, panel


def _v2_panels(resource: dict):
    """(row title, element name, element spec) in layout order."""
    elements = resource["spec"]["elements"]
    for row in resource["spec"]["layout"]["spec"]["rows"]:
        for item in row["spec"]["layout"]["spec"]["items"]:
            name = item["spec"]["element"]["name"]
            yield row["spec"]["title"], name, elements[name]["spec"]


def test_every_dashboard_has_a_v2_twin():
    assert sorted(p.stem for p in (GENERATED / "dashboards-v2").glob("*.json")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_v2_twin_validates_against_grafanas_v2_schema(name):
    _, resource = _pair(name)
    assert resource["apiVersion"] == "dashboard.grafana.app/v2" and resource["kind"] == "Dashboard"
    assert v2_schema_problems(resource, v2.RESOURCE_API_VERSION, v2.KIND) == []


@pytest.mark.parametrize("name", NAMES)
def test_v2_twin_carries_the_same_queries_annotations_and_variables(name):
    classic, resource = _pair(name)
    spec = resource["spec"]
    assert resource["metadata"]["name"] == classic["uid"]
    classic_queries = sorted((row, p["title"], t["refId"], t["expr"], t.get("legendFormat"))
                             for row, p in _classic_panels(classic) for t in p.get("targets", []))
    v2_queries = sorted((row, e["title"], q["spec"]["refId"], q["spec"]["query"]["spec"]["expr"],
                         q["spec"]["query"]["spec"].get("legendFormat"))
                        for row, _, e in _v2_panels(resource) for q in e["data"]["spec"]["queries"])
    assert v2_queries == classic_queries and classic_queries
    assert [(a["name"], a.get("target"), a["iconColor"], a["enable"], a["hide"])
            for a in classic["annotations"]["list"]] == \
        [(a["spec"]["name"], a["spec"]["query"]["spec"] or None, a["spec"]["iconColor"], a["spec"]["enable"],
          a["spec"]["hide"]) for a in spec["annotations"]]
    assert [(v["name"], v["type"], v.get("definition"), v.get("query")) for v in classic["templating"]["list"]] == \
        [(v["spec"]["name"], {"QueryVariable": "query", "DatasourceVariable": "datasource"}[v["kind"]],
          v["spec"].get("definition"), v["spec"]["query"]["spec"] if v["kind"] == "QueryVariable"
          else v["spec"]["pluginId"]) for v in spec["variables"]]
    assert [(link["title"], link["tags"]) for link in classic["links"]] == \
        [(link["title"], link["tags"]) for link in spec["links"]]


@pytest.mark.parametrize("name", NAMES)
def test_v2_twin_keeps_units_thresholds_and_rows(name):
    classic, resource = _pair(name)
    wanted = [(row, p["title"], p["type"], p.get("fieldConfig", {}).get("defaults", {}),
               p.get("fieldConfig", {}).get("overrides", []), p.get("options", {}), p["gridPos"]["w"],
               p["gridPos"]["h"])
              for row, p in _classic_panels(classic)]
    got = [(row, e["title"], e["vizConfig"]["group"], e["vizConfig"]["spec"]["fieldConfig"]["defaults"],
            e["vizConfig"]["spec"]["fieldConfig"]["overrides"], e["vizConfig"]["spec"]["options"], w, h)
           for (row, _, e), (w, h) in zip(_v2_panels(resource), _sizes(resource))]
    assert got == wanted
    rows = [r["spec"] for r in resource["spec"]["layout"]["spec"]["rows"]]
    assert [r["title"] for r in rows] == [p["title"] for p in classic["panels"] if p["type"] == "row"]
    # both schemas open alike: a v2 row is collapsed exactly where its classic twin's row is
    assert [(r["title"], r["collapse"]) for r in rows] == \
        [(p["title"], p.get("collapsed", False)) for p in classic["panels"] if p["type"] == "row"]


def test_a_collapsed_classic_row_is_collapsed_in_v2_and_an_expanded_one_expanded():
    classic, _ = _pair("vllm")
    classic = copy.deepcopy(classic)
    queue = next(p for p in classic["panels"] if p["type"] == "row" and p["title"] == "Queue")
    queue["collapsed"] = True
    rows = {r["spec"]["title"]: r["spec"]["collapse"] for r in v2.to_v2(classic)["spec"]["layout"]["spec"]["rows"]}
    assert rows["Queue"] is True and rows["Instances"] is False


def _sizes(resource):
    for row in resource["spec"]["layout"]["spec"]["rows"]:
        for item in row["spec"]["layout"]["spec"]["items"]:
            yield item["spec"]["width"], item["spec"]["height"]


def test_elements_are_named_by_the_vocabulary_panel_keys():
    _, resource = _pair("vllm")
    placed = {(row, name) for row, name, _ in _v2_panels(resource)}
    assert ("Instances", Panel.TOP_INSTANCES_BY_PREEMPTION) in placed
    assert ("Preemption", Panel.KV_USAGE) in placed and ("On-call", f"{Panel.KV_USAGE}_tile") in placed
    assert ("On-call", Panel.THROUGHPUT_TILE) in placed
    elements = resource["spec"]["elements"]
    assert elements[Panel.KV_USAGE]["spec"]["title"] == PANEL_TITLES[Panel.KV_USAGE]
    assert elements["itl_p99"]["spec"]["title"] == "ITL p99"   # no key: a slug of the title


def test_element_names_do_not_depend_on_other_panels():
    """Removing the tile keeps the chart's name: names come from title, kind and row, never from position."""
    classic, _ = _pair("vllm")
    fewer = copy.deepcopy(classic)
    fewer["panels"] = [p for p in fewer["panels"] if not (p["type"] == "stat" and p["title"] == "KV-cache usage")]
    assert set(v2.to_v2(classic)["spec"]["elements"]) - set(v2.to_v2(fewer)["spec"]["elements"]) == {"kv_usage_tile"}


def test_unknown_classic_key_is_refused_naming_it():
    classic, _ = _pair("vllm")
    broken = copy.deepcopy(classic)
    next(p for p in broken["panels"] if p["type"] == "timeseries")["repeat"] = "instance"
    with pytest.raises(LlmdashError, match=r"panel 'Output tokens/s': repeat has no v2 rendering"):
        v2.to_v2(broken)


def test_unknown_variable_type_is_refused():
    classic, _ = _pair("vllm")
    broken = copy.deepcopy(classic)
    broken["templating"]["list"].append({"type": "interval", "name": "step"})
    with pytest.raises(LlmdashError, match=r"variable 'step': type 'interval'"):
        v2.to_v2(broken)


def _misspelled_cursor_sync(resource):
    resource["spec"]["cursorSync"] = "crosshair"
    return "$.spec.cursorSync: 'crosshair' is not one of ['Crosshair', 'Tooltip', 'Off'] (Grafana schema)"


def _misspelled_stat_option(resource):
    resource["spec"]["elements"]["throughput_tile"]["spec"]["vizConfig"]["spec"]["options"]["colorMod"] = "value"
    return ("element 'throughput_tile' (panel 'Output tok/s') $.spec.elements.throughput_tile.spec.vizConfig.spec"
            ".options: Additional properties are not allowed ('colorMod' was unexpected) (Grafana schema)")


def _string_item_width(resource):
    resource["spec"]["layout"]["spec"]["rows"][0]["spec"]["layout"]["spec"]["items"][0]["spec"]["width"] = "6"
    return "'6' is not of type 'number' (Grafana schema)"


def _variable_without_current(resource):
    del resource["spec"]["variables"][1]["spec"]["current"]
    return "$.spec.variables[1].spec: 'current' is a required property (Grafana schema)"


def _wrong_api_version(resource):
    resource["apiVersion"] = "dashboard.grafana.app/v1"
    return "$: apiVersion/kind 'dashboard.grafana.app/v1'/'Dashboard', not 'dashboard.grafana.app/v2'/'Dashboard'"


@pytest.mark.parametrize("break_it", [_misspelled_cursor_sync, _misspelled_stat_option, _string_item_width,
                                      _variable_without_current, _wrong_api_version], ids=lambda f: f.__name__)
def test_v2_schema_names_the_problem(break_it):
    _, resource = _pair("vllm")
    broken = copy.deepcopy(resource)
    expected = break_it(broken)
    problems = v2_schema_problems(broken, v2.RESOURCE_API_VERSION, v2.KIND)
    assert any(expected in line for line in problems), problems


def test_build_refuses_an_invalid_v2_rendering(monkeypatch):
    classic, _ = _pair("vllm")
    monkeypatch.setattr(v2, "CURSOR_SYNC", {1: "crosshair"})
    with pytest.raises(LlmdashError, match=r"the v2 rendering of llmdash-vllm is invalid: \$\.spec\.cursorSync"):
        v2.rendered(classic)
