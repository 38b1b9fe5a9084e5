"""A fleet half converted to native histograms gives the same answers as on classic histograms (Prometheus 3.16).

Prometheus 3 can store a scraped classic histogram as one native histogram with custom buckets (NHCB) under its
base name (`convert_classic_histograms_to_nhcb`), dropping the `_bucket`/`_count`/`_sum` series unless
`always_scrape_classic_histograms` is set too. The simulated KV-cache collapse, served by a model with two replicas
(the first collapses) beside a steady second model, is stored twice in one real Prometheus 3.16: backfilled as
the exporters write it (the classic reference), and, later, scraped by that Prometheus from the simulator's
OpenMetrics text with the collapsing replica converted (classic series dropped), the healthy one classic and the
second model's replica converted with its classic series kept. Every panel target, annotation and rule
expression (recording, alerting and the SLO SLIs of a TTFT and a per-token objective), evaluated over each copy,
must give the same series, point for point. On classic-only queries the converted replica is missing from every
latency answer of the first model, so the comparison fails (`test_the_copy_is_mixed` shows the copy is).
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time

import pytest

from llmdash.build import build_dashboards, build_rule_files
from llmdash.config import Config, Divergence, Levels, Objective, Slo, Thresholds
from llmdash.durations import seconds
from llmdash.engines.catalog import load_engine
from llmdash.lab import replay
from llmdash.lab.evaluate import evaluate_dashboard
from llmdash.lab.scenarios import PRIMARY, SECONDARY, Replica, Traffic, build, timed_scrapes
from llmdash.panels.promql import escape, prometheus3_float
from llmdash.panels.recorded import SLO_BLOCK
from llmdash.vocabulary import Alert
from tests.e2e.test_prometheus3_e2e import range_series
from tests.support.prometheus3 import Prometheus3, Replay

pytestmark = pytest.mark.e2e

ENGINES = ("vllm", "sglang")
STEP_S = 60.0
JOB = "llmdash-sim"
# A scrape may not write a sample older than an hour before the newest one (the head's appendable window) nor more
# than 10 minutes into the future, so the scraped copy spans less than 70 minutes: a shorter scenario, and a
# divergence baseline that fits in it.
TRAFFIC = Traffic(steady_min=35, after_min=25)
AHEAD_S = 8 * 60      # how far past the wall clock the scraped copy ends, at most
# The SLO's day-and-longer windows add up its recording per block (SLO_BLOCK, an hour) at whole blocks (`[…:1h]`
# subqueries), and the window is one hour long: its whole hour must come this long after it starts, once that
# recording has a sample (promtool evaluates a group up to a minute in), or those windows answer nothing. A window
# that starts on the hour (one run in 60, by the wall clock) did that.
FIRST_HOUR_S = 5 * 60
# how long before it the reference lies: whole days (every subquery step stays aligned alike), longer than the
# longest window a rule reads (the 30-day error budget), so neither copy's windows reach the other
REFERENCE_BEFORE_S = 32 * 86400
# an ITL threshold the collapse crosses (its model's ITL p99 reaches about 0.14 s), so the ITL alert is compared firing
CONFIG = Config(engines=ENGINES, divergence=Divergence(baseline_window="20m", baseline_offset="10m"),
                thresholds=Thresholds(itl_p99_seconds=Levels(0.05, 0.08)),
                slo=Slo(objectives=(Objective(name="ttft", target_seconds=1.0),
                                    Objective(name="token_latency", target_seconds=0.1))))
# how each replica is stored in the scraped copy: (convert_classic_histograms_to_nhcb, always_scrape_classic_histograms)
CONVERTED, CLASSIC, BOTH = (True, False), (False, False), (True, True)
FORMS = {f"{PRIMARY}-a": CONVERTED, f"{PRIMARY}-b": CLASSIC, SECONDARY: BOTH}


def fleet():
    """kv-collapse with the first model served by two replicas: `a` takes the collapsing traffic, `b` steady."""
    collapse, steady = build("kv-collapse", TRAFFIC), build("steady", TRAFFIC)
    first = dataclasses.replace(collapse.models[0], replicas=(Replica(name="a", load=collapse.models[0].load),
                                                              Replica(name="b", load=steady.models[0].load)))
    return dataclasses.replace(collapse, models=(first,) + collapse.models[1:])


def form(target: str) -> tuple[bool, bool]:
    return next(f for replica, f in FORMS.items() if f'-{replica}:' in target or target.endswith(f"-{replica}"))


def scraped_start(now: float, duration_s: float) -> float:
    """Where the scraped copy starts: on a minute, ending AHEAD_S past `now` or up to FIRST_HOUR_S sooner, so that
    its first whole hour lies at least FIRST_HOUR_S into it."""
    start = now // 60 * 60 + AHEAD_S - duration_s
    return start - max(0.0, FIRST_HOUR_S - (-start) % seconds(SLO_BLOCK))


def test_the_scraped_copy_holds_a_recorded_whole_hour():
    """At every minute of the wall clock's hour the one-hour window starts on a minute, holds a whole hour 5 minutes
    or more after its start, and ends 3 to 8 minutes after the clock's minute."""
    for minute in range(60):
        clock = 1_800_000_000 // 3600 * 3600 + minute * 60
        start = scraped_start(clock + 17.5, 3600)
        assert start % 60 == 0 and clock + 180 <= start + 3600 <= clock + 480, (minute, start - clock)
        assert any(t % 3600 == 0 for t in range(int(start) + 300, int(start) + 3601, 60)), (minute, start - clock)


