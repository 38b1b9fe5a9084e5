"""VictoriaMetrics + vmalert as a second backend: the same panels, recorded series and alerts as Prometheus.

One Prometheus and one VictoriaMetrics per module hold the same simulated data, scraped with realistic
phases (each process 0.5-14.5 s into the interval, seeded), where `rate()` extrapolation and MetricsQL's
previous-sample rule part ways. Every engine's dashboards are compared on the collapse; the rules are
replayed on both (promtool for Prometheus, vmalert's replay mode for VictoriaMetrics) for two engines
of different preemption flavours, on the collapse and on steady traffic. All of it on each stack
(Prometheus 2.42 with VictoriaMetrics 1.79; 3.16 with 1.151); on 1.151 vmalert also replays the default
(Prometheus) rule files, `keep_firing_for` and all, and must page where the vmalert target pages.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from concurrent.futures import ProcessPoolExecutor

import pytest

from llmdash.build import build_dashboards
from llmdash.config import Config, Histograms
from llmdash.engines.catalog import load_all, load_engine
from llmdash.lab import replay
from llmdash.lab.emitters import simulated_engines
from llmdash.lab.evaluate import evaluate_dashboard
from llmdash.lab.promserver import PrometheusServer, plan_windows
from llmdash.lab.scenarios import build, write_openmetrics
from llmdash.lab.vmserver import VictoriaMetricsServer, vmalert_check
from llmdash.rules.generate import build_rules
from llmdash.vocabulary import ALERTS_SERIES, Alert
from tests.support.stacks import OLDEST

pytestmark = pytest.mark.e2e

RULE_ENGINES = ("vllm", "sglang")       # a counter-preemption engine and a retraction engine
PANEL_TOLERANCE = 0.10
RECORDED_TOLERANCE = 0.05
WARM_UP_S = 3600 + 15 * 60 + 5 * 60   # the divergence baseline: its trailing hour, its offset, one 5m rate
STEP_S = 60.0
SHIFT_S = 15.0                # one scrape interval


def _simulate(job: tuple[str, float, str, tuple[str, ...]]) -> str:
    name, start, path, engines = job
    with open(path, "w") as out:
        write_openmetrics(build(name), {e: load_engine(e) for e in engines}, 1, start, out, phased=True)
        out.write("# EOF\n")
    return path


# The Prometheus target's files as vmalert can load them: classic histograms only (MetricsQL has no
# histogram_count; with native histograms read, the default files are refused by every vmalert)
PROMETHEUS_FILE = Config(histograms=Histograms(native=False))


def vmalert_config() -> Config:
    config = Config()
    return dataclasses.replace(config, rules=dataclasses.replace(config.rules, target="vmalert"))


def keeps_firing_for(stack) -> bool:
    """Whether the stack's vmalert loads `keep_firing_for` (from 1.92: Debian's 1.79 does not, 1.151 does)."""
    return stack != OLDEST


@pytest.fixture(scope="module")
def backends(tmp_path_factory, stack):
    """(prometheus, victoriametrics, windows) of one stack: both loaded from the same phased scrapes,
    recording rules of RULE_ENGINES replayed on each, and their alerts replayed by vmalert reading each
    backend; where vmalert takes `keep_firing_for`, also the default rule files' alerts on VictoriaMetrics."""
    engines = tuple(simulated_engines(load_all()))
    windows = plan_windows(["kv-collapse", "steady"])
    tmp = tmp_path_factory.mktemp("backends")
    jobs = [("kv-collapse", windows["kv-collapse"].start, str(tmp / "collapse.om"), engines),
            ("steady", windows["steady"].start, str(tmp / "steady.om"), RULE_ENGINES)]
    prom, vm = PrometheusServer(stack=stack), VictoriaMetricsServer(stack=stack)
    try:
        vm.start()
        with ProcessPoolExecutor(max_workers=2) as pool:
            for path in pool.map(_simulate, jobs):
                prom.backfill(path)
                vm.backfill(path)
        prom.start()
        models = [build_rules(load_engine(e), vmalert_config()) for e in RULE_ENGINES]
        # The alerts of both groups replayed as one call per engine: the replay writes `ALERTS` into
        # VictoriaMetrics only, so a later call's rule reading `ALERTS` (the chronic warning's healed-page
        # clause reads the page's) would see it from one datasource and not the other.
        alerting = [one_group(m) for m in models]
        for w in windows.values():
            phases = replay.prometheus_record(prom, models, w.start, w.end)
            replay.vmalert_record(vm, models, w.start, w.end, phases)
            replay.vmalert_alerts(vm, vm, alerting, w.start, w.end, {"llmdash_backend": "victoriametrics"}, phases)
            replay.vmalert_alerts(prom, vm, alerting, w.start, w.end, {"llmdash_backend": "prometheus"}, phases)
            if keeps_firing_for(stack):
                replay.vmalert_alerts(vm, vm, [one_group(build_rules(load_engine(e), PROMETHEUS_FILE))
                                               for e in RULE_ENGINES],
                                      w.start, w.end, {"llmdash_backend": "prometheus-file"}, phases)
        yield prom, vm, windows
    finally:
        prom.stop()
        vm.stop()


