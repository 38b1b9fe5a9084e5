"""Semantic dashboard diff on crafted before/after pairs: one test per kind of change a reviewer cares about."""

import copy
import json
import random

import pytest
import yaml

from llmdash.review.compare import (
    BuildOutput,
    Change,
    diff_dashboard,
    diff_outputs,
    diff_rules,
    load_output,
    normalise,
)
from llmdash.review.render import render_markdown, render_text
from llmdash.errors import LlmdashError
from tests.support import paths

ITL_EXPR = ('histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket'
            '{model_name=~"$model_name"}[$__rate_interval])))')
ITL_WHERE = 'row "Throughput vs latency" / panel "ITL p99"'


def _panel(pid, title, x, y, w=12, h=8, expr="sum(rate(vllm:generation_tokens_total[$__rate_interval]))", unit="short"):
    return {
        "id": pid, "title": title, "type": "timeseries", "description": f"{title} of the serving engine",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": h, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": [
            {"color": "green", "value": None}, {"color": "red", "value": 80}]}}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [{"expr": expr, "refId": "A", "legendFormat": "{{model_name}}",
                     "datasource": {"type": "prometheus", "uid": "${datasource}"}}],
    }


def _row(pid, title, y):
    return {"id": pid, "title": title, "type": "row", "collapsed": False, "panels": [],
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}}


def _dashboard():
    return {
        "uid": "llmdash-vllm", "title": "vLLM: throughput vs latency", "id": None, "version": 0,
        "schemaVersion": 39, "tags": ["llmdash", "vllm"], "refresh": "30s",
        "panels": [
            _row(1, "Throughput vs latency", 0),
            _panel(2, "Output tokens/s", 0, 1),
            _panel(3, "ITL p99", 12, 1, expr=ITL_EXPR, unit="s"),
            _row(4, "Preemption", 9),
            _panel(5, "Preemptions/s", 0, 10),
            _panel(6, "KV cache usage", 12, 10, unit="percentunit"),
            _row(7, "Queue", 18),
            _panel(8, "Waiting", 0, 19),
        ],
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "current": {}},
            {"name": "model_name", "type": "query", "query": "label_values(vllm:num_requests_running, model_name)",
             "multi": True, "includeAll": True, "allValue": ".*", "options": [], "current": {}},
        ]},
        "annotations": {"list": [
            {"name": "Preemption (vLLM)", "enable": True, "iconColor": "red",
             "datasource": {"type": "prometheus", "uid": "${datasource}"},
             "target": {"expr": "(rate(vllm:num_preemptions_total[1m]) > 0) * 0 + 1", "interval": "60s",
                        "refId": "Anno"},
             "titleFormat": "Preemption {{model_name}}"},
        ]},
        "links": [{"title": "Runbook", "url": "https://example.invalid/runbook", "type": "link"}],
    }


def _panel_by_title(dashboard, title):
    return next(p for p in dashboard["panels"] if p.get("title") == title)


def _kinds(changes):
    return sorted((c.kind, c.where) for c in changes)


@pytest.fixture
def old():
    return _dashboard()


@pytest.fixture
def new():
    return _dashboard()


def test_reserialised_and_reordered_dashboard_reports_nothing(old):
    shuffled = json.loads(json.dumps(old, indent=4, sort_keys=False))
    random.Random(7).shuffle(shuffled["panels"])
    shuffled["tags"].reverse()
    shuffled = {key: shuffled[key] for key in reversed(list(shuffled))}
    shuffled.update(id=17, version=9, iteration=1712345678)
    _panel_by_title(shuffled, "ITL p99")["pluginVersion"] = "11.6.0"
    shuffled["templating"]["list"][1]["current"] = {"text": "All", "value": "$__all"}

    assert diff_dashboard(old, shuffled) == []
    assert normalise(old) == normalise(shuffled)


