"""`llmdash diff` on the schema v2 twins: element by element, each named by its row and panel title as in v1."""

import copy
import json

from llmdash.cli.review import render_report
from llmdash.review.compare import BuildOutput, diff_dashboard, diff_outputs, load_output
from llmdash.review.render import render_text
from tests.support.paths import GENERATED

VLLM_V2 = json.loads((GENERATED / "dashboards-v2" / "vllm.json").read_text())


def _changed(edit) -> list:
    new = copy.deepcopy(VLLM_V2)
    edit(new["spec"])
    return diff_dashboard(VLLM_V2, new)


def test_identical_twins_have_no_changes():
    assert diff_dashboard(VLLM_V2, copy.deepcopy(VLLM_V2)) == []


def test_a_query_change_names_the_row_and_panel():
    def edit(spec):
        spec["elements"]["kv_usage"]["spec"]["data"]["spec"]["queries"][0]["spec"]["query"]["spec"]["expr"] = "up"

    (change,) = _changed(edit)
    assert (change.kind, change.where, change.after) == ("expr", 'row "Preemption" / panel "KV-cache usage" / query A',
                                                         "up")


def test_unit_threshold_and_collapse_changes():
    def edit(spec):
        defaults = spec["elements"]["ttft_p99"]["spec"]["vizConfig"]["spec"]["fieldConfig"]["defaults"]
        defaults["unit"] = "ms"
        spec["layout"]["spec"]["rows"][3]["spec"]["collapse"] = True

    changes = {(c.kind, c.where, c.before, c.after) for c in _changed(edit)}
    assert ("unit", 'row "Throughput vs latency" / panel "TTFT p99"', "s", "ms") in changes
    assert ("setting", 'row "Instances" / collapsed', "false", "true") in changes


def test_renaming_an_element_is_reported():
    def edit(spec):
        spec["elements"]["queue_chart"] = spec["elements"].pop("queue")
        for row in spec["layout"]["spec"]["rows"]:
            for item in row["spec"]["layout"]["spec"]["items"]:
                if item["spec"]["element"]["name"] == "queue":
                    item["spec"]["element"]["name"] = "queue_chart"

    text = render_text("vllm", _changed(edit))
    assert 'row "Queue" / panel "Running and waiting requests"' in text and '"queue" -> "queue_chart"' in text


def test_an_element_added_to_a_row():
    def edit(spec):
        spec["elements"]["extra"] = copy.deepcopy(spec["elements"]["queue"])
        spec["elements"]["extra"]["spec"]["title"] = "Extra"
        items = spec["layout"]["spec"]["rows"][5]["spec"]["layout"]["spec"]["items"]
        items.append({"kind": "GridLayoutItem", "spec": {"x": 0, "y": 8, "width": 24, "height": 8,
                                                         "element": {"kind": "ElementReference", "name": "extra"}}})

    kinds = {(c.kind, c.where) for c in _changed(edit)}
    assert ("panel-added", 'row "Queue" / panel "Extra"') in kinds


def test_build_outputs_compare_the_v2_twins_under_their_own_name(tmp_path):
    for part in ("dashboards", "dashboards-v2"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "vllm.json").write_text((GENERATED / part / "vllm.json").read_text())
    loaded = load_output(tmp_path)
    assert sorted(loaded.dashboards) == ["vllm", "vllm (schema v2)"]
    report = diff_outputs(BuildOutput({}, {}), loaded)
    added = report["vllm (schema v2)"]
    assert added[0].kind == "dashboard-added"
    assert ("panel-added", 'row "Instances" / panel "Top instances by preemption"') in {(c.kind, c.where)
                                                                                        for c in added}


def test_a_side_building_fewer_engines_renders_in_both_formats():
    """Issue 28: a removed schema v2 twin had no title (it is spec.title) and the markdown report raised."""
    full = load_output(GENERATED)
    fewer = BuildOutput({name: model for name, model in full.dashboards.items() if not name.startswith("sglang")},
                        {name: rules for name, rules in full.rules.items() if name != "sglang"})
    report = diff_outputs(full, fewer)
    assert report["sglang (schema v2)"][0].kind == "dashboard-removed"
    assert report["sglang (schema v2)"][0].before == full.dashboards["sglang"]["title"]
    markdown = render_report(report, "main", "B", "markdown")
    assert f"- dashboard-removed: `{full.dashboards['sglang']['title']}`" in markdown
    assert "dashboard-removed: " + full.dashboards["sglang"]["title"] in render_report(report, "main", "B", "text")


def test_a_dashboard_without_a_title_removed_renders_in_both_formats():
    report = {"untitled": diff_dashboard({"panels": []}, None)}
    assert "dashboard-removed: `(none)`" in render_report(report, "a", "b", "markdown")
    assert "dashboard-removed: (none)" in render_report(report, "a", "b", "text")