def one_group(model: dict) -> dict:
    """The rule file's groups as one, under the first's name (and so at its phase)."""
    first = model["groups"][0]
    return {"groups": [{**first, "rules": [r for g in model["groups"] for r in g["rules"]]}]}


def _points(series, shift: float = 0.0) -> dict[tuple, dict[float, float]]:
    """Label set -> {time: value}, times moved back by `shift` (the query was evaluated `shift` later)."""
    return {tuple(sorted(s.labels.items())): {t - shift: v for t, v in s.points} for s in series}


def compare(a: dict, b: dict, tolerance: float, after: float, a_shifted: tuple[dict, ...] = ()) -> dict:
    """Label set -> [(time, a's value, b's value, within `tolerance`)] from `after` on, at times both have a
    finite value; None for a series only one backend returns. Within: no further apart than `tolerance` of
    the larger value, with a floor of 1% of the series' largest value (a share of 0.0001 against 0 is not a
    100% difference). `a_shifted`: `a` evaluated one scrape interval earlier and later, keyed by the same
    times; `b` is within if it is within of any of them: MetricsQL's rate counts the sample just before the
    window where Prometheus extrapolates over that gap, so the two windows start up to one scrape apart."""
    out: dict = {}
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            out[key] = None
            continue
        common = [t for t in a[key] if t in b[key] and t >= after
                  and all(math.isfinite(x) for x in (a[key][t], b[key][t]))]
        scale = max((abs(v) for t in common for v in (a[key][t], b[key][t])), default=0.0)
        out[key] = [(t, a[key][t], b[key][t], any(
            abs(x - b[key][t]) <= max(tolerance * max(abs(x), abs(b[key][t])), 0.01 * scale, 1e-9)
            for x in [a[key][t]] + [s[key][t] for s in a_shifted if t in s.get(key, {})])) for t in common]
    return out


def disagreements(compared: dict, after: float, share: float = 1.0) -> list[str]:
    """The series within tolerance at fewer than `share` of their compared minutes (1.0: at every one), with
    their first minute out; and the series only one backend returns."""
    out = []
    for key, points in compared.items():
        if points is None:
            out.append(f"{dict(key)} on one backend only")
            continue
        bad = [p for p in points if not p[3]]
        if points and len(bad) > (1 - share) * len(points) + 1e-9:
            t, x, y, _ = bad[0]
            out.append(f"{dict(key)}: {len(bad)}/{len(points)} minutes out, first at +{(t - after) / 60:.0f} min: "
                       f"{x:.4g} vs {y:.4g}")
    return out


def _reads_alerts(expr: str) -> bool:
    return ALERTS_SERIES in expr   # both replays write ALERTS into VictoriaMetrics only: the alert test compares them


def panel_comparison(backends, dashboard: dict) -> tuple[dict, list[str]]:
    """("row / title [ref] expr" -> compare() of that target; annotation problems) on the kv-collapse."""
    prom, vm, windows = backends
    w = windows["kv-collapse"]
    b = evaluate_dashboard(dashboard, vm, w.start, w.end, STEP_S)
    a, *shifted = (evaluate_dashboard(dashboard, prom, w.start + d, w.end + d, STEP_S) for d in (0, -SHIFT_S, SHIFT_S))
    assert any(t.has_data for p in a.panels for t in p.targets)
    targets = {}
    for i, (pa, pb) in enumerate(zip(a.panels, b.panels)):
        for j, (ta, tb) in enumerate(zip(pa.targets, pb.targets)):
            if not _reads_alerts(ta.expr):
                near = tuple(_points(s.panels[i].targets[j].series, d) for s, d in zip(shifted, (-SHIFT_S, SHIFT_S)))
                targets[f"{pa.row} / {pa.title} [{ta.ref_id}] {ta.expr[:100]}"] = compare(
                    _points(ta.series), _points(tb.series), PANEL_TOLERANCE, w.start + WARM_UP_S, near)
    problems = []
    for ann in a.annotations:
        if _reads_alerts(next(x["target"]["expr"] for x in dashboard["annotations"]["list"] if x.get("name") == ann)):
            continue
        spans = [sorted((round(r.start), round(r.end)) for r in res.annotations[ann]) for res in (a, b)]
        starts = [min((s for s, _ in x), default=None) for x in spans]
        if (starts[0] is None) != (starts[1] is None) or (starts[0] and abs(starts[0] - starts[1]) > STEP_S):
            problems.append(f"annotation {ann}: first region at {starts[0]} vs {starts[1]}")
    return targets, problems