def test_normalise_keeps_content_differences(old, new):
    _panel_by_title(new, "ITL p99")["targets"][0]["expr"] = "vector(1)"
    assert normalise(old) != normalise(new)
    assert "id" not in normalise({"id": 3, "title": "x"}) and "version" not in normalise({"version": 2})


def test_panel_added_shows_its_query(old, new):
    new["panels"].append(_panel(9, "Running", 12, 19, expr="sum(vllm:num_requests_running)"))
    changes = diff_dashboard(old, new)
    assert Change("panel-added", 'row "Queue" / panel "Running"', None, "timeseries 12x8 at x=12 y=+0") in changes
    assert Change("expr", 'row "Queue" / panel "Running" / query A', None, "sum(vllm:num_requests_running)") in changes
    assert {c.kind for c in changes} == {"panel-added", "expr"}


def test_panel_removed(old, new):
    new["panels"].remove(_panel_by_title(new, "KV cache usage"))
    changes = diff_dashboard(old, new)
    assert ("panel-removed", 'row "Preemption" / panel "KV cache usage"') in _kinds(changes)
    assert all(c.after is None for c in changes)


def test_panel_moved_within_row_and_resized(old, new):
    kv = _panel_by_title(new, "KV cache usage")
    kv["gridPos"] = {"h": 10, "w": 24, "x": 0, "y": 18}
    _panel_by_title(new, "Queue")["gridPos"]["y"] = 28
    _panel_by_title(new, "Waiting")["gridPos"]["y"] = 29
    changes = diff_dashboard(old, new)
    where = 'row "Preemption" / panel "KV cache usage"'
    assert changes == [
        Change("panel-moved", where, "x=12 y=+0", "x=0 y=+8"),
        Change("panel-resized", where, "12x8", "24x10"),
    ]


def test_inserting_a_row_above_does_not_move_the_panels_below(old, new):
    for panel in new["panels"]:
        panel["gridPos"]["y"] += 9
    new["panels"] += [_row(10, "On-call", 0), _panel(11, "SLO attainment", 0, 1, w=24)]
    changes = diff_dashboard(old, new)
    assert {c.kind for c in changes} == {"panel-added", "expr"}
    assert {c.where for c in changes if c.kind == "panel-added"} == {'row "On-call"',
                                                                      'row "On-call" / panel "SLO attainment"'}


def test_panel_moved_to_another_row(old, new):
    waiting = _panel_by_title(new, "Waiting")
    waiting["gridPos"] = {"h": 8, "w": 12, "x": 0, "y": 1}
    _panel_by_title(new, "Output tokens/s")["gridPos"]["x"] = 12
    _panel_by_title(new, "ITL p99")["gridPos"]["y"] = 9  # both shift down inside their row
    changes = diff_dashboard(old, new)
    assert Change("panel-moved", 'row "Throughput vs latency" / panel "Waiting"', 'row "Queue"',
                  'row "Throughput vs latency"') in changes
    assert not [c for c in changes if c.kind in ("panel-added", "panel-removed")]


def test_row_reordered(old, new):
    for panel in new["panels"]:
        y = panel["gridPos"]["y"]
        panel["gridPos"]["y"] = y + 10 if y < 18 else y - 18
    changes = diff_dashboard(old, new)
    assert changes == [Change("panel-moved", 'row "Queue"', "row 3 of 3", "row 1 of 3")]


def test_panel_title_change_keeps_identity_by_id(old, new):
    _panel_by_title(new, "Waiting")["title"] = "Waiting requests"
    changes = diff_dashboard(old, new)
    assert Change("title", 'row "Queue" / panel "Waiting requests"', "Waiting", "Waiting requests") in changes
    assert not [c for c in changes if c.kind in ("panel-added", "panel-removed")]


def test_row_title_change_does_not_report_its_panels(old, new):
    _panel_by_title(new, "Preemption")["title"] = "KV-cache preemption"
    assert diff_dashboard(old, new) == [Change("title", 'row "KV-cache preemption"', "Preemption",
                                               "KV-cache preemption")]


