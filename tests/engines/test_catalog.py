"""Engine catalogs: the facts dashboards rely on, and one-line errors for broken catalogs."""

from pathlib import Path

import pytest
from packaging.version import Version

from llmdash.engines.catalog import CATALOG_DIR, load_all, load_catalog, load_engine
from llmdash.errors import LlmdashError
from tests.support.catalogs import ENGINES, copy_catalog, refused


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


def test_sglang_ranks_are_deduplicated_not_filtered():
    """Every DP rank is read (a tp_rank filter read DP group 0 only); TP/PP/EP copies are taken once per DP rank."""
    sglang, vllm = load_engine("sglang"), load_engine("vllm")
    first = sglang.signal("throughput").sources[0]
    assert first.series == "sglang:realtime_tokens_total" and dict(first.match) == {"mode": "decode"}
    for role in ("preemptions", "retracted_input_tokens", "retracted_output_tokens", "kv_usage", "waiting", "running"):
        assert "tp_rank" not in dict(sglang.signal(role).sources[0].match)
    assert sglang.ranks.unit == ("dp_rank",) and sglang.ranks.copies == ("tp_rank", "pp_rank", "moe_ep_rank")
    assert dict(sglang.metrics["sglang:token_usage"].labels_since)["dp_rank"] == Version("0.4.10")
    assert vllm.ranks.unit == ("engine",) and vllm.ranks.copies == ()


def test_a_rank_label_no_series_carries_is_refused(tmp_path):
    target = tmp_path / "sglang.yaml"
    target.write_text((CATALOG_DIR / "sglang.yaml").read_text().replace("unit: [dp_rank]", "unit: [dp_ranks]"))
    with pytest.raises(LlmdashError, match=r"ranks\.unit: no series of this catalog has the label 'dp_ranks'"):
        load_catalog(target)


def test_the_kv_cache_unit_is_catalogued_per_deployment_shape():
    """Ray Serve exports every replica of a node under one target (ReplicaId tells them apart); vLLM alone, one
    engine core per `engine` index; Dynamo's frontend is a frontend, vLLM and Ray Serve engines."""
    ray, vllm, dynamo = load_engine("ray-serve-vllm"), load_engine("vllm"), load_engine("dynamo")
    assert ray.ranks.unit == ("ReplicaId", "engine") and vllm.ranks.unit == ("engine",)
    assert (dynamo.role, vllm.role, ray.role) == ("frontend", "engine", "engine")


def test_the_production_stack_router_is_excluded_from_the_vllm_gauges_it_shares_names_with():
    vllm, ray = load_engine("vllm"), load_engine("ray-serve-vllm")
    assert vllm.foreign_labels("vllm:num_requests_running") == ("server",)
    assert vllm.foreign_labels("vllm:num_requests_waiting") == ("server",)
    assert vllm.foreign_labels("vllm:generation_tokens_total") == ()
    assert ray.routers == ()    # the router writes vLLM's own names, never Ray's renamed ones


def test_a_router_label_the_engines_series_carry_or_a_series_not_catalogued_is_refused(tmp_path):
    text = (CATALOG_DIR / "vllm.yaml").read_text()
    target = tmp_path / "vllm.yaml"
    target.write_text(text.replace("    label: server\n", "    label: model_name\n"))
    assert "routers.production-stack-router.label: vllm:num_requests_running carries model_name itself" in \
        refused(target)
    target.write_text(text.replace("series: [vllm:num_requests_running,", "series: [vllm:num_requests_runnin,"))
    assert "routers.production-stack-router.series: 'vllm:num_requests_runnin' is not in this catalog's metrics" \
        in refused(target)


def test_a_match_on_a_label_older_versions_lack_must_also_match_its_absence(tmp_path):
    """SGLang's gauges have tp_rank only from 0.4.10: `tp_rank: "0"` alone would read nothing on 0.4.x."""
    target = tmp_path / "sglang.yaml"
    text = (CATALOG_DIR / "sglang.yaml").read_text()
    old = 'sources: [{metric: sglang:token_usage}]'
    assert old in text
    target.write_text(text.replace(old, 'sources: [{metric: sglang:token_usage, match: {tp_rank: "0"}}]'))
    with pytest.raises(LlmdashError, match=r"signals\.kv_usage\.sources\[0\]\.match\.tp_rank: .*only from 0\.4\.10"):
        load_catalog(target)