@pytest.fixture(scope="module")
def stores():
    """(server, {"classic": window, "mixed": window}, rule files, instance label of each replica)."""
    scenario = fleet()
    specs = {e: load_engine(e) for e in ENGINES}
    mixed = scraped_start(time.time(), scenario.duration_s)
    classic = mixed - REFERENCE_BEFORE_S
    targets: dict[str, list[tuple[float, str]]] = {}
    server = Prometheus3(scrape_interval="100ms")
    try:
        reference = server.dir / "classic.om"
        declared: set[str] = set()
        with open(reference, "w") as out:
            for _t, batch in timed_scrapes(scenario, specs, 1):
                for at, _engine, _model, emitter in batch:
                    out.write("\n".join(emitter.render(emitter.target, classic + round(at, 3), declared)) + "\n")
                    text = "\n".join(emitter.render(emitter.target, mixed + round(at, 3), set()))
                    targets.setdefault(emitter.target, []).append((mixed + round(at, 3), text + "\n# EOF\n"))
            out.write("# EOF\n")
        server.backfill(reference)
        names = sorted(targets)
        instances = [dict(p.split("=", 1) for p in t.replace('"', "").split(","))["instance"] for t in names]
        # a series each scrape of the target has, its exposition line read as a selector
        marks = [next(line for line in targets[t][0][1].splitlines() if not line.startswith("#")).rsplit(" ", 2)[0]
                 for t in names]

        def held(i: int, k: int) -> bool:
            at = targets[names[i]][k][0]
            found = server.query(f"timestamp({marks[i]})", at)
            return bool(found) and math.isclose(float(found[0]["value"][1]), at, abs_tol=1e-3)
        with Replay([[text for _, text in targets[t]] for t in names], held) as fake:
            server.config["scrape_configs"] = [{
                "job_name": JOB, "honor_labels": True, "scrape_interval": "100ms", "scrape_timeout": "100ms",
                "static_configs": [{"targets": [f"127.0.0.1:{fake.port}"], "labels": {
                    "__metrics_path__": f"/metrics/{i}",
                    "__convert_classic_histograms_to_nhcb__": str(form(instance)[0]).lower(),
                    "__always_scrape_classic_histograms__": str(form(instance)[1]).lower()}}
                    for i, instance in enumerate(instances)]}]
            server.start()
            assert fake.done.wait(600), f"scraped {fake.serving} of {[len(targets[t]) for t in names]} scrapes"
        server.persist()
        rules = build_rule_files(CONFIG)
        every = {"groups": [group for model in rules.values() for group in model["groups"]]}
        windows = {"classic": (classic, classic + scenario.duration_s), "mixed": (mixed, mixed + scenario.duration_s)}
        for window in windows.values():
            replay.prometheus_record(server, [every], *window)
        yield server, windows, rules, instances
    finally:
        server.stop()


