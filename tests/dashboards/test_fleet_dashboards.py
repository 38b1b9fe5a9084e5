"""Dashboards for fleets: per-series fallbacks in every query, grouping labels kept, recorded series
where they exist, the instance drill-down, capped quantiles marked, and the fleet dashboard."""

import re
from dataclasses import replace

import promql_parser as pp
import pytest

from llmdash.build import build_dashboards
from llmdash.config import Config, DashboardSettings
from llmdash.vocabulary import FLEET
from llmdash.dashboards.validate import expressions
from llmdash.engines.catalog import load_all
from llmdash.rules.generate import recorded_series

SPECS = load_all()
RECORDED_NAMES = frozenset().union(*(recorded_series(spec, Config()) for spec in SPECS.values()))


@pytest.fixture(scope="module")
def recorded_build() -> dict[str, dict]:
    """The dashboards built with `dashboard.use_recording_rules`."""
    return build_dashboards(Config(dashboard=DashboardSettings(use_recording_rules=True)))


def series_names(expr: str) -> set[str]:
    names = set()

    def visit(node):
        if isinstance(node, pp.VectorSelector):
            names.add(node.name)
        for attr in ("expr", "lhs", "rhs", "vector_selector"):
            child = getattr(node, attr, None)
            if child is not None:
                visit(child)
        for arg in getattr(node, "args", None) or []:
            visit(arg)

    visit(pp.parse(re.sub(r"\$\{?(\w+)\}?", lambda m: "1m" if "interval" in m.group(1) else ".*", expr)))
    return names


def panel(dashboard: dict, title: str) -> dict:
    """The panel titled so; a chart rather than the on-call tile of the same name."""
    return sorted((p for p in dashboard["panels"] if p["title"] == title), key=lambda p: p["type"] == "stat")[0]


def row_of(dashboard: dict, title: str) -> str:
    current = None
    for p in dashboard["panels"]:
        if p["type"] == "row":
            current = p["title"]
        elif p["title"] == title:
            return current
    raise KeyError(title)


def test_renamed_series_fall_back_per_replica_before_aggregating(default_build):
    itl = panel(default_build["vllm"], "ITL p99")["targets"][0]["expr"]
    # the new name's classic buckets summed per model; the old name's only over the replicas that have neither the
    # new name's classic buckets (their +Inf bucket) nor its native histogram
    replica = "on (cluster, namespace, model_name, instance)"
    assert itl.startswith("histogram_quantile(0.99, sum by (le, cluster, namespace, model_name) (sum by "
                          "(le, cluster, namespace, model_name) (rate(vllm:inter_token_latency_seconds_bucket")
    assert ("or label_replace(sum by (le, cluster, namespace, model_name) "
            "((rate(vllm:time_per_output_token_seconds_bucket") in itl
    assert f'unless {replica} (rate(vllm:inter_token_latency_seconds_bucket{{le="+Inf", ' in itl
    kv = panel(default_build["vllm"], "KV-cache usage")["targets"][0]["expr"]
    assert kv.startswith("max by (cluster, namespace, model_name) (max by (cluster, namespace, model_name) "
                         "(vllm:kv_cache_usage_perc")
    assert "((vllm:gpu_cache_usage_perc{" in kv and f"unless {replica} (vllm:kv_cache_usage_perc{{" in kv


def test_sglang_throughput_sources_with_different_labels_are_reduced_before_the_fallback(default_build):
    expr = panel(default_build["sglang"], "Output tokens/s")["targets"][0]["expr"]
    # the older counter only where the replica has no newer one: the two cannot double count whatever their labels
    assert expr.count("sum by (cluster, namespace, model_name) (") == 3
    assert ("((rate(sglang:generation_tokens_total{cluster=~\"$cluster\", namespace=~\"$namespace\", "
            "model_name=~\"$model_name\", instance=~\"$instance\"}[5m])) unless on (cluster, namespace, model_name, "
            "instance) (max without (tp_rank, pp_rank, moe_ep_rank) (rate(sglang:realtime_tokens_total{") in expr


def test_unprefixed_trtllm_names_are_read_only_under_a_job_selector(default_build):
    default = " ".join(e for _, e in expressions(default_build["tensorrt-llm-serve"]))
    assert "trtllm_time_to_first_token_seconds_bucket" in default
    assert not re.search(r"(?<![\w:])time_to_first_token_seconds_bucket", default)
    scoped = build_dashboards(Config(engines=("tensorrt-llm-serve",), selectors={"job": "trtllm"}))
    text = " ".join(e for _, e in expressions(scoped["tensorrt-llm-serve"]))
    assert re.search(r'(?<![\w:])time_to_first_token_seconds_bucket\{job="trtllm"', text)


