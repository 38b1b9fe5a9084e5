"""VictoriaMetrics + vmalert as a second backend: the same panels, recorded series and alerts as Prometheus.

One Prometheus and one VictoriaMetrics per module hold the same simulated data, scraped with realistic
phases (each process 0.5-14.5 s into the interval, seeded), where `rate()` extrapolation and MetricsQL's
previous-sample rule part ways. Every engine's dashboards are compared on the collapse; the rules are
replayed on both (promtool for Prometheus, vmalert's replay mode for VictoriaMetrics) for two engines
of different preemption flavours, on the collapse and on steady traffic.
"""

from __future__ import annotations

import dataclasses
import math
from concurrent.futures import ProcessPoolExecutor

import pytest

from llmdash.config import Config
from llmdash.engines.catalog import load_all, load_engine
from llmdash.lab import replay
from llmdash.lab.emitters import simulated_engines
from llmdash.lab.evaluate import evaluate_dashboard
from llmdash.lab.promserver import PrometheusServer, plan_windows
from llmdash.lab.scenarios import build, write_openmetrics
from llmdash.lab.vmserver import VictoriaMetricsServer, vmalert_check
from llmdash.rules.generate import build_rules
from llmdash.vocabulary import Alert

pytestmark = pytest.mark.e2e

RULE_ENGINES = ("vllm", "sglang")       # a counter-preemption engine and a retraction engine
PANEL_TOLERANCE = 0.10
RECORDED_TOLERANCE = 0.05
WARM_UP_S = 3600 + 15 * 60 + 5 * 60   # the divergence baseline: its trailing hour, its offset, one 5m rate
STEP_S = 60.0


def _simulate(job: tuple[str, float, str, tuple[str, ...]]) -> str:
    name, start, path, engines = job
    with open(path, "w") as out:
        write_openmetrics(build(name), {e: load_engine(e) for e in engines}, 1, start, out, phased=True)
        out.write("# EOF\n")
    return path


def vmalert_config() -> Config:
    config = Config()
    return dataclasses.replace(config, rules=dataclasses.replace(config.rules, target="vmalert"))


@pytest.fixture(scope="module")
def backends(tmp_path_factory):
    """(prometheus, victoriametrics, windows): both loaded from the same phased scrapes, recording rules of
    RULE_ENGINES replayed on each, and their alerts replayed by vmalert reading each backend."""
    engines = tuple(simulated_engines(load_all()))
    windows = plan_windows(["kv-collapse", "steady"])
    tmp = tmp_path_factory.mktemp("backends")
    jobs = [("kv-collapse", windows["kv-collapse"].start, str(tmp / "collapse.om"), engines),
            ("steady", windows["steady"].start, str(tmp / "steady.om"), RULE_ENGINES)]
    prom, vm = PrometheusServer(), VictoriaMetricsServer()
    try:
        vm.start()
        with ProcessPoolExecutor(max_workers=2) as pool:
            for path in pool.map(_simulate, jobs):
                prom.backfill(path)
                vm.backfill(path)
        prom.start()
        models = [build_rules(load_engine(e), vmalert_config()) for e in RULE_ENGINES]
        for w in windows.values():
            phases = replay.prometheus_record(prom, models, w.start, w.end)
            replay.vmalert_record(vm, models, w.start, w.end, phases)
            replay.vmalert_alerts(vm, vm, models, w.start, w.end, {"llmdash_backend": "victoriametrics"}, phases)
            replay.vmalert_alerts(prom, vm, models, w.start, w.end, {"llmdash_backend": "prometheus"}, phases)
        yield prom, vm, windows
    finally:
        prom.stop()
        vm.stop()


def _points(series) -> dict[tuple, dict[float, float]]:
    return {tuple(sorted(s.labels.items())): dict(s.points) for s in series}


def disagreements(a: dict, b: dict, tolerance: float, after: float) -> list[str]:
    """Where two backends' series differ by more than `tolerance` of the larger value (with a floor of 1% of
    the series' largest value, so a share of 0.0001 against 0 is not a 100% difference), from `after` on,
    at times both have a value; a series only one backend returns is a difference too."""
    out = []
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            out.append(f"{dict(key)} only on {'prometheus' if key in a else 'victoriametrics'}")
            continue
        common = [t for t in a[key] if t in b[key] and t >= after
                  and all(math.isfinite(x) for x in (a[key][t], b[key][t]))]
        scale = max((abs(v) for t in common for v in (a[key][t], b[key][t])), default=0.0)
        for t in common:
            x, y = a[key][t], b[key][t]
            if abs(x - y) > max(tolerance * max(abs(x), abs(y)), 0.01 * scale, 1e-9):
                out.append(f"{dict(key)} at +{(t - after) / 60:.0f} min: {x:.4g} vs {y:.4g}")
                break
    return out


# Measured, not yet fixed (issue 21, "short-window panels disagree"): with phased scrapes, the panels over
# $__rate_interval (TTFT/TPOT p99 and p50, the TTFT-under-SLO share, sparse preemption counters) and even
# Output tokens/s over $__rate_interval differ by 10-70% between the backends. Strict: the first dashboard
# that agrees turns this into a failure, so the mark comes off with the window change that fixes it.
PANELS_DISAGREE = pytest.mark.xfail(strict=True, reason="$__rate_interval panels differ >10% across backends")


