"""The generated dashboards: what an on-call SRE relies on, checked on every engine."""

import json
import re

import pytest

from llmdash.build import build_dashboards
from llmdash.config import Config, Slo
from llmdash.dashboards.validate import BUILT_IN_SERIES, check_expr, expressions, validate_dashboard
from llmdash.engines.catalog import load_all
from llmdash.errors import LlmdashError

SPECS = load_all()


def rows(dashboard):
    """Row title -> panels in that row."""
    grouped, current = {}, None
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            current = panel["title"]
            grouped[current] = []
        else:
            grouped[current].append(panel)
    return grouped


@pytest.mark.parametrize("names", [("vllm",), ("fleet",), ("sglang", "dynamo")])
def test_a_build_of_some_dashboards_makes_them_as_the_whole_build_does(default_build, names):
    """`llmdash publish vllm` builds only what it publishes: each dashboard exactly as the whole build makes it."""
    some = build_dashboards(Config(), names)
    assert list(some) == [n for n in default_build if n in names]
    assert all(json.dumps(some[n], sort_keys=True) == json.dumps(default_build[n], sort_keys=True) for n in names)


def test_the_build_refuses_a_dashboard_its_validator_rejects(monkeypatch, default_build):
    """`build_dashboards` validates every dashboard it builds (so a built one is valid by construction, and
    is not re-checked here): one reading a raw counter outside rate() is refused, naming the engine and why."""
    import llmdash.build as build

    def broken(spec, config):
        model = json.loads(json.dumps(default_build[spec.id]))
        model["panels"][1]["targets"][0]["expr"] = "vllm:generation_tokens_total"
        return model

    monkeypatch.setattr(build, "build_dashboard", broken)
    with pytest.raises(LlmdashError, match=r"^the dashboard for vllm is invalid: .*counter "
                                           r"'vllm:generation_tokens_total' is used outside rate\(\)/increase\(\)"):
        build_dashboards(Config(engines=("vllm",)))


@pytest.mark.parametrize("engine", sorted(SPECS))
def test_throughput_sits_beside_latency_p99_same_row_same_height(engine, default_build):
    row = rows(default_build[engine])["Throughput vs latency"]
    titles = [p["title"] for p in row]
    assert titles[0] == "Output tokens/s"
    spec = SPECS[engine]
    assert ("TTFT p99" in titles) == spec.has("ttft")
    token_latency = "ITL p99" if spec.has("itl") else "TPOT p99" if spec.has("tpot") else None
    if token_latency:
        assert titles[1] == token_latency
    assert len({p["gridPos"]["y"] for p in row}) == 1 and len({p["gridPos"]["h"] for p in row}) == 1
    assert default_build[engine]["graphTooltip"] == 1  # shared crosshair


@pytest.mark.parametrize("engine", sorted(SPECS))
def test_preemption_row_has_direct_or_indirect_signal(engine, default_build):
    titles = [p["title"] for p in rows(default_build[engine])["Preemption"]]
    assert "Latency vs throughput divergence" in titles
    if SPECS[engine].has("preemptions"):
        assert {"Preemptions/s", "Paused requests"} & set(titles)


def test_engine_specific_preemption_panels(default_build):
    assert "Preemptions per finished request" in [p["title"] for p in rows(default_build["vllm"])["Preemption"]]
    retracted = [p for p in rows(default_build["sglang"])["Preemption"] if p["title"].startswith("Retracted")]
    assert [t["legendFormat"] for t in retracted[0]["targets"]][:2] == [
        "{{model_name}} {{cluster}} {{namespace}} prompt",
        "{{model_name}} {{cluster}} {{namespace}} generated"]
    paused = [p for p in rows(default_build["tensorrt-llm-serve"])["Preemption"] if p["title"] == "Paused requests"]
    assert "MAX_UTILIZATION" in paused[0]["description"]
    tile = [p for p in rows(default_build["lmdeploy"])["On-call"] if p["title"] == "Preemptions"][0]
    assert tile["type"] == "text" and "Latency vs throughput divergence" in tile["options"]["content"]