def test_description_unit_and_thresholds(old, new):
    itl = _panel_by_title(new, "ITL p99")
    itl["description"] = "Per-step inter-token latency, 99th percentile"
    itl["fieldConfig"]["defaults"]["unit"] = "ms"
    itl["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] = 0.25
    changes = diff_dashboard(old, new)
    assert Change("description", ITL_WHERE, "ITL p99 of the serving engine",
                  "Per-step inter-token latency, 99th percentile") in changes
    assert Change("unit", ITL_WHERE, "s", "ms") in changes
    assert Change("thresholds", ITL_WHERE, "green | red ≥ 80 (absolute)", "green | red ≥ 0.25 (absolute)") in changes
    assert len(changes) == 3


def test_promql_change_is_a_before_after_pair_in_both_renderings(old, new):
    new_expr = ITL_EXPR.replace("0.99", "0.95")
    _panel_by_title(new, "ITL p99")["targets"][0]["expr"] = new_expr
    changes = diff_dashboard(old, new)
    assert changes == [Change("expr", f"{ITL_WHERE} / query A", ITL_EXPR, new_expr)]

    text = render_text("vllm", changes)
    assert f"  {ITL_WHERE}\n" in text
    assert f"      - {ITL_EXPR}\n      + {new_expr}\n" in text
    column = ITL_EXPR.index("0.99") + 3  # the caret points at the digit that changed
    assert f"+ {new_expr}\n        {' ' * column}^\n" in text
    markdown = render_markdown("vllm", changes)
    assert "```diff" in markdown and f"- {ITL_EXPR}" in markdown and f"+ {new_expr}" in markdown
    assert markdown.startswith("### `vllm`: 1 change")


def test_query_setting_and_panel_setting(old, new):
    itl = _panel_by_title(new, "ITL p99")
    itl["targets"][0]["legendFormat"] = "{{model_name}} {{instance}}"
    itl["options"]["legend"]["displayMode"] = "table"
    changes = diff_dashboard(old, new)
    assert Change("setting", f"{ITL_WHERE} / query A / legendFormat", '"{{model_name}}"',
                  '"{{model_name}} {{instance}}"') in changes
    assert Change("setting", f"{ITL_WHERE} / options.legend.displayMode", '"list"', '"table"') in changes


def test_variable_added_removed_changed(old, new):
    variables = new["templating"]["list"]
    variables[1]["query"] = "label_values(vllm:num_requests_waiting, model_name)"
    variables.append({"name": "instance", "type": "query", "query": "label_values(up, instance)"})
    changes = diff_dashboard(old, new)
    assert Change("variable", 'variable "model_name" / query', '"label_values(vllm:num_requests_running, model_name)"',
                  '"label_values(vllm:num_requests_waiting, model_name)"') in changes
    added = [c for c in changes if c.where == 'variable "instance"']
    assert len(added) == 1 and added[0].before is None and "label_values(up, instance)" in added[0].after
    del new["templating"]["list"][0]
    assert any(c.where == 'variable "datasource"' and c.after is None for c in diff_dashboard(old, new))


def test_annotation_query_and_setting_change(old, new):
    annotation = new["annotations"]["list"][0]
    annotation["target"]["expr"] = "(rate(vllm:num_preemptions_total[5m]) > 0) * 0 + 1"
    annotation["iconColor"] = "orange"
    changes = diff_dashboard(old, new)
    assert Change("expr", 'annotation "Preemption (vLLM)"', "(rate(vllm:num_preemptions_total[1m]) > 0) * 0 + 1",
                  "(rate(vllm:num_preemptions_total[5m]) > 0) * 0 + 1") in changes
    assert Change("annotation", 'annotation "Preemption (vLLM)" / iconColor', '"red"', '"orange"') in changes


def test_annotation_added_and_removed(old, new):
    new["annotations"]["list"] = [{"name": "Divergence", "target": {"expr": "vector(1)", "refId": "Anno"}}]
    changes = diff_dashboard(old, new)
    assert ("annotation", 'annotation "Preemption (vLLM)"') in _kinds(changes)
    assert Change("expr", 'annotation "Divergence"', None, "vector(1)") in changes
    assert Change("annotation", 'annotation "Divergence"', None,
                  '{"name": "Divergence", "target": {"refId": "Anno"}}') in changes


def test_link_changed(old, new):
    new["links"][0]["url"] = "https://example.invalid/runbook-v2"
    new["links"].append({"title": "Engine docs", "url": "https://example.invalid/docs", "type": "link"})
    changes = diff_dashboard(old, new)
    assert Change("link", 'link "Runbook" / url', '"https://example.invalid/runbook"',
                  '"https://example.invalid/runbook-v2"') in changes
    assert ("link", 'link "Engine docs"') in _kinds(changes)


def test_dashboard_title_and_setting(old, new):
    new["title"] = "vLLM"
    new["refresh"] = "1m"
    assert diff_dashboard(old, new) == [
        Change("title", "dashboard", "vLLM: throughput vs latency", "vLLM"),
        Change("setting", "dashboard / refresh", '"30s"', '"1m"'),
    ]


def test_whole_grid_shift_is_still_reported(old, new):
    """Nothing moved within its row, yet the models differ: say so rather than report nothing."""
    for panel in new["panels"]:
        panel["gridPos"]["y"] += 2
    assert diff_dashboard(old, new) == [
        Change("panel-moved", "dashboard", None, "rows shifted vertically; order, sizes and rows unchanged")]


def test_templating_section_setting(old, new):
    new["templating"]["enable"] = False
    assert diff_dashboard(old, new) == [Change("setting", "dashboard / templating / enable", None, "false")]


def test_created_and_deleted_dashboard(old):
    created = diff_dashboard(None, old)
    assert created[0] == Change("dashboard-added", "dashboard", None, "vLLM: throughput vs latency")
    assert sum(c.kind == "panel-added" for c in created) == 8
    assert diff_dashboard(old, None) == [Change("dashboard-removed", "dashboard", "vLLM: throughput vs latency", None)]


def test_duplicate_titles_fall_back_to_panel_id(old, new):
    for dashboard in (old, new):
        dashboard["panels"].append(_panel(20, "Waiting", 12, 19))
    _panel_by_title(new, "Waiting")["fieldConfig"]["defaults"]["unit"] = "reqps"  # the first one, id 8
    assert diff_dashboard(old, new) == [Change("unit", 'row "Queue" / panel "Waiting" #8', "short", "reqps")]


def _rules(**overrides):
    rules = {"groups": [{"name": "llmdash-vllm", "interval": "30s", "rules": [
        {"record": "llmdash:itl_p99", "expr": "histogram_quantile(0.99, x)"},
        {"alert": "KVCachePreemption", "expr": "rate(vllm:num_preemptions_total[5m]) > 0", "for": "5m",
         "labels": {"severity": "warning"}, "annotations": {"summary": "vLLM preempts requests"}},
    ]}]}
    rules["groups"][0]["rules"][1].update(overrides)
    return rules


def test_rules_reordered_report_nothing():
    shuffled = _rules()
    shuffled["groups"][0]["rules"].reverse()
    assert diff_rules(_rules(), shuffled) == []


def test_rule_added_removed_changed():
    old = _rules()
    new = _rules(expr="rate(vllm:num_preemptions_total[5m]) > 0.1", **{"for": "10m"})
    new["groups"][0]["rules"].append({"alert": "ITLDiverging", "expr": "vector(1)"})
    del new["groups"][0]["rules"][0]
    changes = diff_rules(old, new)
    assert changes == [
        Change("rule-removed", 'record "llmdash:itl_p99"', "histogram_quantile(0.99, x)", None),
        Change("expr", 'alert "KVCachePreemption"', "rate(vllm:num_preemptions_total[5m]) > 0",
               "rate(vllm:num_preemptions_total[5m]) > 0.1"),
        Change("rule-changed", 'alert "KVCachePreemption" / for', '"5m"', '"10m"'),
        Change("rule-added", 'alert "ITLDiverging"', None, "vector(1)"),
    ]


def test_same_alert_name_per_severity_is_told_apart():
    old = _rules()
    old["groups"][0]["rules"].append({"alert": "KVCachePreemption", "expr": "x > 1",
                                      "labels": {"severity": "critical"}})
    new = copy.deepcopy(old)
    new["groups"][0]["rules"][2]["expr"] = "x > 2"
    assert diff_rules(old, new) == [Change("expr", 'alert "KVCachePreemption" [severity=critical]', "x > 1", "x > 2")]


def test_absent_rule_files_are_no_change_and_new_file_is_all_added():
    assert diff_rules(None, None) == []
    assert {c.kind for c in diff_rules(None, _rules())} == {"rule-added"}


def _write_output(root, dashboards, rules):
    (root / "dashboards").mkdir(parents=True)
    for name, model in dashboards.items():
        (root / "dashboards" / f"{name}.json").write_text(json.dumps(model, sort_keys=True, indent=2) + "\n")
    if rules:
        (root / "rules").mkdir()
        for name, rule_file in rules.items():
            (root / "rules" / f"{name}.rules.yaml").write_text(yaml.safe_dump(rule_file))


def test_build_outputs_compare_by_file_stem(tmp_path, old, new):
    _panel_by_title(new, "ITL p99")["targets"][0]["expr"] = "vector(0)"
    _write_output(tmp_path / "a", {"vllm": old, "sglang": old}, {})
    _write_output(tmp_path / "b", {"vllm": new, "lmdeploy": old}, {"vllm": _rules()})
    report = diff_outputs(load_output(tmp_path / "a"), load_output(tmp_path / "b"))
    assert list(report) == ["lmdeploy", "sglang", "vllm"]
    assert report["sglang"] == [Change("dashboard-removed", "dashboard", "vLLM: throughput vs latency", None)]
    assert report["lmdeploy"][0].kind == "dashboard-added"
    assert [c.kind for c in report["vllm"]] == ["expr", "rule-added", "rule-added"]
    assert diff_outputs(load_output(tmp_path / "a"), load_output(tmp_path / "a")) == {"sglang": [], "vllm": []}
    assert load_output(tmp_path / "missing") == BuildOutput({}, {})


def test_unreadable_dashboard_file_is_one_line_error(tmp_path):
    (tmp_path / "dashboards").mkdir()
    (tmp_path / "dashboards" / "vllm.json").write_text("{not json")
    with pytest.raises(LlmdashError) as error:
        load_output(tmp_path)
    assert "vllm.json" in str(error.value) and "\n" not in str(error.value)


def test_no_change_renders_as_such():
    assert render_text("vllm", []) == "vllm: no changes\n"
    assert render_markdown("vllm", []) == "### `vllm`: no changes\n"


# --------------------------------------------------------------------------- llmdash diff on git revisions

FAKE_BUILD = '''
import json, pathlib, sys

def main():
    """Stands in for a revision's `llmdash build --out DIR`: writes the models in ./model.json."""
    args = sys.argv[1:]
    if pathlib.Path("broken").exists():
        sys.exit("error: catalog engines/vllm.yaml: missing key 'series'")
    out = pathlib.Path(args[args.index("--out") + 1])
    source = json.loads(pathlib.Path("model.json").read_text())
    if "--config" in args:  # the config file holds a title, so a test can see it was used
        title = pathlib.Path(args[args.index("--config") + 1]).read_text().strip()
        source = {name: {**model, "title": title} for name, model in source.items()}
    (out / "dashboards").mkdir(parents=True)
    for name, model in source.items():
        (out / "dashboards" / f"{name}.json").write_text(json.dumps(model, sort_keys=True, indent=2) + "\\n")
'''

# Like llmdash's own pyproject: the command's package lives in a folder of another name.
FAKE_PYPROJECT = '''
[project]
name = "llmdash"
scripts = {llmdash = "fakellm.cli:main"}

[tool.setuptools]
packages = ["fakellm"]
package-dir = {fakellm = "code"}
'''


def _git(repo, *args):
    import subprocess
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@example.invalid", "HOME": str(repo), "PATH": "/usr/bin:/bin"})


def _commit(repo, models, message, generated=None):
    (repo / "model.json").write_text(json.dumps(models))
    if generated is not None:
        _write_output(repo / "generated", generated, {}) if not (repo / "generated").exists() else None
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)


