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


# Variants (`derive:`): a catalog that is its base's series renamed.

def test_ray_variant_reads_every_vllm_series_under_both_names_newest_first():
    ray, vllm = load_engine("ray-serve-vllm"), load_engine("vllm")
    assert ray.base == "vllm" and (ray.supported_from, ray.supported_to) == (vllm.supported_from, vllm.supported_to)
    assert set(ray.metrics) == {f"{prefix}{name[len('vllm:'):]}" for name in vllm.metrics
                                for prefix in ("ray_vllm_", "ray_vllm:")}
    assert ray.signal("kv_usage").metric_names == ["ray_vllm_kv_cache_usage_perc", "ray_vllm_gpu_cache_usage_perc",
                                                  "ray_vllm:kv_cache_usage_perc", "ray_vllm:gpu_cache_usage_perc"]
    assert ray.exported_name("vllm:num_requests_running") == "ray_vllm_num_requests_running"
    assert ray.exported_name("sglang:num_running_reqs") is None
    histogram = ray.metrics["ray_vllm_time_to_first_token_seconds"]
    assert histogram.buckets == vllm.metrics["vllm:time_to_first_token_seconds"].buckets
    assert {"WorkerId", "ReplicaId", "model_name"} <= set(histogram.labels)


def test_nim_variant_is_unprefixed_generic_and_limited_to_its_vllm_releases():
    nim = load_engine("nim")
    assert dict(nim.selectors) == {"job": "nim"} and all(m.generic for m in nim.metrics.values())
    # 0.9.0-0.10.1: the V1 ITL (0.10.2) and per-request TPOT (0.11) histograms are not there yet
    assert "inter_token_latency_seconds" not in nim.metrics and not nim.has("tpot")
    assert nim.signal("itl").metric_names == ["time_per_output_token_seconds"]
    # dropped: no preemption counter, no V1 KV name; the note says why
    assert not nim.has("preemptions") and "no preemption metric" in nim.note("preemptions")
    assert nim.signal("kv_usage").metric_names == ["gpu_cache_usage_perc"]
    # a rename whose prefix applies to one series only: that series gets both names, newest first
    assert nim.signal("requests").metric_names == ["request_finish_total", "request_success_total"]
    assert nim.exported_name("vllm:request_success_total") == "request_finish_total"
    assert nim.exported_name("vllm:num_preemptions_total") is None
    # NIM's histograms have V0's bounds, declared in the variant: quantiles and the share above the
    # top bucket read le="10.0" / le="2.5", which a NIM serves
    assert nim.metrics["time_to_first_token_seconds"].buckets[-1] == 10.0
    assert nim.metrics["time_per_output_token_seconds"].buckets[-1] == 2.5


VARIANT = """\
engine: variant
title: A variant
releases: "Variant 1.x"
derive:
  from: vllm
  rename: [{prefix: "vllm:", to: "v_"}]
"""


@pytest.fixture
def variant_dir(tmp_path: Path) -> Path:
    shutil.copy(CATALOG_DIR / "vllm.yaml", tmp_path / "vllm.yaml")
    return tmp_path


def write_variant(directory: Path, extra: str = "", text: str = VARIANT) -> Path:
    path = directory / "variant.yaml"
    path.write_text(text + extra)
    return path


def test_variant_versions_filter_the_base_series(variant_dir):
    spec = load_catalog(write_variant(variant_dir, '  versions: {from: "0.9.0", to: "0.9.1"}\n'
                                                  "notes: {tpot: none yet, preemptions_per_request: none yet}\n"))
    assert "v_kv_cache_usage_perc" not in spec.metrics          # since 0.9.2
    assert spec.signal("kv_usage").metric_names == ["v_gpu_cache_usage_perc"]
    assert spec.versions == "Variant 1.x (vllm 0.9.0–0.9.1)"


@pytest.mark.parametrize("extra, key, problem", [
    ("  drop: [vllm:num_preemptions_total]\n", "notes.preemptions", "every source of vllm's preemptions is dropped"),
    ('  versions: {from: "0.9.0", to: "0.10.0"}\n', "notes.tpot", "every source of vllm's tpot is dropped"),
    ('  versions: {from: "0.8.0", to: "0.10.0"}\n', "derive.versions", "not within vllm's 0.9.0–0.33.0"),
    ("  drop: [vllm:no_such_series]\n", "derive.drop", "expected a list of vllm's series names"),
    ("notes: {no_such_role: why}\n", "notes.no_such_role", "vllm has no such signal"),
    ("  buckets: {vllm:num_requests_running: [1, 2]}\n", "derive.buckets", "vllm's histogram names"),
    ("  buckets: {vllm:time_to_first_token_seconds: [2, 1]}\n", "metrics.v_time_to_first_token_seconds.buckets",
     "strictly increasing"),
])
def test_inconsistent_variant_is_one_line_naming_file_and_key(variant_dir, extra, key, problem):
    path = write_variant(variant_dir, extra)
    with pytest.raises(LlmdashError) as caught:
        load_catalog(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: {key}: ") and problem in message


def test_variant_drop_removes_series_and_a_note_explains_the_empty_role(variant_dir):
    spec = load_catalog(write_variant(variant_dir, "  drop: [vllm:num_preemptions_total]\n"
                                                  "notes: {preemptions: this exporter has none}\n"))
    assert "v_num_preemptions_total" not in spec.metrics
    assert not spec.has("preemptions") and spec.note("preemptions") == "this exporter has none"


def test_variant_of_a_missing_catalog_or_of_a_variant_is_an_error(variant_dir):
    missing = write_variant(variant_dir, text=VARIANT.replace("from: vllm", "from: tgi"))
    with pytest.raises(LlmdashError, match=r"variant.yaml: derive.from: no catalog 'tgi.yaml' beside this one"):
        load_catalog(missing)
    write_variant(variant_dir)
    second = variant_dir / "second.yaml"
    second.write_text(VARIANT.replace("engine: variant", "engine: second").replace("from: vllm", "from: variant"))
    with pytest.raises(LlmdashError, match="second.yaml: derive.from: variant is not a plain catalog"):
        load_catalog(second)


def test_a_broken_base_is_reported_in_the_base_file(variant_dir):
    base = variant_dir / "vllm.yaml"
    base.write_text(base.read_text().replace("type: counter\n", "type: countr\n", 1))
    with pytest.raises(LlmdashError, match=r"vllm.yaml: metrics.vllm:generation_tokens_total.type"):
        load_catalog(write_variant(variant_dir))