@pytest.mark.parametrize("engine", sorted(SPECS))
def test_annotations_mark_preemption_and_divergence(engine, default_build):
    names = [a["name"] for a in default_build[engine]["annotations"]["list"]]
    assert any("Divergence" in n for n in names)
    assert any("Preemption" in n for n in names) == SPECS[engine].has("preemptions")
    for entry in default_build[engine]["annotations"]["list"][1:]:
        assert entry["target"]["refId"] == "Anno"
        assert entry["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        if "Preemption" in entry["name"] or "Divergence" in entry["name"]:
            assert entry["target"]["expr"].endswith("* 0 + 1")  # 1 while true: same regions on every Grafana
    alerts = [a for a in default_build[engine]["annotations"]["list"] if a["name"].startswith("Alerts firing")]
    assert 'alertname=~"LLMServing.*"' in alerts[0]["target"]["expr"]
    assert f'llm_engine="{engine}"' in alerts[0]["target"]["expr"]


@pytest.mark.parametrize("engine", sorted(SPECS))
def test_every_panel_has_unit_and_description_naming_its_metrics(engine, default_build):
    for panel in default_build[engine]["panels"]:
        if panel["type"] == "row":
            continue
        assert len(panel["description"]) > 60, panel["title"]
        if panel["type"] != "text":
            assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
            for target in panel["targets"]:
                for series in re.findall(r"([a-z_:]+)\{", target["expr"]):
                    assert re.sub(r"_(bucket|sum|count)$", "", series) in panel["description"], series


def test_no_angular_panels_and_a_current_schema(default_build):
    for dashboard in default_build.values():
        assert dashboard["schemaVersion"] >= 39
        assert not {p["type"] for p in dashboard["panels"]} & {"graph", "singlestat"}


def test_itl_vs_tpot_row_explains_the_difference(default_build):
    panels = rows(default_build["sglang"])["ITL vs TPOT"]
    assert [p["title"] for p in panels] == ["ITL p99", "TPOT p99"]
    assert "divided by the number of new tokens" in panels[0]["description"]
    assert "averages the gap" in panels[1]["description"]


def test_validator_rejects_the_mistakes_existing_dashboards_ship(default_build):
    vllm = SPECS["vllm"]
    assert check_expr("sum(rate(vllm:num_preemptions[5m]))", vllm)                      # missing _total
    assert check_expr("histogram_quantile(0.99, rate(vllm:time_to_first_token_seconds_bucket[5m]))", vllm)
    assert check_expr("vllm:generation_tokens_total", vllm)                             # raw counter
    assert check_expr("sum(rate(vllm:gpu_prefix_cache_hits_total[5m]))", vllm)          # removed name
    assert check_expr("avg(rate(x_sum[5m])", vllm)                                      # does not parse
    bad = json.loads(json.dumps(default_build["vllm"]))
    bad["panels"][2]["gridPos"]["x"] = 22
    bad["panels"][3]["datasource"] = {"type": "prometheus", "uid": "ddyfngn31dg5cf"}
    problems = validate_dashboard(bad, vllm)
    assert any("outside the 24-column grid" in p for p in problems)
    assert any("datasource is not" in p for p in problems)


def test_every_panel_rates_over_one_window_and_a_panel_that_does_not_is_refused(default_build):
    """One window for every panel (the recorded one), so two panels never disagree because of their windows."""
    windows = {w for _, expr in expressions(default_build["vllm"]) for w in re.findall(r"\[([^\]:]+)\]", expr)}
    assert "5m" in windows and "$__rate_interval" not in json.dumps(default_build["vllm"])
    bad = json.loads(json.dumps(default_build["vllm"]))
    tile = next(p for p in bad["panels"] if p.get("title") == "Output tok/s")
    tile["targets"][0]["expr"] = tile["targets"][0]["expr"].replace("[5m]", "[$__rate_interval]")
    problems = validate_dashboard(bad, SPECS["vllm"])
    assert problems == ["target-one-window-rule: panel 'Output tok/s' rates over [$__rate_interval], "
                        "the other panels over [5m]"]


def test_all_expressions_obey_the_promql_rules(default_build):
    for engine, spec in SPECS.items():
        for where, expr in expressions(default_build[engine]):
            assert check_expr(expr, spec, BUILT_IN_SERIES.__contains__) == [], where
            for match in re.finditer(r"histogram_quantile\(", expr):
                assert "sum by (le" in expr[match.end():match.end() + 40]


def test_default_selection_is_by_metric_name_and_variables_default_to_all(default_build):
    variables = default_build["vllm"]["templating"]["list"]
    assert [v["name"] for v in variables] == ["datasource", "cluster", "namespace", "model_name", "instance"]
    for variable in variables[1:]:
        assert variable["includeAll"] and variable["multi"] and variable["current"]["value"] == ["$__all"]
    for _, expr in expressions(default_build["vllm"]):
        assert 'job="' not in expr and 'namespace="' not in expr


def test_config_selectors_are_escaped_and_label_variables_added():
    config = Config(selectors={"job": 'vllm "prod"'}, label_variables=("namespace",))
    dashboard = build_dashboards(Config(engines=("vllm",), selectors=config.selectors,
                                        label_variables=config.label_variables))["vllm"]
    assert "namespace" in [v["name"] for v in dashboard["templating"]["list"]]
    for where, expr in expressions(dashboard):
        if "Alerts firing" in where:
            continue  # ALERTS carry the alert's labels (model, engine), not the scrape labels
        assert 'job="vllm \\"prod\\""' in expr and 'namespace=~"$namespace"' in expr


def test_slo_panels_read_the_target_bucket(default_build):
    slo = [p for p in rows(default_build["vllm"])["SLO"] if p["title"].startswith("TTFT")][0]
    assert 'le="1.0"' in slo["targets"][0]["expr"] and "_count" in slo["targets"][0]["expr"]
    triton = [p for p in rows(default_build["tensorrt-llm-triton"])["SLO"]][0]
    # prometheus-cpp writes bounds without .0; Prometheus 3 stores them with it: the panel matches both
    assert 'le=~"500|500\\\\.0"' in triton["targets"][0]["expr"]


def test_slo_target_off_the_buckets_is_refused():
    with pytest.raises(LlmdashError, match=r"slo.ttft_seconds: 0.3s is not a bucket bound"):
        build_dashboards(Config(engines=("vllm",), slo=Slo(ttft_seconds=0.3)))