OWN_CODE = "--build-with-revision-code"  # the stand-in below builds only with its own code


@pytest.fixture
def repo(tmp_path):
    """A stand-in llmdash source repository whose two commits build a vLLM dashboard before and after an
    ITL query change."""
    root = tmp_path / "repo"
    (root / "code").mkdir(parents=True)
    (root / "code" / "__init__.py").write_text("")
    (root / "code" / "cli.py").write_text(FAKE_BUILD)
    (root / "pyproject.toml").write_text(FAKE_PYPROJECT)
    _git(root, "init", "-q", "-b", "main")
    before = _dashboard()
    _commit(root, {"vllm": before}, "first", generated={"vllm": before})
    after = _dashboard()
    _panel_by_title(after, "ITL p99")["targets"][0]["expr"] = ITL_EXPR.replace("0.99", "0.95")
    _commit(root, {"vllm": after}, "second")
    return root


def test_two_revisions_are_built_with_their_own_code_when_asked(repo, tmp_path):
    from llmdash.cli.review import compare
    report, old_label, new_label = compare("HEAD~1", "HEAD", repo, tmp_path / "work", own_code=True)
    assert (old_label, new_label) == ("HEAD~1 (config: defaults)", "HEAD (config: defaults)")
    assert report == {"vllm": [Change("expr", f"{ITL_WHERE} / query A", ITL_EXPR, ITL_EXPR.replace("0.99", "0.95"))]}
    assert compare("HEAD", "HEAD", repo, tmp_path / "same", own_code=True)[0] == {"vllm": []}