def relative(series, start: float) -> dict:
    """Label set -> [(seconds into the window, value)]; a kept `le` is compared by its Prometheus 3 text."""
    return {tuple(sorted((k, prometheus3_float(float(v)) if k == "le" else v) for k, v in s.labels.items())):
            [(round(t - start), v) for t, v in s.points] for s in series}


# Prometheus extrapolates a rate toward the zero point of each classic series (each bucket, `_sum`) but of a native
# histogram's count (promql/functions.go, extrapolatedRate), so where a bucket or `_sum` starts from about 0 inside
# the window (a series' first window, the first preemptions) the two rates differ: by up to 0.07 % in a quantile, 5 %
# in preemptions per request on this collapse. Everywhere else they agree to rounding.
ROUNDING = 1e-9
EXTRAPOLATION = 0.10
EXACT_SHARE = 0.99


def compare(a: dict, b: dict) -> tuple[bool, int, int]:
    """(same series, points and timestamps, each value within EXTRAPOLATION; points; points within ROUNDING)."""
    if a.keys() != b.keys() or any(len(a[k]) != len(b[k]) for k in a):
        return False, 0, 0
    pairs = [(pa, pb) for k in a for pa, pb in zip(a[k], b[k])]
    if any(ta != tb or not math.isclose(va, vb, rel_tol=EXTRAPOLATION, abs_tol=1e-9) for (ta, va), (tb, vb) in pairs):
        return False, len(pairs), 0
    exact = sum(math.isclose(va, vb, rel_tol=ROUNDING, abs_tol=1e-12) for (_, va), (_, vb) in pairs)
    return True, len(pairs), exact


def differences(compared: dict[str, tuple[bool, int, int]]) -> list[str]:
    """What fails: an answer that differs beyond the extrapolation bound, or too few points equal to rounding."""
    differ = [name for name, (ok, _, _) in compared.items() if not ok]
    points = sum(n for _, n, _ in compared.values())
    exact = sum(e for _, _, e in compared.values())
    if not differ and exact < EXACT_SHARE * points:
        differ.append(f"only {exact} of {points} points equal to rounding")
    return differ


def test_the_copy_is_mixed(stores):
    """The scraped copy holds the collapsing replica as a native histogram only, the healthy one as classic series
    only and the second model's replica both ways: what the answers below are compared over."""
    server, windows, _, instances = stores
    start, end = windows["mixed"]
    ttft = "vllm:time_to_first_token_seconds"
    stored = {}
    for instance in (i for i in instances if i.startswith("vllm-")):
        selector = f'{{instance="{escape(instance)}"}}'
        stored[form(instance)] = (bool(server.query_range(f"histogram_count({ttft}{selector})", start, end, STEP_S)),
                                  bool(server.query_range(f"{ttft}_count{selector}", start, end, STEP_S)))
    assert stored == {CONVERTED: (True, False), CLASSIC: (False, True), BOTH: (True, True)}


@pytest.mark.parametrize("engine", ENGINES)
def test_every_panel_and_annotation_gives_the_same_answer(stores, engine):
    server, windows, _, _ = stores
    dashboard = build_dashboards(CONFIG, [engine])[engine]
    results = {name: evaluate_dashboard(dashboard, server, *window, STEP_S) for name, window in windows.items()}
    a, b = results["classic"], results["mixed"]
    differ = differences({f"{pa.row} / {pa.title} / {ta.ref_id}: {ta.expr[:300]}": compare(
        relative(ta.series, a.start), relative(tb.series, b.start))
        for pa, pb in zip(a.panels, b.panels) for ta, tb in zip(pa.targets, pb.targets)})
    assert not differ, "differs on a fleet half on native histograms:\n" + "\n".join(differ)
    assert any(t.has_data for p in b.panels for t in p.targets)
    shifted = {name: [(r.labels, r.start - b.start, r.end - b.start) for r in regions]
               for name, regions in b.annotations.items()}
    assert shifted == {name: [(r.labels, r.start - a.start, r.end - a.start) for r in regions]
                       for name, regions in a.annotations.items()}
    assert any(name.startswith("Divergence") and regions for name, regions in a.annotations.items()), \
        "the collapse marks no divergence: the comparison would prove little"


