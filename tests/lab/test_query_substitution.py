"""The lab's harnesses send queries as Grafana would, through the dashboards' one variable substituter."""

from __future__ import annotations

import pytest

from llmdash.errors import LlmdashError
from llmdash.lab import bench_cost, evaluate


def test_the_cost_benchmark_sends_what_grafana_sends_for_every_form():
    """It used to leave `[[…]]` in the query and turn `$__interval_ms` into `.*`."""
    expr = 'rate(x{instance=~"[[instance]]"}[$__rate_interval]) * $__interval_ms'
    assert bench_cost.query_as_sent(expr, 3 * 3600, 15) == 'rate(x{instance=~".*"}[60s]) * 15000'


def test_the_evaluator_refuses_a_malformed_annotation_interval_in_one_line():
    with pytest.raises(LlmdashError, match="not a Prometheus duration: '1.5 m'"):
        evaluate.seconds("1.5 m")