def test_default_compares_committed_generated_with_working_tree(repo, tmp_path):
    from llmdash.cli.review import compare
    report, old_label, new_label = compare(None, None, repo, tmp_path / "work", own_code=True)
    assert (old_label, new_label) == ("generated/ at HEAD", "working tree (config: defaults)")
    assert [c.kind for c in report["vllm"]] == ["expr"]


def test_diff_command_exit_codes_and_markdown(repo, monkeypatch):
    from click.testing import CliRunner
    from llmdash.cli import review as cli_review
    monkeypatch.chdir(repo)
    runner = CliRunner()
    changed = runner.invoke(cli_review.diff_command, ["HEAD~1", "HEAD", "--format", "markdown", OWN_CODE])
    assert changed.exit_code == 1, changed.output
    assert "**row \"Throughput vs latency\" / panel \"ITL p99\"**" in changed.output
    assert f"  - {ITL_EXPR}\n  + {ITL_EXPR.replace('0.99', '0.95')}" in changed.output
    same = runner.invoke(cli_review.diff_command, ["main", "HEAD", OWN_CODE])
    assert same.exit_code == 0 and "no dashboard or rule changes" in same.output


def test_failed_build_of_a_revision_is_one_line(repo, monkeypatch):
    from click.testing import CliRunner
    from llmdash.cli import review as cli_review
    (repo / "broken").write_text("")
    _git(repo, "add", "broken")
    _git(repo, "commit", "-q", "-m", "break the catalog")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli_review.diff_command, ["HEAD~1", "HEAD", OWN_CODE])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == ("building revision HEAD~1...\nbuilding revision HEAD...\n"  # progress, then the error
                             "error: building revision HEAD failed: catalog engines/vllm.yaml: missing key 'series'\n")