def test_labels_and_buckets_follow_the_version():
    sglang, vllm = load_engine("sglang"), load_engine("vllm")
    usage = sglang.metrics["sglang:token_usage"]
    assert usage.labels_at(Version("0.4.3")) == ("model_name",)
    assert usage.labels_at(Version("0.4.9")) == ("model_name", "engine_type")
    assert usage.labels_at(Version("0.4.10")) == ("model_name", "engine_type", "tp_rank", "pp_rank", "dp_rank")
    ttft = sglang.metrics["sglang:time_to_first_token_seconds"]
    assert ttft.buckets_at(Version("0.4.1"))[-1] == 30.0 and ttft.buckets_at(Version("0.4.3"))[-1] == 160.0
    assert (ttft.buckets_at(Version("0.4.4"))[:3] == (0.1, 0.3, 0.5)
            and ttft.buckets_at(Version("0.4.5")) == ttft.buckets)
    tpot = vllm.metrics["vllm:time_per_output_token_seconds"]
    assert tpot.buckets_at(Version("0.7.3"))[-1] == 2.5 and tpot.buckets_at(Version("0.9.0")) == tpot.buckets
    assert vllm.metrics["vllm:request_success_total"].labels_at(Version("0.7.3")) == ("model_name", "finished_reason")


def test_capabilities_come_from_roles():
    specs = load_all()
    assert not specs["lmdeploy"].has("preemptions") and specs["lmdeploy"].note("preemptions")
    assert specs["vllm"].has("preemptions_per_request")
    assert specs["tensorrt-llm-serve"].signal("preemptions").sources[0].kind == "gauge"
    assert not specs["tensorrt-llm-serve"].has("itl")