@PANELS_DISAGREE
@pytest.mark.parametrize("name", sorted(simulated_engines(load_all())) + ["fleet"])
def test_every_panel_and_annotation_agrees_on_both_backends(backends, default_build, name):
    prom, vm, windows = backends
    w = windows["kv-collapse"]
    results = [evaluate_dashboard(default_build[name], server, w.start, w.end, STEP_S) for server in (prom, vm)]
    problems = []
    for pa, pb in zip(results[0].panels, results[1].panels):
        for ta, tb in zip(pa.targets, pb.targets):
            found = disagreements(_points(ta.series), _points(tb.series), PANEL_TOLERANCE, w.start + WARM_UP_S)
            problems += [f"{pa.row} / {pa.title} [{ta.ref_id}] {ta.expr[:120]}: {p}" for p in found[:2]]
    for ann in results[0].annotations:
        if "ALERTS" in next(a["target"]["expr"] for a in default_build[name]["annotations"]["list"]
                            if a.get("name") == ann):
            continue    # both replays write ALERTS into VictoriaMetrics only: compared by the alert test
        spans = [sorted((round(r.start), round(r.end)) for r in res.annotations[ann]) for res in results]
        starts = [min((s for s, _ in x), default=None) for x in spans]
        if (starts[0] is None) != (starts[1] is None) or (starts[0] and abs(starts[0] - starts[1]) > STEP_S):
            problems.append(f"annotation {ann}: first region at {starts[0]} vs {starts[1]}")
    assert any(t.has_data for p in results[0].panels for t in p.targets)
    assert not problems, "\n".join(problems[:20])


@pytest.mark.xfail(strict=True, reason="measured: 5m rates ~5% apart (Prometheus extrapolates, MetricsQL "
                   "reads the sample before the window); the 1h-median baseline up to 4x apart after warm-up")
def test_recorded_series_agree_on_both_backends(backends):
    prom, vm, windows = backends
    problems, compared = [], 0
    for model in (build_rules(load_engine(e), vmalert_config()) for e in RULE_ENGINES):
        for rule in (r for g in model["groups"] for r in g["rules"] if "record" in r):
            for w in windows.values():
                query = f'{rule["record"]}{{llm_engine="{rule["labels"]["llm_engine"]}"}}'
                a, b = (_points_raw(s.query_range(query, w.start, w.end, STEP_S)) for s in (prom, vm))
                compared += bool(a)
                problems += [f"{w.name} {rule['record']}: {p}"
                             for p in disagreements(a, b, RECORDED_TOLERANCE, w.start + WARM_UP_S)[:2]]
    assert compared > 20
    assert not problems, "\n".join(problems[:20])


def _points_raw(result: list[dict]) -> dict[tuple, dict[float, float]]:
    return {tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__")):
            {float(t): float(v) for t, v in r["values"]} for r in result}


def _first_firings(vm, backend: str, w) -> dict[tuple, float]:
    result = vm.query_range(f'ALERTS{{alertstate="firing", llmdash_backend="{backend}"}}', w.start, w.end, STEP_S)
    return {(r["metric"]["alertname"], r["metric"]["llm_engine"], r["metric"].get("instance", "")):
            min(float(t) for t, _ in r["values"]) for r in result}


def test_alerts_fire_within_a_minute_of_each_other_on_both_backends(backends):
    _prom, vm, windows = backends
    collapse = [_first_firings(vm, b, windows["kv-collapse"]) for b in ("prometheus", "victoriametrics")]
    assert set(collapse[0]) == set(collapse[1])
    pages = {k for k in collapse[0] if k[0] == Alert.PREEMPTIONS_HIGH}
    assert {k[1] for k in pages} == set(RULE_ENGINES), "the page fired on every engine of the collapse"
    # the page within a minute; the static TTFT p99 warning (a quantile over a 5m rate of a sparse tail, the
    # disagreement the panel test measures) and the divergence warning (it waits out the page's pending state, and
    # its 1h baseline is where the backends differ most: SGLang seed 1 measured 2 minutes apart) within two
    allowed = {Alert.PREEMPTIONS_HIGH: STEP_S}
    late = {k: (collapse[0][k] - collapse[1][k]) / 60 for k in collapse[0]
            if abs(collapse[0][k] - collapse[1][k]) > allowed.get(k[0], 2 * STEP_S)}
    assert not late, f"minutes Prometheus fired after VictoriaMetrics: {late}"
    steady = [_first_firings(vm, b, windows["steady"]) for b in ("prometheus", "victoriametrics")]
    assert steady == [{}, {}], f"alerts on steady traffic: {steady}"


def test_every_rule_file_loads_in_vmalert_with_the_vmalert_target_only(tmp_path):
    from llmdash.rules.generate import render_rules

    refused = []
    for engine in sorted(load_all()):
        spec = load_engine(engine)
        for config, must_load in ((vmalert_config(), True), (Config(), False)):
            path = tmp_path / f"{engine}.{config.rules.target}.yaml"
            path.write_text(render_rules(build_rules(spec, config)))
            reason = vmalert_check(path)
            if must_load and reason:
                refused.append(f"{engine}: {reason}")
            if not must_load and spec.has("preemptions") and reason is None:
                refused.append(f"{engine}: the Prometheus file (keep_firing_for) unexpectedly loads in vmalert 1.79")
    assert not refused, "\n".join(refused)