def test_unknown_revision_is_one_line_exit_2(repo, monkeypatch):
    from click.testing import CliRunner
    from llmdash.cli.review import diff_command
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(diff_command, ["no-such-revision", "HEAD"])
    assert result.exit_code == 2
    assert result.output == "error: unknown git revision 'no-such-revision'\n"


def test_revision_is_built_only_from_its_own_files(repo, tmp_path):
    """A revision without the build code must fail, not borrow the installed working tree's modules."""
    from llmdash.cli.review import compare
    _git(repo, "rm", "-q", "code/cli.py")
    _git(repo, "commit", "-q", "-m", "drop the build")
    with pytest.raises(LlmdashError, match=r"^building revision HEAD failed: "
                                           r"ModuleNotFoundError: No module named 'fakellm.cli'$"):
        compare("HEAD~1", "HEAD", repo, tmp_path / "work", own_code=True)


def _group_with(command):
    import click

    @click.group()
    @click.option("--config", "config_path")
    @click.pass_context
    def llmdash(ctx, config_path):
        ctx.obj = {"config_path": config_path}

    llmdash.add_command(command)
    return llmdash


def test_each_side_uses_its_own_config_unless_one_is_given(repo, tmp_path, monkeypatch):
    from click.testing import CliRunner
    from llmdash.cli import review as cli_review
    llmdash = _group_with(cli_review.diff_command)
    monkeypatch.chdir(repo)
    (repo / "llmdash.yaml").write_text("vLLM on-call\n")  # untracked: the working tree's config only
    untracked = CliRunner().invoke(llmdash, ["diff", "HEAD", OWN_CODE])
    assert untracked.exit_code == 1
    assert untracked.stdout.startswith("llmdash diff: HEAD (config: defaults) "
                                       "-> working tree (config: ./llmdash.yaml)\n")
    assert "title (old -> new): vLLM: throughput vs latency -> vLLM on-call" in untracked.output

    config = tmp_path / "shared.yaml"
    config.write_text("vLLM on-call\n")
    both = CliRunner().invoke(llmdash, ["--config", str(config), "diff", "HEAD", OWN_CODE])
    assert both.exit_code == 0, both.output
    assert both.stdout.startswith(f"llmdash diff: HEAD (config: --config {config}) "
                                  f"-> working tree (config: --config {config})")

    _git(repo, "add", "llmdash.yaml")
    _git(repo, "commit", "-q", "-m", "commit the config")
    committed = CliRunner().invoke(llmdash, ["diff", "HEAD~1", "HEAD", OWN_CODE])
    assert committed.exit_code == 1
    assert committed.stdout.startswith("llmdash diff: HEAD~1 (config: defaults) -> HEAD (config: llmdash.yaml at HEAD)")
    assert "title (old -> new): vLLM: throughput vs latency -> vLLM on-call" in committed.output