@pytest.mark.parametrize("old, new, key", [
    ("type: counter\n", "type: countr\n", "metrics.vllm:generation_tokens_total.type"),
    ("vllm:num_preemptions_total:\n", "vllm:num_preemptions:\n", "metrics.vllm:num_preemptions"),
    ("sources: [{metric: vllm:num_preemptions_total}]", "sources: [{metric: vllm:num_preemptions}]",
     "signals.preemptions.sources[0].metric"),
    ("buckets: [1, 2, 3, 4, 5, 10, 20]", "buckets: [1, 3, 2]", "metrics.vllm:request_num_preemptions.buckets"),
    ('since: "0.30.0"', 'since: "thirty"', "metrics.vllm:request_num_preemptions.since"),
    ("  ttft_seconds: 1.0\n", "  ttft_seconds: 1.1\n", "slo_defaults.ttft_seconds"),
    ("  ttft_seconds: 1.0\n", "", "slo_defaults.ttft_seconds"),   # required where a TTFT histogram exists
    ("sources: [{metric: vllm:num_requests_waiting}]", "sources: [{metric: vllm:time_to_first_token_seconds}]",
     "signals.waiting.sources[0]"),
    ('labels_since: {engine: "0.8.0"}', 'labels_since: {engin: "0.8.0"}',
     "metrics.vllm:generation_tokens_total.labels_since.engin"),
    ('labels_since: {engine: "0.8.0"}', 'labels_since: {engine: "0.5.0"}',
     "metrics.vllm:generation_tokens_total.labels_since.engine"),
    ('labels_since: {engine: "0.8.0"}', 'labels_since: {model_name: "0.8.0"}',
     "signals.throughput.sources[0].metric"),
    # an SLO bound must be a bound of every release's buckets, older lists included
    ('"0.8.0": [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5',
     '"0.8.0": [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 2.5',
     "slo_defaults.ttft_seconds: 1s is not a bucket bound of vllm:time_to_first_token_seconds before 0.8.0"),
    ('"0.8.0": [0.001, 0.005', '"0.5.0": [0.001, 0.005', "buckets_before.0.5.0"),
    ("count: cumulative", "count: sum", "logs.v0-preempted.count"),
    ("count: cumulative", "count: line", "logs.v0-preempted.message"),          # a number it would ignore
    ("total_num_cumulative_preemption=(?P<n>", "total_num_cumulative_preemption=((?P<n>", "logs.v0-preempted"),
    ("total_num_cumulative_preemption=51", "total_num_cumulative_preemption=fifty", "logs.v0-preempted.example"),
    ('until: "0.9.0"', 'until: "0.5.0"', "logs.v0-preempted.until"),
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
    with pytest.raises(LlmdashError, match="unknown engine 'mlc-llm'.*"
                                           "known: dynamo, llama-cpp, lmdeploy, nim, ray-serve-vllm, sglang"):
        load_engine("mlc-llm")


def test_tgi_bounds_are_written_as_tgi_writes_them():
    """TGI's `*duration` bounds come from `value *= 1.5` from 0.0001; its exporter prints each with Rust's
    f64 Display, so a quantile or SLO selector must use those exact long texts (server.rs L1938-1946)."""
    tgi = load_engine("tgi")
    les = [tgi.le(b) for b in tgi.metrics["tgi_request_mean_time_per_token_duration"].buckets]
    assert len(les) == 35
    assert les[:3] == ["0.00015000000000000001", "0.00022500000000000002", "0.0003375"]
    assert les[5] == "0.0011390624999999999" and les[16] == "0.09852612533569335"
    assert les[-1] == "145.61096060497135"
    bound = 0.0001
    for le in les:
        bound *= 1.5
        assert le == tgi.le(bound)
    # no round bound: the ITL/TPOT SLO default is the bound nearest 0.1 s
    assert tgi.slo_defaults == {"itl_seconds": 0.09852612533569335}


def test_tgi_has_no_ttft_preemption_or_kv_and_takes_its_model_label_from_the_scrape():
    tgi = load_engine("tgi")
    assert tgi.model_label_from_scrape and tgi.model_label == "model_name"
    assert {label for m in tgi.metrics.values() for label in m.labels} == {"err"}   # a failure's reason, no model
    assert tgi.has("tpot") and not tgi.has("ttft") and not tgi.has("itl")
    assert not tgi.has("preemptions") and "never preempts" in tgi.note("preemptions")
    assert not tgi.has("kv_usage") and tgi.note("kv_usage")
    assert tgi.signal("throughput").sources[0].series == "tgi_request_generated_tokens_sum"


def test_a_ttft_target_without_a_ttft_histogram_is_refused(tmp_path):
    target = tmp_path / "tgi.yaml"
    text = (CATALOG_DIR / "tgi.yaml").read_text()
    target.write_text(text.replace("  itl_seconds: 0.09852612533569335\n",
                                   "  itl_seconds: 0.09852612533569335\n  ttft_seconds: 1.122274146401882\n"))
    with pytest.raises(LlmdashError, match="slo_defaults.ttft_seconds: this engine has no histogram to read it from"):
        load_catalog(target)


# Variants (`derive:`): a catalog that is its base's series renamed.

def test_ray_variant_reads_every_vllm_series_under_both_names_newest_first():
    ray, vllm = load_engine("ray-serve-vllm"), load_engine("vllm")
    assert ray.base == "vllm" and (str(ray.supported_from), ray.supported_to) == ("0.9.0", vllm.supported_to)
    assert set(ray.metrics) == {f"{prefix}{name[len('vllm:'):]}" for name, metric in vllm.metrics.items()
                                if metric.exposed_in(ray.supported_from, ray.supported_to)
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
    # vLLM 0.6.0-0.7.3 (V0): the V1 ITL (0.10.2) and per-request TPOT (0.11) histograms are not there yet
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
    return copy_catalog(tmp_path).parent


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
    ('  versions: {from: "0.5.0", to: "0.10.0"}\n', "derive.versions", "not within vllm's 0.6.0–0.33.0"),
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
