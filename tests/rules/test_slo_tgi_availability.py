"""An availability SLO on TGI under `promtool test rules`: TGI counts failures in `tgi_request_failure{err}`,
apart from its successes (`tgi_request_success`), so a request is finished when it is either, and the bad
ones are the server's failures (generation, incomplete, overloaded), never invalid input or a client gone.
Both counters are created at their first increment: a model without failures reads 0, one where every
request failed reads 1, not nothing."""

from __future__ import annotations



from llmdash.config import Config, Objective, Slo
from llmdash.engines.catalog import load_engine
from llmdash.rules.generate import build_rules, render_rules
from tests.support.promtool import run_rule_tests

CONFIG = Config(engines=("tgi",), slo=Slo(objectives=(Objective(name="availability", objective=0.999),)))
RATIO = "cluster_namespace_model_name:llm_slo_errors:ratio_rate5m"
MINUTES = 15
# per second, each series of a model: (successes, {err: failures})
TRAFFIC = {
    # 9 successes and 1 server failure a second (3 reasons), beside client errors and drops that do not count
    "failing": (9, {"generation": 0.5, "incomplete": 0.25, "overloaded": 0.25, "validation": 5, "template": 1,
                    "dropped": 2}),
    "healthy": (10, {}),                   # no failure yet: TGI has no tgi_request_failure series
    "down": (None, {"generation": 4}),     # every request since the start failed: no success series
}


def counter(per_second: float) -> str:
    return " ".join(f"{per_second * 60 * minute:g}" for minute in range(MINUTES))


def input_series() -> list[dict]:
    out = []
    for model, (successes, failures) in TRAFFIC.items():
        labels = f'instance="{model}-0", model_name="{model}"'
        if successes is not None:
            out.append({"series": f"tgi_request_success{{{labels}}}", "values": counter(successes)})
        out += [{"series": f'tgi_request_failure{{{labels}, err="{err}"}}', "values": counter(rate)}
                for err, rate in failures.items()]
    return out


def test_the_built_rules_read_tgis_failure_counter():
    rules = render_rules(build_rules(load_engine("tgi"), CONFIG))
    assert 'tgi_request_failure{err=~"generation|incomplete|overloaded"}' in rules
    assert "tgi_request_success offset 1m" in rules


def test_the_error_ratio_is_server_failures_among_successes_and_failures(promtool, tmp_path):
    rules = tmp_path / "tgi.rules.yaml"
    rules.write_text(render_rules(build_rules(load_engine("tgi"), CONFIG)))
    expected = {"failing": 0.1, "healthy": 0, "down": 1}
    checks = [{"expr": f'{RATIO}{{model_name="{model}"}}', "eval_time": f"{MINUTES - 1}m",
               "exp_samples": [{"labels": f'{RATIO}{{llm_engine="tgi", model_name="{model}", slo="availability"}}',
                                "value": value}]}
              for model, value in expected.items()]
    run_rule_tests(promtool, tmp_path, rules, input_series(), checks, timeout=300)