def test_group_config_is_used_by_both_builds(repo, tmp_path, monkeypatch):
    from click.testing import CliRunner
    from llmdash.cli import review as cli_review
    llmdash = _group_with(cli_review.diff_command)
    monkeypatch.chdir(repo)
    config = tmp_path / "llmdash.yaml"
    config.write_text("vLLM on-call\n")
    same = CliRunner().invoke(llmdash, ["--config", str(config), "diff", "HEAD~1", "HEAD", OWN_CODE])
    assert same.exit_code == 1 and "title" not in same.output  # only the query differs
    against_committed = CliRunner().invoke(llmdash, ["--config", str(config), "diff", OWN_CODE])
    assert against_committed.exit_code == 1
    assert ("  dashboard\n    title (old -> new): vLLM: throughput vs latency -> vLLM on-call\n"
            in against_committed.output)


GENERATED = sorted((paths.GENERATED / "dashboards").glob("*.json"))


@pytest.mark.parametrize("path", GENERATED, ids=lambda p: p.stem)
def test_real_dashboards_reordered_report_nothing_and_each_query_change_is_named(path):
    model = json.loads(path.read_text())
    shuffled = json.loads(json.dumps(model))
    random.Random(path.stem).shuffle(shuffled["panels"])
    assert diff_dashboard(model, shuffled) == []

    queried = [p for p in model["panels"] if p.get("targets")]
    assert queried, "a generated dashboard without queries"
    for panel in queried:
        changed = copy.deepcopy(model)
        target = next(p for p in changed["panels"] if p["id"] == panel["id"])["targets"][0]
        target["expr"] = f"({target['expr']}) * 2"
        [change] = diff_dashboard(model, changed)
        assert change.kind == "expr" and change.after == target["expr"]
        assert change.where.endswith(f'panel "{panel["title"]}" / query {target["refId"]}')


