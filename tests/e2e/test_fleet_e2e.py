"""A mixed-version vLLM fleet in a real Prometheus, shaped by hand from the catalog: one replica still
on the old metric names (vLLM 0.9: `time_per_output_token_seconds`, `gpu_cache_usage_perc`) and
stalled from minute 120 (after two hours, so its latency diverges from its offset baseline), one
healthy replica on the new names, in two clusters. The raw dashboard and, after the
recording rules are backfilled level by level with promtool, the recorded dashboard must both show
the stalled old replica; every target of the recorded dashboards must return data."""

from __future__ import annotations

import math

import pytest

from llmdash.build import build_dashboards, build_rule_files
from llmdash.config import Config, DashboardSettings
from llmdash.engines.catalog import load_engine
from llmdash.lab import replay
from llmdash.lab.evaluate import evaluate_dashboard
from llmdash.lab.promserver import PrometheusServer
from llmdash.vocabulary import Annotations

pytestmark = pytest.mark.e2e

SPEC = load_engine("vllm")
MINUTES = 150                    # the offset divergence baselines need two hours of history
STEP_S = 30
# (instance, cluster, era, stalled)
REPLICAS = (("old-0", "eu-1", "old", True), ("new-0", "eu-1", "new", False), ("new-1", "us-1", "new", False))
FAST, SLOW = 0.03, 1.0           # seconds: a healthy token gap, a stalled one
STALL_MIN = 120                  # when the stalled replica's tokens slow down


def _source(role: str, era: str):
    sources = SPEC.signal(role).sources
    return sources[-1] if era == "old" else sources[0]


