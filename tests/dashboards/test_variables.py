"""The one Grafana-variable substituter, and the validator that parses queries through it."""

from __future__ import annotations

import pytest

from llmdash.dashboards import validate
from llmdash.dashboards.promql_walk import parseable
from llmdash.dashboards.variables import rate_interval, substitute, variable_values
from llmdash.engines.catalog import load_engine
from llmdash.errors import LlmdashError

VALUES = {"model": "m-1", "model_name": "llama", "instance": ".*"}


@pytest.mark.parametrize("form", ["$model_name", "${model_name}", "${model_name:regex}", "[[model_name]]",
                                  "[[model_name:regex]]", "${model_name:pipe}"])
def test_every_form_grafana_reads_is_replaced(form):
    assert substitute(f'x{{model_name=~"{form}"}}', VALUES, 60, 3600, 15) == 'x{model_name=~"llama"}'


def test_a_name_that_is_a_prefix_of_another_replaces_only_itself():
    expr = 'x{a="$model", b="$model_name", c="${model}", d="[[model_name]]"} * $__interval_ms'
    assert substitute(expr, VALUES, 60, 3600, 15) == 'x{a="m-1", b="llama", c="m-1", d="llama"} * 60000'


@pytest.mark.parametrize("step_s, scrape_s, expected", [(15, 15, 60), (60, 15, 75), (90, 15, 105), (10, 30, 120)])
def test_rate_interval_is_the_larger_of_step_plus_scrape_and_four_scrapes(step_s, scrape_s, expected):
    assert rate_interval(step_s, scrape_s) == expected
    assert substitute("rate(x[$__rate_interval])", {}, step_s, 3600, scrape_s) == f"rate(x[{expected}s])"


def test_built_in_intervals_follow_the_step_and_range():
    expr = "$__interval $__interval_ms $__range $__range_s"
    assert substitute(expr, {}, 0.5, 1800, 15) == "500ms 500 1800s 1800"


def test_an_unknown_variable_is_an_error_unless_a_default_is_given():
    with pytest.raises(LlmdashError, match=r"unknown dashboard variable \$job"):
        substitute('x{job="$job"}', VALUES, 60, 3600, 15)
    assert substitute('x{job="${job:regex}"}', {}, 60, 3600, 15, default=".*") == 'x{job=".*"}'


def test_dashboard_variables_become_all_the_data_source_or_their_current_value():
    dashboard = {"templating": {"list": [
        {"name": "datasource", "type": "datasource"},
        {"name": "model_name", "type": "query", "multi": True, "includeAll": True, "allValue": "llama.*"},
        {"name": "instance", "type": "query", "includeAll": True},
        {"name": "cluster", "type": "custom", "current": {"value": ["eu"]}}]}}
    assert variable_values(dashboard) == {"datasource": "prometheus", "model_name": "llama.*", "instance": ".*",
                                          "cluster": "eu"}
    with pytest.raises(LlmdashError, match=r"\$zone has no current value"):
        variable_values({"templating": {"list": [{"name": "zone", "type": "custom", "current": {}}]}})


def test_the_validator_reads_formatted_and_bracketed_variables_whole():
    """Its own pattern used to replace only `${model_name` and leave `:regex}` in the value (so the doctor
    matched series against `.*:regex}`), and to leave `[[…]]` as it was."""
    spec = load_engine("vllm")
    for form in ("${model_name:regex}", "[[model_name]]", "$model_name"):
        expr = f'sum(rate(vllm:generation_tokens_total{{model_name=~"{form}"}}[$__rate_interval]))'
        assert parseable(expr) == 'sum(rate(vllm:generation_tokens_total{model_name=~".*"}[60s]))'
        assert validate.check_expr(expr, spec) == []
