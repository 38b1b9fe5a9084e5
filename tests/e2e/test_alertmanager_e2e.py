"""Real Prometheus -> real Alertmanager -> a webhook on 127.0.0.1, on a live simulated collapse.

One replica of three serving a model thrashes (the one-bad-replica scenario). Its data is backfilled up
to the wall clock, 12 minutes into the collapse, and the Prometheus evaluating the generated rules live
(every 2 s, at the wall clock) sends to an Alertmanager running the generated alertmanager.yml.
Checked: the page reaches the `page` receiver for the bad replica only; the warnings the page inhibits
reach no receiver, before or after it; and Alertmanager did hold them (they fired, and it suppressed
them), so the check is not vacuous.

Fast by configuration, not by sleeping: the rules are evaluated every 2 s, the page and the latency
warnings pend for seconds (`fast`), and the Alertmanager copy waits 1 s to group.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
import requests

from llmdash.config import Config
from llmdash.engines.catalog import load_engine
from llmdash.lab import scenarios
from llmdash.lab.promserver import PrometheusServer
from llmdash.rules.alertmanager import PAGE, TICKET, alertmanager_config
from llmdash.rules.generate import build_rules, render_rules
from llmdash.rules.identity import INHIBITED
from llmdash.vocabulary import Alert
from tests.support.alertmanager import AlertmanagerServer, WebhookReceiver

pytestmark = pytest.mark.e2e

ENGINE = "vllm"
INTO_THE_COLLAPSE_S = 12 * 60
TIMEOUT_S = 90


def fast(config: Config) -> Config:
    """The page pends 20 s instead of 1 min, the latency warnings 10 s instead of 10 min: they fire first
    unless they wait for the page. (Not 0 s: a restarted Prometheus writes `ALERTS` only from its third
    evaluation on, once it has restored the `for` state; a warning firing before that cannot see the page.)"""
    return dataclasses.replace(
        config, preemption=dataclasses.replace(config.preemption, alert_for="20s"),
        rules=dataclasses.replace(config.rules, latency_alert_for="10s"))


def am_test_config(config: Config, receiver: WebhookReceiver) -> dict:
    """The generated alertmanager.yml, its receivers pointed at the test's webhook and its waits shortened."""
    model = alertmanager_config(config)
    model["route"] |= {"group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"}
    for entry in model["receivers"]:
        entry["webhook_configs"] = [{"url": receiver.url(entry["name"]), "send_resolved": True}]
    return model


def live_collapse(server: PrometheusServer) -> tuple[scenarios.Scenario, str]:
    """Backfill the scenario up to now, INTO_THE_COLLAPSE_S after its onset; return it and the bad instance.
    (Nothing later: blocks reaching into the future would make the rules' own writes at now out of bounds.)"""
    scenario = scenarios.build("one-bad-replica", scenarios.Traffic(replicas=3, after_min=INTO_THE_COLLAPSE_S / 60))
    start = (time.time() // 15) * 15 - scenario.duration_s
    path = server.dir / "live.om"
    with open(path, "w") as out:
        scenarios.write_openmetrics(scenario, {ENGINE: load_engine(ENGINE)}, 1, start, out)
        out.write("# EOF\n")
    server.backfill(path)
    return scenario, scenario.affected_replica().instance(ENGINE, scenario.models[0].name)


def firing_in_prometheus(server: PrometheusServer) -> set[str]:
    alerts = requests.get(f"{server.url}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
    return {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}


def test_the_page_reaches_the_pager_first_and_alone(tmp_path, stack):
    """On each stack's Prometheus (2.42, 3.16), with Debian's Alertmanager 0.25: 0.35's server cannot be built
    from the module proxy (.ci/current-stack)."""
    config = fast(Config())
    rules = tmp_path / f"{ENGINE}.rules.yaml"
    rules.write_text(render_rules(build_rules(load_engine(ENGINE), config)))
    with WebhookReceiver() as receiver, AlertmanagerServer(am_test_config(config, receiver)) as alertmanager:
        server = PrometheusServer(rule_files=(rules,), evaluation_interval="2s", stack=stack)
        server.config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager.address]}]}]}
        try:
            scenario, bad = live_collapse(server)
            server.start()
            deadline = time.monotonic() + TIMEOUT_S
            inhibited: list[dict] = []
            while time.monotonic() < deadline and not inhibited:
                time.sleep(1)
                inhibited = [a for a in alertmanager.alerts() if a["labels"]["alertname"] in INHIBITED
                             and a["status"]["inhibitedBy"]]
            time.sleep(3)   # longer than group_wait + group_interval: anything not held back has been sent
            fired = firing_in_prometheus(server)
        finally:
            server.stop()
    model = scenario.models[0].name
    pages = [n for n in receiver.notifications if n.receiver == PAGE]
    assert pages, f"no page within {TIMEOUT_S}s; Prometheus had firing: {sorted(fired)}"
    paged = {(labels["alertname"], labels.get("instance")) for n in pages for _, labels in n.alerts}
    assert paged == {(Alert.PREEMPTIONS_HIGH, bad)}, f"paged: {paged}, the bad replica is {bad}"
    delivered = [(n.receiver, labels["alertname"]) for n in receiver.notifications for _, labels in n.alerts
                 if labels["alertname"] in INHIBITED]
    assert delivered == [], f"inhibited alerts reached a receiver: {delivered}"
    before = [n for n in receiver.notifications if n.receiver == TICKET and n.at <= pages[0].at
              and any(labels.get("model_name") == model for _, labels in n.alerts)]
    assert before == [], f"a warning for {model} reached the ticket receiver before the page: {before}"
    assert inhibited, f"no inhibited warning to check: Prometheus had firing {sorted(fired)}"
    assert {a["labels"]["model_name"] for a in inhibited} == {model}