@pytest.mark.parametrize("engine", sorted(SPECS))
def test_recorded_dashboards_read_recorded_series_except_the_instance_drill_down(engine, recorded_build):
    raw_reads = {}
    for where, expr in expressions(recorded_build[engine]):
        title = re.search(r"panel '([^']+)'", where)
        if title and row_of(recorded_build[engine], title.group(1)) == "Instances":
            continue
        if "Preemptions per finished request" in where:
            continue  # a per-request mean with no recorded equivalent
        raw_reads[where] = series_names(expr) - RECORDED_NAMES - {"ALERTS"}
    assert {w: r for w, r in raw_reads.items() if r} == {}


@pytest.mark.parametrize("engine", sorted(SPECS))
def test_instance_drill_down_reads_raw_series_of_the_selected_instances_as_instant_tables(
        engine, default_build, recorded_build):
    for dashboards in (default_build, recorded_build):
        tables = [p for p in dashboards[engine]["panels"] if p["type"] == "table"]
        assert tables and all(row_of(dashboards[engine], t["title"]) == "Instances" for t in tables)
        for table in tables:
            [target] = table["targets"]
            assert target["instant"] is True and target["range"] is False
            assert target["expr"].startswith("topk(10, ") and 'instance=~"$instance"' in target["expr"]
            assert series_names(target["expr"]) & RECORDED_NAMES == set()


def test_capped_quantiles_read_as_at_least_the_top_bound(default_build):
    ttft = panel(default_build["tensorrt-llm-triton"], "TTFT p99")
    [mapping] = ttft["fieldConfig"]["defaults"]["mappings"]
    assert mapping == {"type": "range", "options": {"from": 5.0, "to": None, "result": {"text": "≥ 5 s"}}}


def test_fleet_dashboard_reads_only_recorded_series_across_engines(default_build):
    fleet = default_build[FLEET]
    assert fleet["uid"] == "llmdash-fleet"
    for where, expr in expressions(fleet):
        assert series_names(expr) <= RECORDED_NAMES | {"ALERTS"}, where
        assert 'llm_engine=~"$engine"' in expr, where
    assert [v["name"] for v in fleet["templating"]["list"]] == ["datasource", "engine", "cluster", "namespace",
                                                               "model_name"]


def test_fleet_rows_link_down_to_the_engine_dashboard_with_model_instance_and_time(default_build):
    fleet = default_build[FLEET]
    models = panel(fleet, "Models, worst first")
    assert [t["expr"].split("{")[0] for t in models["targets"]][:2] == [
        "cluster_namespace_model_name:llm_output_tokens:rate5m",
        "cluster_namespace_model_name:llm_token_latency_seconds:p99_rate5m"]
    assert models["options"]["sortBy"] == [{"displayName": "Preemptions per 100 requests", "desc": True}]
    [link] = [o for o in models["fieldConfig"]["overrides"] if o["matcher"]["options"] == "model_name"]
    url = link["properties"][0]["value"][0]["url"]
    assert url == ("/d/llmdash-${__data.fields.llm_engine}?var-model_name=${__data.fields.model_name}"
                   "&${__url_time_range}")
    instances = panel(fleet, "Top instances by preemption share")
    [link] = [o for o in instances["fieldConfig"]["overrides"] if o["matcher"]["options"] == "instance"]
    assert link["properties"][0]["value"][0]["url"].endswith("&var-instance=${__data.fields.instance}")
    engine_uids = {d["uid"] for name, d in default_build.items() if name != FLEET}
    assert engine_uids == {f"llmdash-{e}" for e in SPECS}


def test_grouping_labels_follow_the_config():
    config = replace(Config(), fleet=replace(Config().fleet, group_by=("region",)))
    built = build_dashboards(replace(config, engines=("vllm",)))
    expr = panel(built["vllm"], "Output tokens/s")["targets"][0]["expr"]
    assert expr.startswith("sum by (region, model_name) (") and "cluster" not in expr
    assert "region_model_name:llm_output_tokens:rate5m" in " ".join(e for _, e in expressions(built[FLEET]))


@pytest.mark.parametrize("instance_label, title", [("instance", "{{model_name}} {{instance}}"),
                                                   ("pod", "{{model_name}} {{pod}}")])
def test_the_preemption_pages_annotation_titles_each_page_with_the_configured_instance_label(instance_label, title):
    """Issue 28: the title read {{instance}} whatever fleet.instance_label was, so with `pod` it rendered empty."""
    config = replace(Config(), engines=("vllm",), fleet=replace(Config().fleet, instance_label=instance_label))
    annotations = build_dashboards(config, [FLEET])[FLEET]["annotations"]["list"]
    (pages,) = [a for a in annotations if a.get("name") == "Preemption pages"]
    assert pages["titleFormat"] == title
