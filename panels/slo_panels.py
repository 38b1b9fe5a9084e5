"""The error-budget panels: on each engine's dashboard (budget left, burn rate per window, attainment) and the
fleet's SLO table, all read from the recorded SLO series (`llmdash.panels.recorded`), so a dashboard load
costs a few series per model and objective whatever the fleet's size. No objective configured, no panel."""

from __future__ import annotations

from typing import Mapping

from llmdash.panels import builders, promql
from llmdash.panels.promql import Matcher
from llmdash.panels.recorded import Key, RecordedSignals, Series
from llmdash.panels.slo import events_defined, indicators
from llmdash.vocabulary import BURN_PAIRS as PAIRS  # the alerts and their pairs
from llmdash.vocabulary import PANEL_TITLES, SLO_LABEL, Alert, Panel

BURN_WINDOWS = tuple(dict.fromkeys(p.long for pairs in PAIRS.values() for p in pairs))   # 1h, 6h, 1d, 3d
PAGE_BURN = PAIRS[Alert.SLO_BURN_FAST][0].burn
PAGE_WINDOW = PAIRS[Alert.SLO_BURN_FAST][0].long   # 1h: the fleet table's error ratio, the page's first long window


def _recorded(sig, config) -> RecordedSignals:
    """The SLO series are recorded whatever `dashboard.use_recording_rules` says: read them recorded."""
    return sig if isinstance(sig, RecordedSignals) else RecordedSignals(sig.spec, config, sig.scope, sig.window)


def _legend(rec: RecordedSignals, suffix: str = "") -> str:
    return " ".join("{{" + label + "}}" for label in (*rec.legend_labels, SLO_LABEL)) + suffix


def _names(rec: RecordedSignals, ind, *keys: tuple[str, str | None]) -> str:
    return ", ".join(f"`{rec.series(signal, ind.name, window).name}{{slo=\"{ind.name}\"}}`" for signal, window in keys)


def _objectives_text(inds) -> str:
    return "; ".join(f"{i.name}: {i.objective.objective:.4%} of {i.good_means()}, over {i.objective.window}"
                     for i in inds)


def _events_text(spec, inds) -> str:
    """What each objective counts as valid, good and bad on this engine, and which replicas it leaves out."""
    parts = []
    for i in inds:
        d = events_defined(spec, i.objective.kind, i.target_seconds)
        parts.append(f"{i.name}: valid events are {d['valid']}; good: {d['good']}; bad: {d['bad']}; "
                     f"left out: {d['left out']}")
    return " Events counted, per objective: " + ". ".join(parts) + "."


def slo_budget_chart(sig, config):
    inds = indicators(sig.spec, config)
    if not inds:
        return None
    rec = _recorded(sig, config)
    return builders.timeseries(
        PANEL_TITLES[Panel.SLO_BUDGET], (
            "Share of each objective's error budget still unspent over its window, per model (below 0: the "
            f"objective is missed). Objectives: {_objectives_text(inds)}. It falls as bad events are spent; the "
            "burn-rate panel beside it says how fast, the alerts say when that is too fast. Metrics (recorded by "
            "llmdash's rules): " + ", ".join(_names(rec, i, ("slo_budget_consumed", None)) for i in inds) + "."
            + _events_text(sig.spec, inds)),
        [(f"1 - {rec.slo('slo_budget_consumed', i.name)}", _legend(rec)) for i in inds], "percentunit",
        [{"color": "red", "value": None}, {"color": "orange", "value": 0}, {"color": "green", "value": 0.25}])


