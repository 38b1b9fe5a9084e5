"""SLO burn-rate alerts and error-budget panels on the simulator's scenarios, through real Prometheus engines:
promtool's rule evaluation for the alerts (as tests/test_detection.py), and a local Prometheus with the
recording rules backfilled for the panels.

The objective is 99 % of requests with their first token within 1 s over 30 days, a bound vLLM and SGLang
both export. In the simulated KV-cache collapse the first model's TTFT tail crosses 1 s for more than 14.4 %
of its requests, so the fast burn page comes about ten minutes after the first preemption (seed 1: 11.6 min on
vLLM, 10.6 min on SGLang); a load ramp, going idle, a restart and steady traffic spend no budget worth a page."""

from __future__ import annotations

import pytest

from llmdash.config import Config, Objective, Slo
from llmdash.engines.catalog import load_engine
from llmdash.lab import bench
from llmdash.lab.scenarios import PRIMARY
from llmdash.rules.generate import build_rules
from llmdash.vocabulary import SLO_ALERTS, Alert

pytestmark = pytest.mark.e2e

ENGINES = ("vllm", "sglang")
QUIET = ("steady", "load-ramp", "idle", "restart")
TTFT = Objective(name="ttft", target_seconds=1.0, objective=0.99)
CONFIG = Config(engines=ENGINES, slo=Slo(objectives=(TTFT,)))
PAGE_WITHIN_S = 15 * 60


@pytest.fixture(scope="module")
def outcomes():
    results = bench.run(ENGINES, CONFIG, seed=1, names=("kv-collapse", *QUIET))
    return {(o.engine, o.scenario): o for o in results}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_collapse_pages_on_the_ttft_budget(outcomes, engine):
    collapse = outcomes[(engine, "kv-collapse")]
    delay = collapse.delay_s(Alert.SLO_BURN_FAST)
    assert delay is not None and 0 <= delay <= PAGE_WITHIN_S, delay
    assert {f.model for f in collapse.fired(Alert.SLO_BURN_FAST)} == {PRIMARY}
    assert all(dict(f.labels).get("slo") == "ttft" for f in collapse.fired(Alert.SLO_BURN_FAST))


@pytest.mark.parametrize("scenario", QUIET)
@pytest.mark.parametrize("engine", ENGINES)
def test_no_burn_rate_alert_without_a_collapse(outcomes, engine, scenario):
    assert [f for f in outcomes[(engine, scenario)].firings if f.alert in SLO_ALERTS] == []


@pytest.fixture(scope="module")
def recorded_prometheus(tmp_path_factory):
    """A Prometheus holding the kv-collapse scenario and, backfilled, vLLM's recording rules over it."""
    from llmdash.lab import replay
    from llmdash.lab.promserver import PrometheusServer, load_scenarios

    server = PrometheusServer()
    try:
        windows = load_scenarios(server, ["kv-collapse"], ["vllm"])
        server.start()
        w = windows["kv-collapse"]
        records = build_rules(load_engine("vllm"), CONFIG)
        records = {"groups": [{**g, "rules": [r for r in g["rules"] if "record" in r]} for g in records["groups"]]}
        replay.prometheus_record(server, [records], w.start, w.end)
    except BaseException:
        server.stop()
        raise
    yield server, w
    server.stop()


def test_the_error_budget_panels_read_data(recorded_prometheus):
    from llmdash.build import build_dashboards
    from llmdash.lab.evaluate import evaluate_dashboard

    server, w = recorded_prometheus
    dashboard = build_dashboards(CONFIG, ["vllm"])["vllm"]
    result = evaluate_dashboard(dashboard, server, w.start + 3600, w.end, 60.0, annotations=False,
                                panel_filter=lambda row, panel: row == "Error budget")
    assert [p.title for p in result.panels] == ["Error budget remaining", "Burn rate", "SLO attainment", "SLO coverage"]
    empty = [f"{t.panel} / {t.ref_id}: {t.expr}" for p in result.panels for t in p.targets if not t.has_data]
    assert not empty, "\n".join(empty)
    burn = result.panel("Burn rate", "Error budget")
    one_hour = next(t for t in burn.targets if t.legend.endswith(" 1h"))
    collapsing = next(s for s in one_hour.series if s.labels.get("model_name") == PRIMARY)
    assert max(v for _, v in collapsing.points) >= 14.4     # the page's burn rate, as the panel shows it