@pytest.mark.parametrize("engine", ENGINES)
def test_every_rule_gives_the_same_answer(stores, engine):
    """Every recording rule (the quantiles, the per-instance buckets the straggler warning reads, the SLIs), every
    alert (TTFT, ITL, divergence, straggler, the page, the burn rates) gives the same answer on both copies; the
    alerts the collapse raises are among them, so the comparison is of answers, not of silence."""
    server, windows, rules, _ = stores
    compared, answered = {}, {}
    for rule in (rule for group in rules[engine]["groups"] for rule in group["rules"]):
        name = rule.get("record") or rule["alert"]
        got = {store: relative(range_series(server, rule["expr"], *window), window[0])
               for store, window in windows.items()}
        compared[f"{name} {rule.get('labels', {})}: {rule['expr'][:300]}"] = compare(got["classic"], got["mixed"])
        answered[name] = answered.get(name, False) or bool(got["mixed"])
    differ = differences(compared)
    assert not differ, "differs on a fleet half on native histograms:\n" + "\n".join(differ)
    fired = {a for a in Alert if answered.get(a)}
    assert {Alert.TTFT_HIGH, Alert.ITL_HIGH, Alert.PREEMPTIONS_HIGH, Alert.DIVERGENCE} <= fired, fired
    # two replicas, one collapsing: it is half its model's observations, so never 3x its model's p99
    assert Alert.INSTANCE_LATENCY_HIGH not in fired
    slis = [name for name in answered if ":llm_slo_errors:" in name]
    assert slis and all(answered[name] for name in slis)


def doctor_report(server, tmp_path, config: str) -> tuple[int, dict]:
    """`llmdash doctor --prometheus` on the store (its last hour: the scraped copy) under `config`."""
    path = tmp_path / "llmdash.yaml"
    path.write_text(config)
    run = subprocess.run([sys.executable, "-m", "llmdash.cli.main", "--config", str(path), "doctor", "--prometheus",
                          server.url, "--format", "json"], capture_output=True, text=True, timeout=600)
    assert run.stdout, run.stderr
    (engine,) = json.loads(run.stdout)["engines"]
    return run.returncode, engine


def test_doctor_names_the_replicas_stored_only_as_native_histograms(stores, tmp_path):
    server, _, _, instances = stores
    code, vllm = doctor_report(server, tmp_path, "engines: [vllm]\n")
    (converted,) = [i for i in instances if i.startswith("vllm-") and form(i) == CONVERTED]
    (note,) = [n for n in vllm["notes"] if n.startswith("stored as native histograms")]
    assert "vllm:time_to_first_token_seconds" in note and "vllm:inter_token_latency_seconds" in note
    assert f"with no classic series on instance {converted}" in note
    assert code == 0 and vllm["empty"] == 0      # the healthy replica's classic series fill every query


def test_doctor_says_which_panels_classic_queries_would_leave_empty(stores, tmp_path):
    """On the converted replica alone (a fleet fully on native histograms): the latency panels and rules read the
    native histograms and have data; classic-only queries (`histograms.native: false`) leave them empty, and the
    doctor says so in both cases."""
    server, _, _, instances = stores
    (converted,) = [i for i in instances if i.startswith("vllm-") and form(i) == CONVERTED]
    scope = f'engines: [vllm]\nselectors: {{instance: "{converted}"}}\n'
    code, native = doctor_report(server, tmp_path, scope + "slo: {objectives: [{name: ttft, target_seconds: 1}]}\n")
    (slo,) = native["slos"]
    assert slo["series"] == "vllm:time_to_first_token_seconds" and slo["found"] and not slo["problems"]
    (note,) = [n for n in native["notes"] if n.startswith("stored as native histograms")]
    assert "read from them, empty on classic series alone: panels " in note
    for title in ("TTFT p99", "ITL p99", "Top instances by ITL p99"):
        assert title in note
    assert "LLMServingTTFTP99High" in note and "LLMServingLatencyThroughputDivergence" in note
    assert code == 0 and native["empty"] == 0
    code, classic = doctor_report(server, tmp_path, scope + "histograms: {native: false}\n")
    (note,) = [n for n in classic["notes"] if n.startswith("stored as native histograms")]
    assert "histograms.native: false reads only the classic series" in note
    empty = {c["title"] for c in classic["checks"] if not c["filled"]}
    assert {"TTFT p99", "ITL p99", "LLMServingTTFTP99High"} <= empty and code == 1