def slo_burn_chart(sig, config):
    inds = indicators(sig.spec, config)
    if not inds:
        return None
    rec = _recorded(sig, config)
    queries = [(f"{rec.slo('slo_error_ratio', i.name, w)} / {i.objective.budget:.6g}", _legend(rec, f" {w}"))
               for i in inds for w in BURN_WINDOWS]
    pairs = "; ".join(f"{alert}: " + ", ".join(f"{p.burn:g}x over {p.long} and {p.short}" for p in pairs)
                      for alert, pairs in PAIRS.items())
    return builders.timeseries(
        PANEL_TITLES[Panel.SLO_BURN_RATE], (
            f"How fast each objective spends its budget over {', '.join(BURN_WINDOWS)}: the error ratio divided by "
            "the budget (1 - objective), per model; 1 spends exactly the budget over the window. The alerts fire "
            f"when a long window and its short companion both reach their burn rate ({pairs}). A KV-cache "
            "collapse lifts the 1h line within minutes while throughput holds. Metrics: "
            + ", ".join(_names(rec, i, *(("slo_error_ratio", w) for w in BURN_WINDOWS)) for i in inds) + "."
            + _events_text(sig.spec, inds)),
        queries, "suffix:×",
        [{"color": "green", "value": None}, {"color": "orange", "value": 1}, {"color": "red", "value": PAGE_BURN}])


def slo_attainment_chart(sig, config):
    inds = indicators(sig.spec, config)
    if not inds:
        return None
    rec = _recorded(sig, config)
    return builders.timeseries(
        PANEL_TITLES[Panel.SLO_ATTAINMENT], (
            "Share of good events over each objective's window, per model, beside the objective it must stay "
            f"above ({_objectives_text(inds)}). Counted from the histogram bucket whose bound is the target "
            "(failed requests for availability), never from a quantile. Metrics: "
            + ", ".join(_names(rec, i, ("slo_budget_consumed", None)) for i in inds) + "."
            + _events_text(sig.spec, inds)),
        [(f"1 - {rec.slo('slo_budget_consumed', i.name)} * {i.objective.budget:.6g}", _legend(rec)) for i in inds],
        "percentunit", soft_max=1)


def slo_coverage_chart(sig, config):
    inds = indicators(sig.spec, config)
    if not inds:
        return None
    rec = _recorded(sig, config)
    return builders.timeseries(
        PANEL_TITLES[Panel.SLO_COVERAGE], (
            "Share of each model's replicas whose events the objective can count, per objective: a replica whose "
            "latency histogram lacks the target's bucket (other buckets configured, e.g. SGLang's "
            "--bucket-time-to-first-token) or that lacks the failed-request series is left out of good and valid "
            "events alike, so it can neither page nor spend budget. Below 1 the budget speaks for the other "
            f"replicas only; {Alert.SLO_COVERAGE_LOW} warns, and `llmdash doctor` names the replicas. Metrics "
            "(recorded by llmdash's rules): " + ", ".join(_names(rec, i, ("slo_coverage", None)) for i in inds)
            + "." + _events_text(sig.spec, inds)),
        [(rec.slo("slo_coverage", i.name), _legend(rec)) for i in inds], "percentunit",
        [{"color": "orange", "value": None}, {"color": "green", "value": 1}], soft_max=1)


def fleet_slo_table(config, recorded: Mapping[Key, Series], scope: tuple[Matcher, ...]):
    """Every engine's models and objectives by budget left, worst first; None where no objective is recorded."""
    budget = next((k for k in recorded if k.signal == "slo_budget_consumed"), None)
    ratio = next((k for k in recorded if k.signal == "slo_error_ratio" and k.window == PAGE_WINDOW), None)
    if budget is None:
        return None
    name = {key: recorded[key].name for key in (budget, ratio) if key is not None}
    columns = [(f"1 - {promql.selector(name[budget], scope)}", "Error budget remaining", "percentunit")]
    if ratio is not None:
        columns.append((promql.selector(name[ratio], scope), f"Error ratio over {PAGE_WINDOW}", "percentunit"))
    return builders.Table(
        PANEL_TITLES[Panel.FLEET_SLO_BUDGET], (
            "One row per engine, group, model and objective (`slo`): the share of its error budget left over the "
            f"objective's window, lowest first, and the share of bad events over the last {PAGE_WINDOW}. A model "
            "near 0 has spent what its objective allows; the burn-rate alerts say when it is going too fast. Metrics "
            f"(recorded by llmdash's rules): `{name[budget]}`" + (f", `{name[ratio]}`." if ratio else ".")),
        columns, "Error budget remaining", width=24, ascending=True)