DASHBOARDS = sorted(simulated_engines(load_all())) + ["fleet"]
CURRENT_RECORDED = pytest.mark.xfail(strict=True, reason="measured 2026-12-01, not yet explained: on Prometheus 3.16 "
                                     "beside VictoriaMetrics 1.151 recorded series agree within 5% at fewer minutes "
                                     "than on 2.42 beside 1.79 (a 5m TTFT bucket rate 9/26 minutes out, 1.77 vs "
                                     "1.88), and the fleet's recorded preemption-share table with them")


@pytest.fixture(scope="module")
def compared_panels(backends):
    """name -> panel_comparison of that dashboard, computed once for the module's tests: as built for dashboards on
    VictoriaMetrics (`histograms.native: false`: MetricsQL has no histogram_count)."""
    dashboards = build_dashboards(Config(histograms=Histograms(native=False)))
    return functools.cache(lambda name: panel_comparison(backends, dashboards[name]))


@pytest.mark.parametrize("name", DASHBOARDS)
def test_every_panel_and_annotation_agrees_on_both_backends_nearly_always(backends, compared_panels, name, stack,
                                                                         request):
    """Every panel target within 10% on both backends at 85% of the collapse's minutes after warm-up or more
    (measured: 88% for the worst, the TTFT median line), and every annotation's first region in the same
    minute. With the panels over `$__rate_interval` vLLM's TTFT p99 tile read 209 s on one backend and
    0.25 s on the other, and 8 of the 11 dashboards failed this (all but the fleet's recorded panels and the
    two engines without a TTFT histogram, TGI and llama.cpp)."""
    if name == "fleet" and keeps_firing_for(stack):
        request.applymarker(CURRENT_RECORDED)
    targets, problems = compared_panels(name)
    w = backends[2]["kv-collapse"]
    problems += [f"{t}: {p}" for t, c in targets.items() for p in disagreements(c, w.start + WARM_UP_S, 0.85)[:1]]
    assert not problems, "\n".join(problems[:20])


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="measured (issue 21): at the collapse's steepest minutes the TTFT median "
                   "line differs by up to a third (1.28 s vs 1.93 s as TTFT leaves one mode) and a few panels by "
                   "10-25%; one scrape of window is worth that much there")
@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_every_panel_agrees_on_both_backends_at_every_minute(backends, compared_panels, name):
    targets, _ = compared_panels(name)
    w = backends[2]["kv-collapse"]
    problems = [f"{t}: {p}" for t, c in targets.items() for p in disagreements(c, w.start + WARM_UP_S)[:1]]
    assert not problems, "\n".join(problems[:20])


def recorded_comparison(backends) -> dict:
    """"window record" -> compare() of that recorded series on both backends, for every recording rule."""
    prom, vm, windows = backends
    out = {}
    for model in (build_rules(load_engine(e), vmalert_config()) for e in RULE_ENGINES):
        for rule in (r for g in model["groups"] for r in g["rules"] if "record" in r):
            for w in windows.values():
                query = f'{rule["record"]}{{llm_engine="{rule["labels"]["llm_engine"]}"}}'
                a, b = (_points_raw(s.query_range(query, w.start, w.end, STEP_S)) for s in (prom, vm))
                if a or b:
                    out[f"{w.name} {rule['labels']['llm_engine']} {rule['record']}"] = compare(
                        a, b, RECORDED_TOLERANCE, w.start + WARM_UP_S)
    return out


@pytest.fixture(scope="module")
def compared_recordings(backends):
    """recorded_comparison, computed once for the module's tests."""
    return functools.cache(lambda: recorded_comparison(backends))


def test_recorded_series_agree_on_both_backends_nearly_always(backends, compared_recordings, stack, request):
    """Every recorded series within 5% on both backends at 70% of the minutes after warm-up or more (measured:
    73-77% for the worst over runs: the page's 2m shares and transient buckets), on the same evaluation
    instants: vmalert replays at Prometheus's phase. (Before the replays shared a phase, a recorded gauge
    differed by 40% at the same minute: one backend had evaluated 37 s earlier.)"""
    if keeps_firing_for(stack):
        request.applymarker(CURRENT_RECORDED)
    compared = compared_recordings()
    assert len(compared) > 20
    after = backends[2]["kv-collapse"].start + WARM_UP_S
    problems = [f"{name}: {p}" for name, c in compared.items() for p in disagreements(c, after, 0.70)[:1]]
    assert not problems, "\n".join(problems[:20])


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="measured (issue 21): in the collapse's transients a recorded 5m bucket "
                   "rate differs by up to 2x for a minute (a bucket emptying out) and the page's 2m rates and shares "
                   "by 10-30%: MetricsQL counts the sample before the window, Prometheus extrapolates over it")
