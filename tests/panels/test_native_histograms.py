"""Native histograms read beside classic ones: the expressions, pinned, and where they are not emitted.

The expected texts follow Prometheus's documented semantics (its PromQL functions page, 3.16): a native
histogram is read by its base name; `histogram_count` is the classic `_count`; `histogram_fraction(-Inf, b, h)`
times `histogram_count(h)` is the classic bucket `le="b"` (at a bucket boundary it sums whole buckets, which a
histogram with custom buckets always has); `or on (labels)` keeps the left side's series and the right side's only
for label values the left lacks. Their answers on a real Prometheus 3 are checked in
tests/e2e/test_native_histograms_e2e.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from llmdash.build import build_dashboards, build_rule_files
from llmdash.config import Config, Histograms, Rules, load_config
from llmdash.dashboards.validate import check_expr
from llmdash.engines.catalog import load_engine
from llmdash.errors import LlmdashError
from llmdash.panels import promql
from llmdash.panels.signals import Signals, fixed_selectors

REPLICA = "cluster, namespace, model_name, instance"


def signals(engine: str = "vllm", config: Config = Config()) -> Signals:
    spec = load_engine(engine)
    return Signals(spec, config, fixed_selectors(spec, config), "5m")


def test_a_native_bucket_is_the_fraction_up_to_its_bound_times_the_count_and_0_while_idle():
    assert promql.native_at_or_under("h", 0.5) == \
        "((histogram_fraction(-Inf, 0.5, h) * histogram_count(h) >= 0) or histogram_count(h))"


def test_native_buckets_carry_the_le_text_prometheus_3_stores_and_the_inf_bucket():
    assert promql.native_buckets("h", (0.5, 5)) == (
        '(label_replace(histogram_fraction(-Inf, 0.5, h), "le", "0.5", "", "") '
        'or label_replace(histogram_fraction(-Inf, 5.0, h), "le", "5.0", "", "") '
        'or label_replace(histogram_fraction(-Inf, +Inf, h), "le", "+Inf", "", "")) '
        '* ignoring (le) group_left () histogram_count(h) >= 0')


def test_the_slo_good_events_read_the_bucket_per_replica_else_the_native_histogram():
    good = signals().observation_rate("ttft", "5m", 0.5)
    classic = f"sum by ({REPLICA}) (rate(vllm:time_to_first_token_seconds_bucket{{le=\"0.5\"}}[5m]))"
    h = "rate(vllm:time_to_first_token_seconds[5m])"
    native = f"sum by ({REPLICA}) (((histogram_fraction(-Inf, 0.5, {h}) * histogram_count({h}) >= 0) " \
             f"or histogram_count({h})))"
    assert good == f"sum by (cluster, namespace, model_name) (({classic}) or on ({REPLICA}) ({native}))"


def test_the_count_reads_count_per_replica_else_histogram_count():
    events = signals().observation_rate("ttft", "5m")
    assert events == (f"sum by (cluster, namespace, model_name) ((sum by ({REPLICA}) "
                      f"(rate(vllm:time_to_first_token_seconds_count[5m]))) or on ({REPLICA}) "
                      f"(sum by ({REPLICA}) (histogram_count(rate(vllm:time_to_first_token_seconds[5m])))))")


def test_a_quantile_sums_classic_and_converted_native_buckets_per_le_under_one_histogram_quantile():
    expr = signals().quantile("ttft")
    assert expr.startswith("histogram_quantile(0.99, sum by (le, cluster, namespace, model_name) ((")
    assert f") or on ({REPLICA}) (sum by (le, {REPLICA}) ((label_replace(histogram_fraction(-Inf, 0.001, " in expr
    assert check_expr(expr, load_engine("vllm")) == []


def test_a_histogram_part_counter_falls_back_to_histogram_sum():
    tokens = signals("tgi").throughput()
    assert "histogram_sum(rate(tgi_request_generated_tokens[" in tokens
    assert "rate(tgi_request_generated_tokens_sum[" in tokens


def test_presence_counts_a_replica_on_native_histograms():
    present = signals().present("ttft")
    assert present == (f"group by ({REPLICA}) ((group by ({REPLICA}) (vllm:time_to_first_token_seconds_count)) "
                       f"or on ({REPLICA}) (group by ({REPLICA}) (vllm:time_to_first_token_seconds)))")


def classic_only(config: Config) -> list[str]:
    exprs = [rule["expr"] for model in build_rule_files(config).values()
             for group in model["groups"] for rule in group["rules"]]
    return [e for e in exprs if "histogram_count" in e or "histogram_fraction" in e or "histogram_sum" in e]


def test_vmalert_rules_and_histograms_native_false_read_classic_series_only():
    """MetricsQL has no histogram_count or histogram_sum: vmalert 1.151 refuses the file (`unsupported
    function "histogram_count"`), VictoriaMetrics the query."""
    assert Config().native_histograms
    vmalert = Config(engines=("vllm", "tgi"), rules=Rules(target="vmalert"))
    assert not vmalert.native_histograms and classic_only(vmalert) == []
    off = Config(engines=("vllm", "tgi"), histograms=Histograms(native=False))
    assert classic_only(off) == []
    dashboards = build_dashboards(off)
    assert "histogram_count" not in str(dashboards) and "histogram_count" in str(build_dashboards(
        dataclasses.replace(off, histograms=Histograms())))


def test_histograms_native_true_with_the_vmalert_target_is_refused(tmp_path):
    path = tmp_path / "llmdash.yaml"
    path.write_text("rules:\n  target: vmalert\nhistograms:\n  native: true\n")
    with pytest.raises(LlmdashError, match=r"histograms\.native: rules\.target vmalert has no histogram_count"):
        load_config(path)
    path.write_text("histograms:\n  native: yes please\n")
    with pytest.raises(LlmdashError, match=r"histograms\.native: expected true or false"):
        load_config(path)
