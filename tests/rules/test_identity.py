"""Alert identity (`llmdash.rules.identity`): what it says an engine's rule file holds is what the built file
holds, and a dashboard learns it without building any rule file."""

from __future__ import annotations

import pytest

from llmdash.config import Alerts, Config, Logs, Objective, Slo
from llmdash.dashboards import assemble
from llmdash.engines.catalog import load_engine
from llmdash.rules import generate
from llmdash.rules.identity import carried_alerts, severity
from llmdash.vocabulary import Alert
from tests.support.catalogs import ENGINES

CONFIGS = {
    "default": (Config(), ENGINES),
    "logs": (Config(logs=Logs(enabled=True)), ENGINES),
    "slo": (Config(engines=("vllm",), slo=Slo(objectives=(
        Objective(name="ttft", target_seconds=1.0, objective=0.999),
        Objective(name="availability", objective=0.999)))), ("vllm",)),
    "availability": (Config(engines=("tgi",), slo=Slo(objectives=(Objective(name="availability", objective=0.999),))),
                     ("tgi",)),
}


def _built(spec, config) -> list[dict]:
    return [rule for group in generate.build_rules(spec, config)["groups"] for rule in group["rules"]
            if "alert" in rule]


@pytest.mark.parametrize("engine, config", [(engine, config) for config, engines in CONFIGS.values()
                                            for engine in engines])
def test_carried_alerts_are_the_built_alerts_with_their_severities(engine, config):
    spec = load_engine(engine)
    built = _built(spec, config)
    assert carried_alerts(spec, config) == {rule["alert"] for rule in built}
    assert {rule["alert"]: rule["labels"]["severity"] for rule in built} == \
        {rule["alert"]: severity(rule["alert"], spec) for rule in built}


def test_severities_are_the_documented_ones():
    """docs/alerts-and-runbooks.md: the preemption pages and the fast burn page; the divergence pages only where
    the engine exports no preemption metric (TGI); everything else is a ticket."""
    vllm, tgi = load_engine("vllm"), load_engine("tgi")
    pages = {Alert.PREEMPTIONS_HIGH, Alert.LOG_PREEMPTIONS_HIGH, Alert.SLO_BURN_FAST}
    assert {a for a in Alert if severity(a, vllm) == "critical"} == pages
    assert {a for a in Alert if severity(a, tgi) == "critical"} == pages | {Alert.DIVERGENCE}


def test_building_a_dashboard_builds_no_rule_file(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a dashboard build called the rule generator")

    for name in ("build_rules", "_alert", "preemptions_high", "divergence", "signals_missing"):
        monkeypatch.setattr(generate, name, refuse)
    config = Config(alerts=Alerts(runbook_url_template="https://runbooks.example/{alertname}"))
    model = assemble.build_dashboard(load_engine("vllm"), config)
    links = {link["url"] for panel in model["panels"] for link in panel.get("links", [])}
    assert "https://runbooks.example/LLMServingPreemptionsHigh" in links


def test_the_slo_configs_above_do_raise_burn_rate_alerts():
    """Else the first test would compare two empty sets of SLO alerts."""
    for config, engines in (CONFIGS["slo"], CONFIGS["availability"]):
        assert {Alert.SLO_BURN_FAST, Alert.SLO_BURN_SLOW} <= carried_alerts(load_engine(engines[0]), config)
