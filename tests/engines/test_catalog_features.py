"""Catalog features new engines rely on: how each metrics library writes `le`, label alternatives,
and default selectors for engines whose names alone are ambiguous."""

from pathlib import Path

import pytest

from llmdash.config import Config
from llmdash.engines.catalog import CATALOG_DIR, load_catalog
from llmdash.engines.model import EXPORTERS
from llmdash.errors import LlmdashError
from llmdash.panels.signals import Signals, fixed_selectors
from llmdash.rules.generate import build_rules
from tests.support.catalogs import copy_catalog


@pytest.mark.parametrize("bound, text", [
    (2.0, "2"), (510.0, "510"), (0.0022, "0.0022"), (0.3, "0.3"),
    # TGI's bounds are 0.0001 * 1.5^k by repeated multiplication: Rust prints the float's shortest form
    (0.0001 * 1.5, "0.00015000000000000001"), (0.00001, "0.00001"),
])
def test_rust_exporters_write_le_as_rust_displays_a_float(bound, text):
    assert EXPORTERS["rust_prometheus"].le(bound) == text
    assert EXPORTERS["metrics_rs"].le(bound) == text


def test_python_and_cpp_exporters_keep_their_le_forms():
    assert EXPORTERS["prometheus_client"].le(1) == "1.0"
    assert EXPORTERS["prometheus_cpp"].le(500) == "500"


@pytest.fixture
def sglang_copy(tmp_path: Path) -> Path:
    return copy_catalog(tmp_path, "sglang")


def test_label_alternatives_match_the_value_or_an_absent_label(sglang_copy):
    text = sglang_copy.read_text().replace(
        "sources: [{metric: sglang:token_usage}]",
        "sources: [{metric: sglang:token_usage, match: {tp_rank: [\"0\", \"\"]}}]")
    sglang_copy.write_text(text)
    spec = load_catalog(sglang_copy)
    assert 'sglang:token_usage{tp_rank=~"0|"}' in Signals(spec, Config(), (), "5m").kv_usage()
    assert spec.signal("kv_usage").sources[0].match_text == 'tp_rank=~"0|"'


def test_catalog_selectors_apply_unless_the_config_sets_the_label(tmp_path):
    target = tmp_path / "vllm.yaml"
    target.write_text(CATALOG_DIR.joinpath("vllm.yaml").read_text().replace(
        "model_label: model_name\n", "model_label: model_name\nselectors: {job: vllm-prod}\n", 1))
    spec = load_catalog(target)
    assert [m.render() for m in fixed_selectors(spec, Config())] == ['job="vllm-prod"']
    assert [m.render() for m in fixed_selectors(spec, Config(selectors={"job": "mine", "cluster": "eu"}))] == [
        'cluster="eu"', 'job="mine"']
    rules = build_rules(spec, Config())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    assert all('job="vllm-prod"' in e for e in exprs if "vllm:" in e)


# ---- a mean latency (`per:`) and an optional requests counter (llama.cpp) ----------------------------

@pytest.fixture
def llama_copy(tmp_path: Path) -> Path:
    return copy_catalog(tmp_path, "llama-cpp")


MEAN_SOURCE = "sources: [{metric: llamacpp:tokens_predicted_seconds_total, per: llamacpp:tokens_predicted_total}]"


def test_mean_latency_is_seconds_over_the_per_counter_per_model(llama_copy):
    sig = Signals(load_catalog(llama_copy), Config(), (), "5m")
    assert sig.latency_role == sig.token_latency_role == "token_latency_mean"
    assert sig.latency("token_latency_mean") == (
        "(sum by (cluster, namespace, model_name) (rate(llamacpp:tokens_predicted_seconds_total[5m]))) / "
        "(sum by (cluster, namespace, model_name) (rate(llamacpp:tokens_predicted_total[5m])) > 0)")


@pytest.mark.parametrize("source, problem", [
    ("sources: [{metric: llamacpp:tokens_predicted_seconds_total}]", "per: missing"),
    ("sources: [{metric: llamacpp:tokens_predicted_seconds_total, per: llamacpp:requests_deferred}]",
     "per: 'llamacpp:requests_deferred' is not a counter"),
    ("sources: [{metric: llamacpp:tokens_predicted_seconds_total, per: nope_total}]",
     "per: 'nope_total' is not a counter"),
    ("sources: [{metric: llamacpp:tokens_predicted_total, per: llamacpp:prompt_tokens_total}]", "is not in seconds"),
])
def test_a_mean_needs_a_seconds_counter_and_a_counter_to_divide_by(llama_copy, source, problem):
    llama_copy.write_text(llama_copy.read_text().replace(MEAN_SOURCE, source))
    with pytest.raises(LlmdashError, match=problem):
        load_catalog(llama_copy)


def test_per_is_refused_outside_the_mean_role(llama_copy):
    llama_copy.write_text(llama_copy.read_text().replace(
        "sources: [{metric: llamacpp:tokens_predicted_total}]",
        "sources: [{metric: llamacpp:tokens_predicted_total, per: llamacpp:prompt_tokens_total}]"))
    with pytest.raises(LlmdashError, match="throughput.sources.0..per: only a token_latency_mean source"):
        load_catalog(llama_copy)


def test_requests_must_be_declared_and_a_preemption_counter_needs_it(tmp_path):
    vllm = tmp_path / "vllm.yaml"
    text = (CATALOG_DIR / "vllm.yaml").read_text()
    start = text.index("  requests:")
    lines = text[start:].splitlines()
    # the requests block is the `requests:` line and its indented lines
    body = [lines[0]]
    for line in lines[1:]:
        if not line.startswith("    "):
            break
        body.append(line)
    original = "\n".join(body)
    vllm.write_text(text.replace(original, "  requests: {sources: [], note: \"counts none\"}"))
    with pytest.raises(LlmdashError, match="signals.requests: a preemption counter is read per finished request"):
        load_catalog(vllm)
    vllm.write_text(text.replace(original + "\n", ""))
    with pytest.raises(LlmdashError, match="signals.requests: missing"):
        load_catalog(vllm)


def test_without_requests_or_histograms_the_dashboard_says_so_and_rules_skip_them(llama_copy):
    from llmdash.dashboards.assemble import build_dashboard
    spec = load_catalog(llama_copy)
    dashboard = build_dashboard(spec, Config())
    panels = {p["title"]: p for p in dashboard["panels"]}
    assert panels["Requests/s"]["type"] == "text" and "No request counter" in panels["Requests/s"]["options"]["content"]
    assert "Mean time per token" in panels and not any("p99" in title for title in panels)
    assert not any("under" in title for title in panels)          # no SLO panel without a histogram
    rules = [rule for group in build_rules(spec, Config())["groups"] for rule in group["rules"]]
    records = [r["record"] for r in rules if "record" in r]
    assert not any("llm_requests" in r for r in records)
    assert "cluster_namespace_model_name:llm_token_latency_seconds:mean_rate5m" in records
    assert not any(r.get("alert") in ("LLMServingITLP99High", "LLMServingTTFTP99High") for r in rules)
