"""Golden figures of every generated alert: each threshold with its comparison operator, the window it is read
over, `for`, `keep_firing_for`, severity and the labels it groups by, written as literals from the defaults
documented in llmdash.example.yaml and the definitions in issue 27 (the page: preemptions per finished request
>= 3 % over the short window and >= 2 % over the long one), never computed by the code under test.

Read from the built rule files (what `llmdash build` writes to generated/rules/, the default config), and for
the alerts only a config raises, the SLO burn-rate and the log page, from a build with one TTFT objective on
vLLM, one availability objective on TGI and `logs.enabled`. Expressions are parsed (tests/support/promql_ast.py)
so the figures do not depend on how the text is spelled. Each figure is its own test, named by what it pins:
changing one number in the generator fails the one test that names it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache

import promql_parser as pp
import pytest

from llmdash.build import build_rule_files
from llmdash.config import Config, Logs, Objective, Slo
from tests.support.builds import default_rules
from tests.support.promql_ast import (aggregations, comparisons, duration, matchings, parse, ranges, ranges_of,
                                      walk)

PAGE, CHRONIC, DIVERGENCE = "LLMServingPreemptionsHigh", "LLMServingPreemptionsChronic", \
    "LLMServingLatencyThroughputDivergence"
TTFT, ITL, STRAGGLER = "LLMServingTTFTP99High", "LLMServingITLP99High", "LLMServingInstanceLatencyHigh"
MISSING, LOG_PAGE = "LLMServingSignalMissing", "LLMServingLogPreemptionsHigh"
SLO_FAST, SLO_SLOW = "LLMServingSLOBurnRateFast", "LLMServingSLOBurnRateSlow"
SLO_COVERAGE = "LLMServingSLOCoverageLow"

# Which engines carry which alert follows from their catalogs (engines/*.yaml): counted preemptions, a
# paused-requests gauge only, or no preemption signal at all.
COUNTED = ("ray-serve-vllm", "sglang", "vllm")
PAUSED = ("tensorrt-llm-serve", "tensorrt-llm-triton")
UNCOUNTED = ("dynamo", "llama-cpp", "lmdeploy", "nim", "tgi")
ALL = tuple(sorted(COUNTED + PAUSED + UNCOUNTED))
ITL_HISTOGRAM = ("dynamo", "lmdeploy", "nim", "ray-serve-vllm", "sglang", "vllm")
TPOT_ONLY = ("tensorrt-llm-serve", "tgi")             # per-request TPOT stands in for ITL
TOKEN_P99 = tuple(sorted(ITL_HISTOGRAM + TPOT_ONLY))
TTFT_P99 = ("dynamo", "lmdeploy", "nim", "ray-serve-vllm", "sglang", "tensorrt-llm-serve", "vllm")
TTFT_CAPPED = ("tensorrt-llm-triton",)                # its TTFT histogram tops out at the 5 s threshold
LOGGED = ("sglang", "vllm")                           # catalogs with preemption log lines
SLO_ENGINES = ("tgi", "vllm")
# LLMServingSignalMissing watches only signals every supported version exports: tensorrt-llm-serve's catalog has none
WATCHED = tuple(e for e in ALL if e != "tensorrt-llm-serve")

EXTRA = Config(slo=Slo(objectives=(Objective(name="ttft", target_seconds=1.0, objective=0.99, engines=("vllm",)),
                                   Objective(name="availability", objective=0.99, engines=("tgi",)))),
               logs=Logs(enabled=True))
ONLY_WITH_EXTRA = (SLO_FAST, SLO_SLOW, SLO_COVERAGE, LOG_PAGE)



def rules_of(kind: str, engine: str) -> list[dict]:
    """The engine's alerts (or records): the default build's, plus the SLO and log ones of the EXTRA build."""
    mine = [r for g in default_rules()[engine]["groups"] for r in g["rules"] if kind in r]
    extra = [r for g in extra_rules()[engine]["groups"] for r in g["rules"] if kind in r]
    if kind == "alert":
        return mine + [r for r in extra if r["alert"] in ONLY_WITH_EXTRA]
    return mine + [r for r in extra if r["record"] not in {m["record"] for m in mine}]


@cache   # built on first use, not while collecting
def extra_rules() -> dict[str, dict]:
    return build_rule_files(EXTRA)


@cache
def alerts() -> dict[str, list[dict]]:
    """Engine -> every alert it carries."""
    return {engine: rules_of("alert", engine) for engine in default_rules()}


@cache
def records() -> dict[str, dict[str, str]]:
    """Engine -> recorded series name -> its expression."""
    return {engine: {r["record"]: r["expr"] for r in rules_of("record", engine)} for engine in default_rules()}


def alerts_named(name: str) -> dict[str, list[dict]]:
    return {engine: [r for r in rules if r["alert"] == name] for engine, rules in alerts().items()
            if any(r["alert"] == name for r in rules)}


# ---- thresholds and operators --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Figure:
    """The comparisons of `alert` whose series key (promql_ast.Comparison.key) fully matches `key`, on exactly
    `engines`: (operator, number) each, in sorted order."""

    alert: str
    key: str
    expect: tuple[tuple[str, float], ...]
    engines: tuple[str, ...]


FIGURES = {
    # The page: preemptions per finished request over the short window (2m) and the long one (3m), and a floor
    # of preemption events (6 over 2m = 0.05/s).
    "page short-window share >= 3% over 2m": Figure(
        PAGE, r"llm_preemption_share:ratio_rate2m", ((">=", 0.03),), COUNTED),
    "page long-window share >= 2% over 3m": Figure(
        PAGE, r"llm_preemption_share:ratio_rate3m", ((">=", 0.02),), COUNTED),
    "page at least 6 preemptions over 2m (>= 0.05/s)": Figure(
        PAGE, r"llm_preemptions:rate2m", ((">=", 0.05),), COUNTED),
    "paused page: paused >= 50% of 2m": Figure(
        PAGE, r"llm_preemption_share:ratio_rate2m", ((">=", 0.5),), PAUSED),
    "paused page: paused >= 10% of 3m": Figure(
        PAGE, r"llm_preemption_share:ratio_rate3m", ((">=", 0.1),), PAUSED),
    # the chronic share: each unit's recorded 2m preemption and finished-request rates, each averaged over 30m
    "chronic share >= 0.5% over 30m": Figure(
        CHRONIC, r"\S*:llm_preemptions:rate2m\[30m\]\+\S*:llm_requests:rate2m\[30m\]", ((">=", 0.005),), COUNTED),
    # A unit paged within the chronic window warns only if its share at the minutes it was neither pending nor
    # paged (the short-window share less the page's ALERTS) is chronic too: >= 0.5 % (docs/alerts-and-runbooks.md,
    # "A page that healed"); its windows: test_chronic_after_a_page_reads_the_minutes_outside_it.
    "chronic after a page: share outside the paged minutes >= 0.5%": Figure(
        CHRONIC, r"ALERTS\+llm_preemption_share:ratio_rate2m", ((">=", 0.005),), COUNTED),
    # Divergence: latency p99 over 5m >= 2x its baseline (the mean time per token 1.5x where there is no
    # histogram), throughput within ±20 % of its baseline and at least 1 token/s.
    "divergence latency p99 >= 2x baseline": Figure(
        DIVERGENCE, r"llm_(itl|tpot|ttft)_seconds:p99_baseline\+llm_\1_seconds:p99_rate5m", ((">=", 2.0),),
        ("dynamo", "lmdeploy", "nim", "ray-serve-vllm", "sglang", "tensorrt-llm-serve", "tensorrt-llm-triton",
         "tgi", "vllm")),
    "divergence mean time per token >= 1.5x baseline": Figure(
        DIVERGENCE, r"llm_token_latency_seconds:mean_baseline\+llm_token_latency_seconds:mean_rate5m",
        ((">=", 1.5),), ("llama-cpp",)),
    "divergence baselines guarded > 0": Figure(
        DIVERGENCE, r"llm_[a-z_]+:(p99|mean|rate5m)_baseline", ((">", 0.0), (">", 0.0)), ALL),
    "divergence throughput within 20% of baseline (<=)": Figure(
        DIVERGENCE, r"llm_output_tokens:rate5m\+llm_output_tokens:rate5m_baseline", (("<=", 0.2),), ALL),
    "divergence throughput floor >= 1 tok/s": Figure(
        DIVERGENCE, r"llm_output_tokens:rate5m", ((">=", 1.0),), ALL),
    # Static latency warnings: p99 over 5m above the critical level (5 s TTFT, 0.25 s ITL), with 1 token/s.
    "TTFT p99 > 5s": Figure(TTFT, r"llm_ttft_seconds:p99_rate5m", ((">", 5.0),), TTFT_P99),
    "TTFT capped histogram: > 1% above the top bucket": Figure(
        TTFT, r"llm_ttft_seconds_bucket:rate5m", ((">", 0.0), (">", 0.01)), TTFT_CAPPED),
    "TTFT throughput floor >= 1 tok/s": Figure(
        TTFT, r"llm_output_tokens:rate5m", ((">=", 1.0),), tuple(sorted(TTFT_P99 + TTFT_CAPPED))),
    "ITL p99 > 0.25s": Figure(ITL, r"llm_(itl|tpot)_seconds:p99_rate5m", ((">", 0.25),), TOKEN_P99),
    "ITL throughput floor >= 1 tok/s": Figure(ITL, r"llm_output_tokens:rate5m", ((">=", 1.0),), TOKEN_P99),
    # Straggler: one instance's p99 > 3x its model's fleet p99, and > 0.1 s, with >= 1 token/s of its own.
    "straggler own p99 > 3x the model's p99": Figure(
        STRAGGLER, r"llm_(itl|tpot)_seconds_bucket:rate5m vs llm_\1_seconds:p99_rate5m", ((">", 3.0),), TOKEN_P99),
    "straggler own p99 > 0.1s (NaN-guarded >= 0)": Figure(
        STRAGGLER, r"llm_(itl|tpot)_seconds_bucket:rate5m", ((">", 0.1), (">=", 0.0), (">=", 0.0)), TOKEN_P99),
    "straggler own throughput >= 1 tok/s": Figure(
        STRAGGLER, r"llm_output_tokens:rate5m", ((">=", 1.0),), TOKEN_P99),
    # The log page: at least 2 preemptions logged over the short window (2m).
    "log page >= 2 preemptions logged over 2m": Figure(
        LOG_PAGE, r"llmdash_log_preemptions_total\[2m\]", ((">=", 2.0),), LOGGED),
    # SLO burn rates (SRE Workbook table 5-8) on a 99 % objective (a 1 % budget): threshold = burn x 0.01,
    # held 1e-9 of itself lower so a burn of exactly 1x is not lost to float rounding; both windows of a pair.
    "SLO fast pair 14.4x over 1h and 5m (>= 0.144)": Figure(
        SLO_FAST, r"llm_slo_errors:ratio_rate(1h|5m)", ((">=", 0.143999999856),) * 2, SLO_ENGINES),
    "SLO fast pair 6x over 6h and 30m (>= 0.06)": Figure(
        SLO_FAST, r"llm_slo_errors:ratio_rate(6h|30m)", ((">=", 0.05999999994),) * 2, SLO_ENGINES),
    "SLO slow pair 3x over 1d and 2h (>= 0.03)": Figure(
        SLO_SLOW, r"llm_slo_errors:ratio_rate(1d|2h)", ((">=", 0.02999999997),) * 2, SLO_ENGINES),
    "SLO slow pair 1x over 3d and 6h (>= 0.01)": Figure(
        SLO_SLOW, r"llm_slo_errors:ratio_rate(3d|6h)", ((">=", 0.00999999999),) * 2, SLO_ENGINES),
    "SLO fast pairs need >= 5 bad events in 1h / 6h": Figure(
        SLO_FAST, r"llm_slo_errors:increase(1h|6h)", ((">=", 5.0),) * 2, SLO_ENGINES),
    "SLO slow pairs need >= 5 bad events in 1d / 3d": Figure(
        SLO_SLOW, r"llm_slo_errors:increase(1d|3d)", ((">=", 5.0),) * 2, SLO_ENGINES),
    # a replica the SLI cannot count (no target bucket, no failure series) warns: coverage below all replicas
    "SLO coverage below 1": Figure(SLO_COVERAGE, r".*llm_slo_coverage:ratio", (("<", 1.0),), SLO_ENGINES),
}


def matched(figure: Figure) -> dict[str, tuple[tuple[str, float], ...]]:
    out = {}
    for engine, rules in alerts_named(figure.alert).items():
        if engine not in figure.engines:
            continue
        found = sorted((c.op, c.value) for rule in rules for c in comparisons(rule["expr"])
                       if re.fullmatch(figure.key, c.key))
        if found:
            out[engine] = tuple(found)
    return out


@pytest.mark.parametrize("name", FIGURES)
def test_threshold(name):
    figure = FIGURES[name]
    assert matched(figure) == {engine: tuple(sorted(figure.expect)) for engine in figure.engines}


def test_every_comparison_of_every_alert_is_pinned_by_a_figure():
    """A comparison no figure names (a new condition, or a window that moved) must get a figure of its own."""
    loose = [(engine, rule["alert"], c.key) for engine, rules in alerts().items() for rule in rules
             for c in comparisons(rule["expr"])
             if not any(f.alert == rule["alert"] and engine in f.engines and re.fullmatch(f.key, c.key)
                        for f in FIGURES.values())]
    assert loose == []


def test_the_page_windows_on_vmalert():
    """vmalert reads the page's raw-series expressions (no recorded series): the same conditions over 2m, 3m
    (and 2m for the event floor), held keep_firing_for (5m) by `last_over_time(...[5m:])`, since vmalert 1.79
    has no such field. The numbers are the figures above; this pins only the windows and the hold."""
    config = replace(Config(), rules=replace(Config().rules, target="vmalert"))
    for engine, model in build_rule_files(config).items():
        for rule in (r for g in model["groups"] for r in g["rules"] if r.get("alert") == PAGE):
            held = [n for n in walk(parse(rule["expr"])) if isinstance(n, pp.Call) and n.func.name == "last_over_time"]
            assert [(type(n.args[0]).__name__, duration(n.args[0].range)) for n in held] == [("SubqueryExpr", "5m")]
            assert "keep_firing_for" not in rule, engine
            windows = [c.windows for c in comparisons(rule["expr"]) if c.windows]
            once = windows[:len(windows) // 2]      # the condition, then its copy under last_over_time
            assert once == ([("2m",), ("3m",), ("2m",)] if engine in COUNTED else [("2m",), ("3m",)]), engine


def test_chronic_after_a_page_reads_the_minutes_outside_it():
    """The healed-page clause: the page's ALERTS over the chronic window (30m), and the short-window (2m) share
    outside the page sampled each minute over that same 30m (issue 29: a burst the page was about does not become
    a ticket after the page resolved)."""
    for engine, rules in alerts_named(CHRONIC).items():
        expr = parse(rules[0]["expr"])
        paged = [duration(n.range) for n in walk(expr) if isinstance(n, pp.MatrixSelector)
                 and n.vector_selector.name == "ALERTS"]
        outside = [(duration(n.range), duration(n.step)) for n in walk(expr) if isinstance(n, pp.SubqueryExpr)]
        assert (paged, outside) == (["30m"], [("30m", "1m")]), engine


# The preemption counter each engine exports (engines/*.yaml `preemptions`; Ray Serve prefixes vLLM's with ray_vllm,
# in both the underscore and the colon spelling across releases).
PREEMPTION_COUNTERS = {"vllm": {"vllm:num_preemptions_total"}, "sglang": {"sglang:num_retracted_requests_total"},
                       "ray-serve-vllm": {"ray_vllm_num_preemptions_total", "ray_vllm:num_preemptions_total"}}
UNIT_LABELS = {"vllm": ("cluster", "namespace", "model_name", "instance", "engine"),
               "sglang": ("cluster", "namespace", "model_name", "instance", "dp_rank"),
               "ray-serve-vllm": ("cluster", "namespace", "model_name", "instance", "ReplicaId", "engine")}


def test_the_chronic_warning_ends_with_its_units_series():
    """Joined (`and on` the KV-cache unit) with the unit's own preemption counter at the evaluation instant, no
    range: a pod autoscaling deleted stops being scraped, its staleness marker ends the join and the warning
    (docs/alerts-and-runbooks.md "Pods that autoscaling removes")."""
    found = {}
    for engine, rules in alerts_named(CHRONIC).items():
        joins = [n for n in walk(parse(rules[0]["expr"])) if isinstance(n, pp.BinaryExpr) and str(n.op) == "and"
                 and n.modifier is not None and n.modifier.matching is not None]
        found[engine] = [(tuple(j.modifier.matching.labels), {s.name for s in walk(j.rhs)
                                                              if isinstance(s, pp.VectorSelector)}, ranges_of(j.rhs))
                         for j in joins]
    assert found == {engine: [(UNIT_LABELS[engine], PREEMPTION_COUNTERS[engine], set())] for engine in COUNTED}


# ---- for, keep_firing_for, severity, labels -----------------------------------------------------------------

def every(engines, value) -> dict:
    return dict.fromkeys(engines, value)


# alert -> field -> engine -> value; None: the field is absent. One test per (alert, field).
FIELDS = {
    PAGE: {"for": every(COUNTED + PAUSED, "2m"), "keep_firing_for": every(COUNTED + PAUSED, "5m"),
           "severity": every(COUNTED + PAUSED, "critical")},
    CHRONIC: {"for": every(COUNTED, "15m"), "keep_firing_for": every(COUNTED, None),
              "severity": every(COUNTED, "warning")},
    # Where the page exists the divergence warning also waits the page's decision: 3m + 2m short window + 2m for.
    DIVERGENCE: {"for": every(COUNTED + PAUSED, "7m") | every(UNCOUNTED, "3m"),
                 "keep_firing_for": every(ALL, "5m"),
                 "severity": every(COUNTED + PAUSED, "warning") | every(UNCOUNTED, "critical")},
    TTFT: {"for": every(TTFT_P99 + TTFT_CAPPED, "10m"), "keep_firing_for": every(TTFT_P99 + TTFT_CAPPED, "5m"),
           "severity": every(TTFT_P99 + TTFT_CAPPED, "warning")},
    ITL: {"for": every(TOKEN_P99, "10m"), "keep_firing_for": every(TOKEN_P99, "5m"),
          "severity": every(TOKEN_P99, "warning")},
    STRAGGLER: {"for": every(TOKEN_P99, "10m"), "keep_firing_for": every(TOKEN_P99, "5m"),
                "severity": every(TOKEN_P99, "warning")},
    MISSING: {"for": every(WATCHED, "15m"), "keep_firing_for": every(WATCHED, None),
              "severity": every(WATCHED, "warning")},
    LOG_PAGE: {"for": every(LOGGED, "2m"), "keep_firing_for": every(LOGGED, "5m"),
               "severity": every(LOGGED, "critical")},
    SLO_FAST: {"for": every(SLO_ENGINES, "0s"), "keep_firing_for": every(SLO_ENGINES, None),
               "severity": every(SLO_ENGINES, "critical")},
    SLO_SLOW: {"for": every(SLO_ENGINES, "0s"), "keep_firing_for": every(SLO_ENGINES, None),
               "severity": every(SLO_ENGINES, "warning")},
    SLO_COVERAGE: {"for": every(SLO_ENGINES, "15m"), "keep_firing_for": every(SLO_ENGINES, None),
                   "severity": every(SLO_ENGINES, "warning")},
}


def field_of(rule: dict, field: str):
    return rule["labels"].get("severity") if field == "severity" else rule.get(field)


@pytest.mark.parametrize("alert, field", [(a, f) for a, fields in FIELDS.items() for f in fields])
def test_alert_field(alert, field):
    found = {engine: {field_of(r, field) for r in rules} for engine, rules in alerts_named(alert).items()}
    assert found == {engine: {value} for engine, value in FIELDS[alert][field].items()}


def test_every_alert_is_in_the_golden_table():
    assert {r["alert"] for rules in alerts().values() for r in rules} == set(FIELDS)


# Labels an alert adds beyond llm_engine and severity (which tell one alert from another).
EXTRA_LABELS = {MISSING: {"signal"}, SLO_FAST: {"slo"}, SLO_SLOW: {"slo"}, SLO_COVERAGE: {"slo"}}


def test_alert_labels_are_engine_severity_and_only_their_own():
    for engine, rules in alerts().items():
        for rule in rules:
            assert rule["labels"]["llm_engine"] == engine
            assert set(rule["labels"]) == {"llm_engine", "severity", *EXTRA_LABELS.get(rule["alert"], ())}, \
                (engine, rule["alert"])


def test_signal_missing_per_signal():
    found = {engine: sorted(r["labels"]["signal"] for r in rules) for engine, rules in alerts_named(MISSING).items()}
    assert found == {
        "dynamo": ["itl", "throughput", "ttft"], "llama-cpp": ["throughput", "token_latency_mean"],
        "lmdeploy": ["itl", "throughput", "tpot", "ttft"], "nim": ["itl", "throughput", "ttft"],
        "ray-serve-vllm": ["itl", "preemptions", "throughput", "ttft"],
        "sglang": ["throughput", "ttft"],
        "tensorrt-llm-triton": ["preemptions", "throughput", "ttft"], "tgi": ["throughput", "tpot"],
        "vllm": ["itl", "preemptions", "throughput", "ttft"]}


# ---- grouping ------------------------------------------------------------------------------------------------

def read_through(engine: str, expr: str, seen: frozenset = frozenset()) -> list[str]:
    """The expression and, recursively, the recording rules of every recorded series it reads."""
    out = [expr]
    for node in walk(parse(expr)):
        if isinstance(node, pp.VectorSelector) and node.name in records()[engine] and node.name not in seen:
            out += read_through(engine, records()[engine][node.name], seen | {node.name})
    return out


# The engines whose scraped series name the model otherwise (engines/*.yaml `model_label`), relabelled to
# model_name before the alert: their raw aggregations keep `model`.
MODEL_LABEL = {"dynamo": "model", "tensorrt-llm-triton": "model"}


def kept(engine: str, expr: str) -> set[str]:
    """The labels every `by` aggregation on the way from the raw series to the alert keeps (`le` aside; the
    engine's own model label counted as model_name)."""
    own = MODEL_LABEL.get(engine, "model_name")
    sets = [{"model_name" if label == own else label for label in a.labels} - {"le"}
            for e in read_through(engine, expr) for a in aggregations(e) if a.kind == "by"]
    return set.intersection(*sets) if sets else set()


MODEL = {"cluster", "namespace", "model_name"}
PER_INSTANCE = MODEL | {"instance"}
GROUPING = {PAGE: PER_INSTANCE, CHRONIC: PER_INSTANCE, DIVERGENCE: MODEL, TTFT: MODEL, ITL: MODEL,
            STRAGGLER: MODEL, MISSING: PER_INSTANCE, SLO_FAST: MODEL, SLO_SLOW: MODEL, SLO_COVERAGE: MODEL,
            LOG_PAGE: {"cluster", "namespace"}}   # a log names no model


# The page and the chronic warning are per KV-cache unit (engines/*.yaml `ranks.unit`): vLLM's engine core
# (`engine`, its data-parallel index); on Ray Serve the replica too, which Ray's metrics agent tells apart only by
# `ReplicaId` under one `instance` (docs/alerts-and-runbooks.md "Fleet shapes", issue 29 item 1). SGLang's unit
# is `dp_rank`, but its share divides by the server's finished requests (per instance), so not every aggregation
# on the way keeps it.
UNIT = {"vllm": {"engine"}, "ray-serve-vllm": {"ReplicaId", "engine"}}
PER_UNIT = (PAGE, CHRONIC)


@pytest.mark.parametrize("alert", GROUPING)
def test_alert_grouping(alert):
    found = {engine: [kept(engine, r["expr"]) for r in rules] for engine, rules in alerts_named(alert).items()}
    assert found == {engine: [GROUPING[alert] | (UNIT.get(engine, set()) if alert in PER_UNIT else set())]
                     * len(rules) for engine, rules in alerts_named(alert).items()}


# The warnings the page inhibits hold no series while the page is pending for the same model and fleet group.
WAITING = {DIVERGENCE: COUNTED + PAUSED, TTFT: ("ray-serve-vllm", "sglang", "tensorrt-llm-serve",
                                                "tensorrt-llm-triton", "vllm"),
           ITL: ("ray-serve-vllm", "sglang", "tensorrt-llm-serve", "vllm")}


@pytest.mark.parametrize("alert", WAITING)
def test_warning_waits_for_the_pending_page_of_its_model(alert):
    found = {engine: [m for m in matchings(r["expr"]) if m[0] == "unless"]
             for engine, rules in alerts_named(alert).items() for r in rules}
    expect = [("unless", "on", ("llm_engine", "cluster", "namespace", "model_name"))]
    assert found == {engine: expect if engine in WAITING[alert] else [] for engine in found}


def test_recorded_windows_match_their_names():
    """A recorded series named `..._rate2m` (`ratio_rate30m`, `rate1d`) reads a 2m (30m, 1d) window and no other,
    so a window a figure pins by name is the window the series is computed over. (One that reads no window
    itself composes other recorded series, each checked on its own.)"""
    wrong = {}
    for engine, exprs in records().items():
        for name, expr in exprs.items():
            match = re.search(r":(?:ratio_)?rate(\d+[smhd])$", name)
            if match and ranges(expr) and ranges(expr) != {match.group(1)}:
                wrong[f"{engine} {name}"] = ranges(expr)
    assert wrong == {}


def clamps(expr: str) -> list[float]:
    return [n.args[1].val for n in walk(parse(expr)) if isinstance(n, pp.Call) and n.func.name == "clamp_min"
            and isinstance(n.args[1], pp.NumberLiteral)]


def test_page_counts_at_least_20_finished_requests_per_window():
    """min_finished = 20 per window: 20/120 s, 20/180 s and 20/1800 s as the floor of the finished-request rate
    (the 2m and 3m shares are recorded; the 30m one is the chronic warning's own)."""
    found = {engine: {**{window: clamps(exprs[f"cluster_namespace_model_name_instance:llm_preemption_share:"
                                              f"ratio_rate{window}"]) for window in ("2m", "3m")},
                      "30m": clamps(alerts_named(CHRONIC)[engine][0]["expr"])}
             for engine, exprs in records().items() if engine in COUNTED}
    assert found == every(COUNTED, {"2m": [0.166667], "3m": [0.111111], "30m": [0.0111111]})


def test_inhibitions():
    from llmdash.rules.identity import inhibit_rules
    assert inhibit_rules(Config()) == {"inhibit_rules": [{
        "source_matchers": ['alertname="LLMServingPreemptionsHigh"'],
        "target_matchers": ['alertname=~"LLMServingLatencyThroughputDivergence|LLMServingTTFTP99High|'
                            'LLMServingITLP99High"'],
        "equal": ["llm_engine", "model_name", "cluster", "namespace"],
    }, {
        "source_matchers": ['alertname="LLMServingPreemptionsHigh"'],
        "target_matchers": ['alertname=~"LLMServingPreemptionsChronic|LLMServingInstanceLatencyHigh"'],
        # the same KV-cache unit: instance and every catalog's unit labels (vLLM's engine, Ray Serve's ReplicaId,
        # SGLang's dp_rank; a label an alert lacks is equal-empty on both sides)
        "equal": ["llm_engine", "model_name", "cluster", "namespace", "instance", "engine", "ReplicaId", "dp_rank"],
    }, {
        # issue 29 item 2: across llm_engine, a worker's page silences the frontend's (Dynamo, catalog
        # `role: frontend`) divergence and latency alerts for the same model and fleet group
        "source_matchers": ['alertname="LLMServingPreemptionsHigh"'],
        "target_matchers": ['alertname=~"LLMServingLatencyThroughputDivergence|LLMServingTTFTP99High|'
                            'LLMServingITLP99High"', 'llm_engine=~"dynamo"'],
        "equal": ["model_name", "cluster", "namespace"],
    }]}