def test_generated_dashboards_exist_for_the_test_above():
    assert {p.stem for p in GENERATED} >= {"vllm", "sglang", "lmdeploy"}


def test_outside_a_git_checkout_the_files_on_disk_are_the_committed_side(repo, tmp_path):
    import shutil
    from llmdash.cli.review import compare
    shutil.rmtree(repo / ".git")
    report, old_label, _ = compare(None, None, repo, tmp_path / "work", own_code=True)
    assert old_label == "generated/ on disk" and [c.kind for c in report["vllm"]] == ["expr"]
    shutil.rmtree(repo / "generated")
    with pytest.raises(LlmdashError, match="is not in a git repository and has no generated/"):
        compare(None, None, repo, tmp_path / "again", own_code=True)


LONG_OLD = ("Most requests paused (KV blocks freed, recomputed later) in one engine iteration within the interval. "
            "Any sustained value means users are waiting on recompute.")
LONG_NEW = LONG_OLD.replace("within the interval.", "within the last 5m, the window the alert uses.")


def test_a_long_description_change_is_one_word_diff_not_two_paragraphs():
    change = Change("description", 'row "Preemption" / panel "Paused requests"', LONG_OLD, LONG_NEW)
    text = render_text("vllm", [change])
    assert LONG_OLD not in text and LONG_NEW not in text
    assert "description (word diff: [-old-] {+new+}):" in text
    assert ("… one engine iteration within the [-interval.-] {+last 5m, the window the alert uses.+} "
            "Any sustained value means users …") in text
    markdown = render_markdown("vllm", [change])
    assert "`… one engine iteration within the [-interval.-] {+last 5m, the window the alert uses.+}" in markdown


def test_every_one_line_value_says_which_side_it_is_from():
    changes = [Change("unit", 'row "A" / panel "B"', "s", "ms"),
               Change("variable", 'variable "cluster"', None, "query: label_values(cluster)"),
               Change("variable", 'variable "job"', "query: label_values(job)", None)]
    text = render_text("vllm", changes)
    assert "unit (old -> new): s -> ms" in text
    assert "variable (added): query: label_values(cluster)" in text
    assert "variable (removed): query: label_values(job)" in text
    markdown = render_markdown("vllm", changes)
    assert "unit (old → new): `s` → `ms`" in markdown and "variable (removed): `query: label_values(job)`" in markdown


def test_expression_pairs_say_which_line_is_old():
    text = render_text("vllm", [Change("expr", 'row "A" / panel "B" / query A', "rate(x[5m])", "rate(x[1m])")])
    assert "expr [query A] (- old, + new):\n      - rate(x[5m])\n      + rate(x[1m])\n" in text