def _openmetrics(start: float) -> str:
    """Counters, gauges and histograms of every signal each replica's era exports, every 30 s."""
    lines, declared = [], set()
    for instance, cluster, era, stalled in REPLICAS:
        base = f'model_name="m1",instance="{instance}",cluster="{cluster}",job="vllm"'
        for role, source in ((r, _source(r, era)) for r in SPEC.signals if SPEC.has(r)):
            metric = source.metric
            samples = []
            for step in range(MINUTES * 60 // STEP_S + 1):
                t = start + step * STEP_S
                elapsed = step * STEP_S
                if metric.type == "counter":
                    rate = {"throughput": 100.0, "requests": 1.0, "preemptions": 0.3 if stalled else 0.0}.get(role)
                    if rate is None:
                        break
                    samples.append((metric.name, base, rate * elapsed, t))
                elif metric.type == "gauge":
                    value = {"kv_usage": 0.99 if stalled else 0.5, "waiting": 20 if stalled else 1,
                             "running": 20}.get(role)
                    if value is None:
                        break
                    samples.append((metric.name, base, value, t))
                else:
                    per_s = 100.0 if role == "itl" else 1.0
                    share_slow = 0.5 if stalled else 0.0
                    count = per_s * elapsed
                    slow = share_slow * per_s * max(elapsed - STALL_MIN * 60, 0)   # slow observations so far
                    for bound in [*metric.buckets, math.inf]:
                        within = (count - slow) * (FAST <= bound) + slow * (SLOW <= bound)
                        le = "+Inf" if bound == math.inf else SPEC.le(bound)
                        samples.append((f"{metric.name}_bucket", f'{base},le="{le}"', within, t))
                    samples.append((f"{metric.name}_count", base, count, t))
                    samples.append((f"{metric.name}_sum", base, (count - slow) * FAST + slow * SLOW, t))
            if samples and metric.name not in declared:
                kind = {"counter": "counter", "gauge": "gauge", "histogram": "histogram"}[metric.type]
                family = metric.name[:-len("_total")] if kind == "counter" else metric.name
                lines.append(f"# TYPE {family} {kind}")
                declared.add(metric.name)
            lines += [f"{name}{{{labels}}} {value:g} {t:.0f}" for name, labels, value, t in samples]
    return _grouped(lines)


def _grouped(lines: list[str]) -> str:
    """OpenMetrics wants each family's samples together, after its TYPE line."""
    families: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if line.startswith("# TYPE"):
            current = line.split()[2]
            families.setdefault(current, []).insert(0, line)
        else:
            name = line.split("{", 1)[0]
            family = next((f for f in families if name == f or name.startswith(f + "_")), name)
            families.setdefault(family, []).append(line)
    return "\n".join(line for body in families.values() for line in body) + "\n# EOF\n"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    import time
    work = tmp_path_factory.mktemp("fleet")
    end = (time.time() // 3600) * 3600 - 3600
    start = end - MINUTES * 60
    server = PrometheusServer()
    try:
        data = work / "fleet.om"
        data.write_text(_openmetrics(start))
        server.backfill(data)
        server.start()
        replay.prometheus_record(server, [build_rule_files(Config(engines=("vllm",)))["vllm"]], start, end)
        yield server, start, end
    finally:
        server.stop()


def _panel(result, title: str):
    return next(p for p in result.panels if p.title == title and p.type == "timeseries")


def _latest(panel, ref: str = "A") -> dict[str, float]:
    target = next(t for t in panel.targets if t.ref_id == ref)
    return {" ".join(f"{k}={v}" for k, v in sorted(s.labels.items())): s.points[-1][1]
            for s in target.series if s.points}


@pytest.mark.parametrize("recorded", [False, True], ids=["raw", "recorded"])
def test_the_stalled_old_version_replica_shows_in_itl_p99_and_kv(fleet, recorded):
    server, start, end = fleet
    config = Config(engines=("vllm",), dashboard=DashboardSettings(use_recording_rules=recorded))
    dashboard = build_dashboards(config, ["vllm"])["vllm"]
    result = evaluate_dashboard(dashboard, server, end - 1800, end, 60.0, annotations=False)
    itl = _latest(_panel(result, "ITL p99"))
    kv = _latest(_panel(result, "KV-cache usage"))
    eu = next(v for k, v in itl.items() if "cluster=eu-1" in k)
    us = next(v for k, v in itl.items() if "cluster=us-1" in k)
    assert eu > 0.5, f"eu-1 ITL p99 {eu}: the old replica's stalls are hidden"
    assert us < 0.1, f"us-1 ITL p99 {us}: a healthy cluster must not look stalled"
    assert max(v for k, v in kv.items() if "cluster=eu-1" in k) == pytest.approx(0.99)


def test_every_target_of_the_recorded_dashboards_returns_data(fleet):
    server, start, end = fleet
    config = Config(engines=("vllm",), dashboard=DashboardSettings(use_recording_rules=True))
    for name, dashboard in build_dashboards(config).items():
        result = evaluate_dashboard(dashboard, server, end - 1800, end, 60.0)
        # ALERTS exist only while a live Prometheus evaluates alerts; a backfill writes none
        empty = [f"{t.row} / {t.panel} / {t.ref_id}: {t.expr}" for p in result.panels for t in p.targets
                 if not t.has_data and "ALERTS{" not in t.expr]
        assert not empty, f"{name}: targets without data:\n" + "\n".join(empty)


def test_the_fleet_dashboard_marks_the_divergence_of_the_stalled_cluster_only(fleet):
    """The Divergence annotation reads the recorded divergence series: eu-1's ITL p99 jumps at minute 120 while
    its throughput holds; us-1 never diverges, and nothing is marked before the stall."""
    server, start, end = fleet
    dashboard = build_dashboards(Config(engines=("vllm",)))["fleet"]
    result = evaluate_dashboard(dashboard, server, end - 3600, end, 60.0)
    regions = result.regions(Annotations.DIVERGENCE.name)
    assert regions, "no Divergence annotation on the fleet dashboard"
    assert {r.labels.get("cluster") for r in regions} == {"eu-1"}
    assert min(r.start for r in regions) >= start + STALL_MIN * 60
    assert max(r.end for r in regions) >= end - 120


def test_the_recorded_alerts_page_on_the_stalled_replica_by_name(fleet):
    server, start, end = fleet
    share = server.query("cluster_namespace_model_name_instance:llm_preemption_share:ratio_rate2m", end)
    by_instance = {s["metric"]["instance"]: float(s["value"][1]) for s in share}
    assert by_instance["old-0"] == pytest.approx(0.3, rel=0.05) and by_instance["new-0"] == 0


def test_raw_and_recorded_dashboards_answer_alike_on_the_same_data(fleet):
    """The recorded registry's reads are the raw signals, recorded: each panel both dashboards have reads the same
    values at the end of the window (the drill-down tables read raw series in both, so they are left out)."""
    server, start, end = fleet
    results = {}
    for recorded in (False, True):
        config = Config(engines=("vllm",), dashboard=DashboardSettings(use_recording_rules=recorded))
        result = evaluate_dashboard(build_dashboards(config)["vllm"], server, end - 1800, end, 60.0, annotations=False)
        results[recorded] = {(p.title, t.ref_id): sorted(s.points[-1][1] for s in t.series if s.points)
                             for p in result.panels if p.type in ("timeseries", "stat") for t in p.targets}
    shared = sorted(set(results[False]) & set(results[True]))
    assert len(shared) >= 15
    for where in shared:
        raw, rec = results[False][where], results[True][where]
        assert len(raw) == len(rec) and raw, (where, raw, rec)
        assert all(math.isclose(a, b, rel_tol=0.02, abs_tol=1e-9) for a, b in zip(raw, rec)), (where, raw, rec)