def test_recorded_series_agree_on_both_backends_at_every_minute(backends, compared_recordings):
    compared = compared_recordings()
    after = backends[2]["kv-collapse"].start + WARM_UP_S
    problems = [f"{name}: {p}" for name, c in compared.items() for p in disagreements(c, after)[:1]]
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
    late = {k: (collapse[0][k] - collapse[1][k]) / 60 for k in collapse[0]
            if abs(collapse[0][k] - collapse[1][k]) > STEP_S}
    assert not late, f"minutes Prometheus fired after VictoriaMetrics: {late}"
    steady = [_first_firings(vm, b, windows["steady"]) for b in ("prometheus", "victoriametrics")]
    assert steady == [{}, {}], f"alerts on steady traffic: {steady}"


@pytest.mark.parametrize("stack", ["current"], indirect=True)   # 1.79 refuses the files: the next test
def test_the_default_rule_files_page_on_vmalert_1_151_where_the_vmalert_target_does(backends, stack):
    """vmalert 1.151 evaluates the Prometheus rule files as they are (`keep_firing_for` on the page): every alert
    of the vmalert target fires for the same series, the page within one evaluation (1 minute) of the vmalert
    target's; none on steady traffic. (Measured, not yet explained: in this replay the Prometheus file's
    divergence and TTFT warnings fire 2-7 minutes after the vmalert file's.)"""
    assert keeps_firing_for(stack)
    _prom, vm, windows = backends
    target, default = (_first_firings(vm, b, windows["kv-collapse"]) for b in ("victoriametrics", "prometheus-file"))
    # the chronic warning aside: test_the_chronic_warning_after_a_healed_page_on_vmalert_1_151 below
    chronic = {k for k in set(default) | set(target) if k[0] == Alert.PREEMPTIONS_CHRONIC}
    assert set(default) - chronic == set(target) - chronic
    pages = {k for k in target if k[0] == Alert.PREEMPTIONS_HIGH}
    assert {k[1] for k in pages} == set(RULE_ENGINES)
    late = {k: (default[k] - target[k]) / 60 for k in pages if abs(default[k] - target[k]) > STEP_S}
    assert not late, f"minutes the Prometheus file paged after the vmalert file: {late}"
    assert _first_firings(vm, "prometheus-file", windows["steady"]) == {}


@pytest.mark.parametrize("stack", ["current"], indirect=True)   # 1.79 refuses the default files
@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "measured on vmalert 1.151, not yet explained: replaying the vmalert-target file, LLMServingPreemptionsChronic "
    "fires for the paged vLLM and SGLang instances after the page heals, while the default file (the same chronic "
    "expression, which leaves out a unit whose page fired within the chronic window by reading ALERTS) stays "
    "silent, as Prometheus does; the two files differ in the page, so the ALERTS each replay writes differ"))
def test_the_chronic_warning_after_a_healed_page_on_vmalert_1_151(backends, stack):
    """The chronic warning of both files, on the collapse whose page heals: the same (none) on either file."""
    _prom, vm, windows = backends
    target, default = (_first_firings(vm, b, windows["kv-collapse"]) for b in ("victoriametrics", "prometheus-file"))
    chronic = {k for k in set(default) | set(target) if k[0] == Alert.PREEMPTIONS_CHRONIC}
    assert {k for k in target if k in chronic} == {k for k in default if k in chronic}


def test_every_rule_file_loads_in_vmalert_as_its_version_allows(tmp_path, stack):
    """vmalert -dryRun on every engine's files: the vmalert target loads everywhere; the Prometheus target's
    `keep_firing_for` (every engine with preemptions) is refused by 1.79 and loads on 1.151."""
    from llmdash.rules.generate import render_rules

    refused = []
    for engine in sorted(load_all()):
        spec = load_engine(engine)
        for config, must_load in ((vmalert_config(), True), (PROMETHEUS_FILE, keeps_firing_for(stack))):
            path = tmp_path / f"{engine}.{config.rules.target}.yaml"
            path.write_text(render_rules(build_rules(spec, config)))
            reason = vmalert_check(path, stack)
            if must_load and reason:
                refused.append(f"{engine}: {reason}")
            if not must_load and spec.has("preemptions") and reason is None:
                refused.append(f"{engine}: the Prometheus file (keep_firing_for) unexpectedly loads in vmalert 1.79")
    assert not refused, "\n".join(refused)
