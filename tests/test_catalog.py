"""Engine catalogs: the facts dashboards rely on, and one-line errors for broken catalogs."""

import shutil
from pathlib import Path

import pytest

from llmdash.engines.catalog import CATALOG_DIR, load_all, load_catalog, load_engine
from llmdash.errors import LlmdashError

ENGINES = ["lmdeploy", "nim", "ray-serve-vllm", "sglang", "tensorrt-llm-serve", "tensorrt-llm-triton", "vllm"]


def test_every_engine_has_a_catalog_and_loads():
    assert sorted(load_all()) == ENGINES


def test_prometheus_client_counters_are_named_as_scraped():
    for spec in load_all().values():
        for metric in spec.metrics.values():
            if metric.type == "counter" and spec.exporter == "prometheus_client":
                assert metric.name.endswith("_total"), metric.name
            if metric.type == "histogram":
                assert not metric.name.endswith(("_bucket", "_sum", "_count")), metric.name


def test_vllm_renames_are_fallbacks_newest_first():
    vllm = load_engine("vllm")
    assert vllm.signal("kv_usage").metric_names == ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]
    assert vllm.signal("itl").metric_names == ["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"]
    assert vllm.metrics["vllm:gpu_cache_usage_perc"].removed_in is not None


def test_sglang_throughput_is_realtime_decode_and_retractions_read_one_rank():
    sglang = load_engine("sglang")
    first = sglang.signal("throughput").sources[0]
    assert first.series == "sglang:realtime_tokens_total" and dict(first.match) == {"mode": "decode", "tp_rank": "0"}
    for role in ("preemptions", "retracted_input_tokens", "retracted_output_tokens"):
        assert dict(sglang.signal(role).sources[0].match) == {"tp_rank": "0"}


def test_capabilities_come_from_roles():
    specs = load_all()
    assert not specs["lmdeploy"].has("preemptions") and specs["lmdeploy"].note("preemptions")
    assert specs["vllm"].has("preemptions_per_request")
    assert specs["tensorrt-llm-serve"].signal("preemptions").sources[0].kind == "gauge"
    assert not specs["tensorrt-llm-serve"].has("itl")


@pytest.fixture
def catalog_copy(tmp_path: Path) -> Path:
    target = tmp_path / "vllm.yaml"
    shutil.copy(CATALOG_DIR / "vllm.yaml", target)
    return target


@pytest.mark.parametrize("old, new, key", [
    ("type: counter\n", "type: countr\n", "metrics.vllm:generation_tokens_total.type"),
    ("vllm:num_preemptions_total:\n", "vllm:num_preemptions:\n", "metrics.vllm:num_preemptions"),
    ("sources: [{metric: vllm:num_preemptions_total}]", "sources: [{metric: vllm:num_preemptions}]",
     "signals.preemptions.sources[0].metric"),
    ("buckets: [1, 2, 3, 4, 5, 10, 20]", "buckets: [1, 3, 2]", "metrics.vllm:request_num_preemptions.buckets"),
    ('since: "0.30.0"', 'since: "thirty"', "metrics.vllm:request_num_preemptions.since"),
    ("  ttft_seconds: 1.0\n", "  ttft_seconds: 1.1\n", "slo_defaults.ttft_seconds"),
    ("sources: [{metric: vllm:num_requests_waiting}]", "sources: [{metric: vllm:time_to_first_token_seconds}]",
     "signals.waiting.sources[0]"),
])
def test_inconsistent_catalog_is_one_line_naming_file_and_key(catalog_copy, old, new, key):
    text = catalog_copy.read_text()
    assert old in text
    catalog_copy.write_text(text.replace(old, new, 1))
    with pytest.raises(LlmdashError) as caught:
        load_catalog(catalog_copy)
    message = str(caught.value)
    assert "\n" not in message
    assert str(catalog_copy) in message and key in message


def test_malformed_yaml_names_the_line(catalog_copy):
    catalog_copy.write_text("engine: vllm\nmetrics: [unclosed\n")
    with pytest.raises(LlmdashError, match=r"vllm.yaml: line \d+: malformed YAML"):
        load_catalog(catalog_copy)


def test_unknown_engine_lists_known_ones():
    with pytest.raises(LlmdashError, match="unknown engine 'tgi'.*known: lmdeploy, nim, ray-serve-vllm, sglang"):
        load_engine("tgi")
