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
from llmdash.lab.replay import prometheus_record
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


def at_server_pace(model: dict) -> dict:
    """The rule file with every group at the server's 2 s interval: the warnings' group runs every minute, which
    would outlast the test's timeout, and at the page's own pace a warning has its best chance to beat the page."""
    return {**model, "groups": [{k: v for k, v in group.items() if k != "interval"} for group in model["groups"]]}


def firing_in_prometheus(server: PrometheusServer) -> set[str]:
    alerts = requests.get(f"{server.url}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
    return {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}


def test_the_page_reaches_the_pager_first_and_alone(tmp_path, stack):
    """On each stack's Prometheus (2.42, 3.16), with Debian's Alertmanager 0.25: 0.35's server cannot be built
    from the module proxy (.ci/current-stack)."""
    config = fast(Config())
    rules = tmp_path / f"{ENGINE}.rules.yaml"
    rules.write_text(render_rules(at_server_pace(build_rules(load_engine(ENGINE), config))))
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


# ---- a Dynamo frontend in front of a vLLM worker: one incident, one page (issue 29) -------------------------------

FRONTEND_ITL_BOUNDS = ("0", "0.0019", "0.0035", "0.0067", "0.013", "0.024", "0.045", "0.084", "0.16", "0.3", "0.56",
                       "1.1", "2", "+Inf")   # generate_log_buckets(0.001, 2.0, 13), `le` as Rust's f64 Display
HISTORY_S, THRASH_S, STEP_S = 150 * 60, 8 * 60, 15


def dynamo_over_vllm(path, now: float) -> None:
    """2.5 hours of a Dynamo deployment as scraped, written as OpenMetrics: the vLLM worker's own series on its
    system port (the worker passes vLLM's `vllm:` series through:
    github.com/ai-dynamo/dynamo/docs/backends/vllm/prometheus.md) and the frontend's (`dynamo_frontend_*`, names
    from ai-dynamo/dynamo@04070c75b52f33346a2d5723eed93a0093e77bad:lib/runtime/src/metrics/prometheus_names.rs,
    `frontend_service`; labelled `model`). The worker finishes 1 request/s; THRASH_S before the end it starts
    preempting 0.3/s (30 % of its requests). The frontend streams 100 tokens/s throughout; from the same moment 5 %
    of its inter-token gaps take 1.1 s instead of 10 ms, so its p99 rises a hundredfold while its throughput stays
    flat: the divergence, a critical alert on Dynamo."""
    worker = 'instance="10.0.0.5:8081",job="dynamo-worker",model_name="m1",engine="0"'
    frontend = 'instance="10.0.0.9:8000",job="dynamo-frontend",model="m1"'
    start, onset = now - HISTORY_S, now - THRASH_S
    lines = []
    for ts in range(int(start), int(now) + 1, STEP_S):
        t, after = ts - start, max(0, ts - onset)
        slow = int(100 * 0.05 * after)
        lines += [f'vllm:request_success_total{{{worker},finished_reason="stop"}} {int(t)} {ts}',
                  f'vllm:num_preemptions_total{{{worker}}} {int(0.3 * after)} {ts}',
                  f'vllm:num_requests_running{{{worker}}} 8 {ts}',
                  f'dynamo_frontend_output_tokens_total{{{frontend}}} {100 * int(t)} {ts}',
                  f'dynamo_frontend_requests_total{{{frontend},endpoint="chat_completions",request_type="stream",'
                  f'status="success",error_type=""}} {int(t)} {ts}']
        for le in FRONTEND_ITL_BOUNDS:
            fast_ok = le not in ("0", "0.0019", "0.0035", "0.0067")       # 10 ms gaps sit in the 0.013 bucket
            slow_ok = le in ("1.1", "2", "+Inf")
            count = (100 * int(t) - slow) * fast_ok + slow * slow_ok
            lines.append(f'dynamo_frontend_inter_token_latency_seconds_bucket{{{frontend},le="{le}"}} {count} {ts}')
        lines.append(f'dynamo_frontend_inter_token_latency_seconds_count{{{frontend}}} {100 * int(t)} {ts}')
    path.write_text("\n".join(lines) + "\n# EOF\n")


def test_a_worker_thrashing_behind_the_dynamo_frontend_is_one_critical_notification(tmp_path):
    """Both rule files loaded into one Prometheus: the worker's preemption page and the frontend's divergence
    (critical on Dynamo) describe one incident. The frontend's alert pends longer than the page (as in a real
    collapse, where it fires minutes later); the page must silence it across `llm_engine`: exactly one critical
    notification reaches the pager, and the frontend's alert was held by Alertmanager, not absent."""
    config = fast(Config())
    config = dataclasses.replace(config, divergence=dataclasses.replace(config.divergence, alert_for="40s"))
    files = []
    for engine in ("vllm", "dynamo"):
        path = tmp_path / f"{engine}.rules.yaml"
        path.write_text(render_rules(build_rules(load_engine(engine), config)))
        files.append(path)
    with WebhookReceiver() as receiver, AlertmanagerServer(am_test_config(config, receiver)) as alertmanager:
        server = PrometheusServer(evaluation_interval="2s")
        try:
            now = (time.time() // STEP_S) * STEP_S
            dynamo_over_vllm(server.dir / "live.om", now)
            server.backfill(server.dir / "live.om")
            server.start()
            # the divergence reads its baseline from recorded series an hour old: record the past first
            prometheus_record(server, [build_rules(load_engine("dynamo"), config)], now - HISTORY_S, now - 120)
            server.config["rule_files"] = [str(path) for path in files]
            server.config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager.address]}]}]}
            server.restart()
            deadline = time.monotonic() + TIMEOUT_S
            held: list[dict] = []
            pages: list = []
            while time.monotonic() < deadline and not held and len(pages) < 2:
                time.sleep(1)
                held = [a for a in alertmanager.alerts() if a["labels"]["alertname"] == Alert.DIVERGENCE
                        and a["labels"]["llm_engine"] == "dynamo" and a["status"]["inhibitedBy"]]
                pages = [n for n in receiver.notifications if n.receiver == PAGE]
            time.sleep(3)   # longer than group_wait + group_interval: anything not held back has been sent
            fired = firing_in_prometheus(server)
        finally:
            server.stop()
    pages = [n for n in receiver.notifications if n.receiver == PAGE]
    paged = [(labels["alertname"], labels["llm_engine"]) for n in pages for status, labels in n.alerts
             if status == "firing"]
    assert paged == [(Alert.PREEMPTIONS_HIGH, "vllm")], f"critical notifications: {paged}; firing: {sorted(fired)}"
    assert held, f"the frontend's divergence never reached Alertmanager to be held; firing: {sorted(fired)}"
