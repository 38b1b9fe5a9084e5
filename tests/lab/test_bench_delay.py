"""The live page-delay benchmark's pure parts: the wall-clock mapping, the data fed, reading alert answers, the
table (no server needed)."""

from __future__ import annotations

import time

from llmdash.config import Config
from llmdash.lab.bench_delay import (BACKENDS, PROMETHEUS, Feed, Result, Scrape, Timeline, _rule_file, exposition,
                                     firing, openmetrics, table, vmalert_phase)
from llmdash.vocabulary import Alert

BAD = "vllm-llama-3.1-8b-instruct:8000"


def test_the_backfill_ends_the_lead_before_the_first_preemption_and_that_cut_is_now():
    timeline = Timeline.plan(first_preemption_s=5000.0, now=1_800_000_000.0, lead_s=120.0)
    assert timeline.cut_s == 4880.0
    assert timeline.wall(timeline.cut_s) == 1_800_000_000.0
    assert timeline.wall(5000.0) == 1_800_000_120.0
    assert timeline.delay_s(1_800_000_120.0 + 95.5) == 95.5


def scrape(at: float, process: str = "p", value: int = 7) -> Scrape:
    return Scrape(at, process, ("# TYPE x counter", f'x_total{{instance="{process}"}} {value} {at:.3f}'))


def test_backfill_and_live_samples_carry_wall_clock_timestamps_in_each_format():
    timeline = Timeline(start=1_000.0, cut_s=0.0, first_preemption_s=0.0)
    assert openmetrics([scrape(12.5)], timeline) == '# TYPE x counter\nx_total{instance="p"} 7 1012.500\n# EOF\n'
    assert exposition(scrape(12.5), timeline) == 'x_total{instance="p"} 7 1012500\n'   # milliseconds, no comments


def test_prometheus_gets_each_due_scrape_once_in_order_and_nothing_early():
    now = time.time()
    timeline = Timeline(start=now, cut_s=0.0, first_preemption_s=0.0)
    feed = Feed([scrape(-30, value=1), scrape(-15, value=2), scrape(-20, "q", 5), scrape(3600, value=9)],
                timeline, [])
    try:
        served = [feed.metrics() for _ in range(3)]
    finally:
        feed.stop()
    assert [line.split()[1] for line in served[0].splitlines()] == ["1", "5"]
    assert [line.split()[1] for line in served[1].splitlines()] == ["2", "5"]   # q again: an exact duplicate
    assert served[2] == served[1]                                              # the next is an hour away


def test_firing_reads_prometheus_and_vmalert_answers_for_the_bad_replica_only():
    prometheus = {"data": {"alerts": [
        {"labels": {"alertname": Alert.PREEMPTIONS_HIGH, "instance": BAD}, "state": "pending"},
        {"labels": {"alertname": Alert.PREEMPTIONS_HIGH, "instance": "other:8000"}, "state": "firing"}]}}
    assert not firing(prometheus, Alert.PREEMPTIONS_HIGH, BAD)
    prometheus["data"]["alerts"][0]["state"] = "firing"
    assert firing(prometheus, Alert.PREEMPTIONS_HIGH, BAD)
    vmalert = {"data": {"alerts": [{"name": Alert.PREEMPTIONS_HIGH, "labels": {"instance": BAD}, "state": "firing"}]}}
    assert firing(vmalert, Alert.PREEMPTIONS_HIGH, BAD)
    assert not firing(vmalert, Alert.TTFT_HIGH, BAD)
    assert not firing({"status": "success", "data": {"alerts": None}}, Alert.PREEMPTIONS_HIGH, BAD)   # vmalert, none


def test_the_table_gives_each_backend_its_delay_per_seed_and_its_lag_behind_prometheus():
    vm = BACKENDS[1]
    results = [Result(1, "vllm", 5000.0, ((PROMETHEUS.name, 100.0), (vm.name, 160.4)), 19.7),
               Result(2, "vllm", 4900.0, ((PROMETHEUS.name, 130.0), (vm.name, None)), 0.2)]
    rows = {tuple(c.strip() for c in line.split("|")[2:5]): [c.strip() for c in line.split("|")[5:-1]]
            for line in table(results).splitlines() if line.startswith("| vllm")}
    assert rows[("Prometheus 2.42", "–", "20 / 0 s")] == ["+100 s", "+130 s", "+115 s", "–"]
    assert rows[(vm.label, "30s", f"{vm.phase_s:.0f} s")] == ["+160 s", "missed", "+160 s", "+60 s"]
    assert len(rows) == len(BACKENDS)


def test_vmalert_phase_is_the_one_a_live_vmalert_1_79_evaluated_at():
    """Observed: a group `llmdash-vllm` from this file, every 1m, evaluated at 18:14:51.26 (lastEvaluation)."""
    assert abs(vmalert_phase("/tmp/llmdash-delay-qiwus312/vllm.victoriametrics-30s.rules.yaml", "llmdash-vllm", 60)
               - 51.22) < 0.01


def test_each_vmalert_rule_file_is_named_to_evaluate_at_its_backends_phase(tmp_path):
    for backend in BACKENDS[1:]:
        path = _rule_file("vllm", Config(), backend, tmp_path)
        assert abs(vmalert_phase(str(path), "llmdash-vllm", 60) - backend.phase_s) < 0.5
        assert (Alert.PREEMPTIONS_HIGH in path.read_text()) and path.exists()
