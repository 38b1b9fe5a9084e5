"""The one raw read of a counter outside rate()/increase() the rule checker accepts: `promql.increments`, what a
counter gained since the previous evaluation with a reset counted from 0; any other arithmetic on a counter's
value is still refused, and the right side of `and`/`unless` is read for presence only."""

from __future__ import annotations

from llmdash.dashboards.validate import check_expr
from llmdash.engines.catalog import load_engine
from llmdash.panels.promql import increments

SPEC = load_engine("vllm")
COUNTER = 'vllm:request_success_total{finished_reason="error"}'
REFUSED = "counter 'vllm:request_success_total' is used outside rate()/increase()"


def test_the_increments_of_a_counter_are_accepted():
    assert increments(COUNTER, "1m") == (
        f"(({COUNTER} - ({COUNTER} offset 1m <= {COUNTER})) or ({COUNTER} and ({COUNTER} offset 1m > {COUNTER})))")
    assert check_expr(f"sum by (model_name) ({increments(COUNTER, '1m')})", SPEC) == []


def test_a_counter_s_value_in_other_arithmetic_is_still_refused():
    other = 'vllm:request_success_total{finished_reason="stop"}'
    for expr in (f"{COUNTER} - {COUNTER} offset 1m",                        # a reset would read negative
                 f"({COUNTER} - ({COUNTER} offset 1m <= {COUNTER})) or {COUNTER}",   # every value, reset or not
                 f"(({COUNTER} - ({other} offset 1m <= {COUNTER})) or ({COUNTER} and ({COUNTER} offset 1m > "
                 f"{COUNTER})))"):                                            # two different series
        assert REFUSED in check_expr(expr, SPEC), expr


def test_the_right_of_and_is_presence_only():
    assert check_expr(f"vllm:num_requests_running and on (instance) {COUNTER}", SPEC) == []
    assert REFUSED in check_expr(f"{COUNTER} and on (instance) vllm:num_requests_running", SPEC)
