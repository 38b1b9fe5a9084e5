"""Native histograms read beside classic ones: the expressions, pinned, and where they are not emitted.

The expected texts follow Prometheus's documented semantics (its PromQL functions page, 3.16): a native
histogram is read by its base name; `histogram_count` is the classic `_count`; `histogram_fraction(-Inf, b, h)`
times `histogram_count(h)` is the classic bucket `le="b"` (at a bucket boundary it sums whole buckets, which a
histogram with custom buckets always has); `a unless on (labels) b` keeps a's series whose label values b lacks;
`label_replace(v, "x", "1", "", "")` adds the label x="1" to every series of v, so `or` keeps both sides. Their
answers on a real Prometheus 3 are checked in tests/e2e/test_native_histograms_e2e.py.
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


MODEL = "cluster, namespace, model_name"


def test_the_slo_good_events_read_the_bucket_per_replica_else_the_native_histogram():
    """Each form summed per model on its own: the classic bucket, and the native share of the replicas that have
    no classic bucket (`unless on (replica)`), told apart by a label until the last sum adds them."""
    good = signals().observation_rate("ttft", "5m", 0.5)
    classic = 'rate(vllm:time_to_first_token_seconds_bucket{le="0.5"}[5m])'
    h = "rate(vllm:time_to_first_token_seconds[5m])"
    native = f"((histogram_fraction(-Inf, 0.5, {h}) * histogram_count({h}) >= 0) or histogram_count({h}))"
    assert good == (f"sum by ({MODEL}) (sum by ({MODEL}) ({classic}) or label_replace(sum by ({MODEL}) "
                    f'(({native}) unless on ({REPLICA}) ({classic})), "llmdash_read", "1", "", ""))')


def test_the_count_reads_count_per_replica_else_histogram_count():
    events = signals().observation_rate("ttft", "5m")
    count = "rate(vllm:time_to_first_token_seconds_count[5m])"
    assert events == (f"sum by ({MODEL}) (sum by ({MODEL}) ({count}) or label_replace(sum by ({MODEL}) "
                      f"((histogram_count(rate(vllm:time_to_first_token_seconds[5m]))) unless on ({REPLICA}) "
                      f'({count})), "llmdash_read", "1", "", ""))')


def test_a_quantile_sums_classic_and_converted_native_buckets_per_le_under_one_histogram_quantile():
    """The replicas a quantile's classic buckets cover are told by their +Inf bucket (one series each, every
    classic histogram has it), those its native buckets cover by a count above 0 (idle, they give no bucket)."""
    expr = signals().quantile("ttft")
    assert expr.startswith(f"histogram_quantile(0.99, sum by (le, {MODEL}) (sum by (le, {MODEL}) (rate(")
    assert f'or label_replace(sum by (le, {MODEL}) (((label_replace(histogram_fraction(-Inf, 0.001, ' in expr
    assert expr.endswith(f'unless on ({REPLICA}) (rate(vllm:time_to_first_token_seconds_bucket{{le="+Inf"}}[5m]))),'
                         ' "llmdash_read", "1", "", ""))) >= 0')
    assert check_expr(expr, load_engine("vllm")) == []


def test_a_renamed_histogram_reads_each_replica_from_the_first_name_and_form_it_has():
    """vLLM's ITL (new name) else TPOT (the old name): four reads, each over the replicas no earlier read
    covers."""
    expr = signals().quantile("itl")
    itl, tpot = "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"
    marks = [f'rate({itl}_bucket{{le="+Inf"}}[5m])', f"histogram_count(rate({itl}[5m])) > 0",
             f'rate({tpot}_bucket{{le="+Inf"}}[5m])']
    assert expr.count("unless on") == 3
    assert f"unless on ({REPLICA}) ({marks[0]})), \"llmdash_read\", \"1\"" in expr
    assert f"unless on ({REPLICA}) ({marks[0]} or {marks[1]})), \"llmdash_read\", \"2\"" in expr
    assert f"unless on ({REPLICA}) ({' or '.join(marks)})), \"llmdash_read\", \"3\"" in expr
    assert check_expr(expr, load_engine("vllm")) == []


def test_a_histogram_part_counter_falls_back_to_histogram_sum():
    tokens = signals("tgi").throughput()
    assert "histogram_sum(rate(tgi_request_generated_tokens[" in tokens
    assert "rate(tgi_request_generated_tokens_sum[" in tokens


def test_presence_counts_a_replica_on_native_histograms():
    present = signals().present("ttft")
    count = "vllm:time_to_first_token_seconds_count"
    assert present == (f"group by ({REPLICA}) (group by ({REPLICA}) ({count}) or label_replace(group by ({REPLICA}) "
                       f"((vllm:time_to_first_token_seconds) unless on ({REPLICA}) ({count})), "
                       '"llmdash_read", "1", "", ""))')
    assert check_expr(present, load_engine("vllm")) == []   # a presence read of a histogram, under `unless`


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


def test_each_read_covers_only_the_replicas_no_earlier_read_covers():
    expr = promql.first_per_replica([("a", "ma"), ("b", "mb"), ("c", "mc")], "max", ("le", "model"), ("instance",))
    assert expr == ('max by (le, model) (max by (le, model) (a) '
                    'or label_replace(max by (le, model) ((b) unless on (instance) (ma)), "llmdash_read", "1", "", "") '
                    'or label_replace(max by (le, model) ((c) unless on (instance) (ma or mb)), "llmdash_read", "2", '
                    '"", ""))')


def test_a_counter_under_a_set_operator_is_read_as_its_operator_reads_it():
    """A presence aggregation (group) asks only whether series exist, through `unless` and `or` as well; any other
    aggregation of the same reads the counter's value."""
    spec = load_engine("vllm")
    inner = "(vllm:time_to_first_token_seconds) unless on (instance) (vllm:time_to_first_token_seconds_count)"
    assert check_expr(f"group by (instance) ({inner})", spec) == []
    assert check_expr("group by (instance) (vllm:request_success_total or vllm:num_requests_waiting)", spec) == []
    refused = "counter 'vllm:time_to_first_token_seconds' is used outside rate()/increase()"
    assert check_expr(f"sum by (instance) ({inner})", spec) == [refused]
    assert check_expr("max by (instance) (vllm:num_requests_waiting or vllm:time_to_first_token_seconds)",
                      spec) == [refused]
