"""Multiwindow, multi-burn-rate alerts on the configured SLOs (the SRE Workbook's, chapter "Alerting on SLOs").

A burn rate is how fast the error budget goes: the error ratio divided by the budget (1 − objective), so a
burn of 1 spends exactly the budget over the SLO window. Each alert is a pair of windows that must both burn
faster than its rate: the long window makes it significant (a share of the budget is really gone), the short
one makes it current (it stops firing minutes after the errors stop, not hours). "Faster" is at least: a
steady burn of exactly 1 raises the ticket, since it spends the whole budget by the window's end. Thresholds are burn ×
(1 − objective), computed from the objective, never typed. `LLMServingSLOBurnRateFast` pages (14.4× over 1h
and 5m: 2 % of a 30-day budget in an hour; 6× over 6h and 30m: 5 % in six hours); `LLMServingSLOBurnRateSlow`
is a ticket (3× over 1d and 2h: 10 % in a day; 1× over 3d and 6h: the budget will be gone by the window's end).

A pair fires only with at least `min_bad_events` bad events in its long window: on a model with a handful of
requests one slow request is a large ratio but not an incident. The count is the recorded one (the sum of what
the counters gained at each evaluation), so it reads what happened whatever the series' age.

A replica the SLI cannot count (a histogram without the target's bucket, a missing failure series) is left out
of the ratios, so it can never page; `LLMServingSLOCoverageLow` warns while any is.

They read the recorded ratios (`llmdash.panels.recorded`), per model and fleet group. They are the impact
side of an incident whose cause the preemption page names: no inhibition between them (docs/slo.md).
"""

from __future__ import annotations

from llmdash.durations import seconds
from llmdash.panels.recorded import RecordedSignals
from llmdash.panels.slo import WHAT, Indicator, indicators
from llmdash.vocabulary import BURN_PAIRS as PAIRS  # the alerts and their pairs
from llmdash.vocabulary import SLO_LABEL, Alert, BurnPair, Role, Sli

FOR = "0s"   # the short window already demands that the burn is current; a `for` would only delay the page
# A replica the SLI cannot count for this long (a restart's minutes of missing series are not worth a warning)
COVERAGE_FOR = "15m"


# An error ratio is a difference of two rates averaged over many samples: a burn of exactly 1x reads as
# 0.9999999999999998x. The thresholds sit this share under burn x budget, so exactly 1x counts as 1x.
RATIO_TOLERANCE = 1e-9


def threshold(pair: BurnPair, objective) -> float:
    """The error ratio at which the pair burns: its burn rate times the budget."""
    return pair.burn * objective.budget


def number(value: float) -> str:
    return f"{value * (1 - RATIO_TOLERANCE):.12g}"


def pair_condition(sig: RecordedSignals, ind: Indicator, pair: BurnPair) -> str:
    """Both windows above the pair's threshold, and enough bad events in the long window to mean something."""
    o = ind.objective
    limit = number(threshold(pair, o))
    ratio = {w: sig.slo("slo_error_ratio", ind.name, w) for w in (pair.long, pair.short)}
    bad = sig.slo("slo_errors", ind.name, pair.long)
    return (f"({ratio[pair.long]} >= {limit}) and ({ratio[pair.short]} >= {limit}) "
            f"and ({bad} >= {o.min_bad_events:g})")


def burn_rate_alert(sig: RecordedSignals, ind: Indicator, alert: Alert, where: str) -> dict:
    """The alert's fields (name, expr, duration, summary, description, labels), for `generate._alert` (its severity
    is `identity.SEVERITY`'s)."""
    o = ind.objective
    pairs = PAIRS[alert]
    window_s = seconds(o.window)
    expr = " or ".join(f"({pair_condition(sig, ind, p)})" for p in pairs)
    spent = "; ".join(f"{p.burn:g}x over {p.long} (error ratio at least {threshold(p, o):.4%}, confirmed over "
                      f"{p.short}) spends {p.burn * seconds(p.long) / window_s:.1%} of the {o.window} budget in "
                      f"{p.long}" for p in pairs)
    token = "" if ind.role != Role.TPOT else " Per-token latency is read from per-request TPOT: this engine has no ITL."
    kind = "page" if alert == Alert.SLO_BURN_FAST else "ticket"
    summary = (f"{o.name} SLO of {where} on {sig.spec.title} is burning its error budget "
               f"({'fast' if kind == 'page' else 'slowly but steadily'})")
    description = (
        f"{where} on {sig.spec.title}: {{{{ $value | humanizePercentage }}}} of {WHAT[Sli(o.kind)]} events were bad "
        f"over the long window (a good event is {ind.good_means()}); the objective is {o.objective:.4%} good over "
        f"{o.window}, a budget of {o.budget:.4%} bad. {spent}. At least {o.min_bad_events:g} bad events in the "
        f"long window are required.{token} Budget left: the *Error budget remaining* panel. "
        f"If {Alert.PREEMPTIONS_HIGH} fires for the same model, it is the cause and this is its cost to users: "
        "one incident, grouped in one notification.")
    return {"name": alert, "expr": expr, "duration": FOR, "summary": summary,
            "description": description, "labels": {SLO_LABEL: ind.name}}


def coverage_alert(sig: RecordedSignals, ind: Indicator, where: str) -> dict:
    """A warning while some replica of a model serves events its SLI cannot count: they are left out of the
    budget, which then speaks for the other replicas only."""
    o = ind.objective
    needs = (f"the bucket at its {ind.target_seconds:g} s target" if ind.is_latency
             else "the failed-request series its catalog counts")
    description = (
        f"{where} on {sig.spec.title}: only {{{{ $value | humanizePercentage }}}} of the replicas serving this "
        f"model export {needs}. The others are left out of the {o.name} SLO's good and valid events, so its "
        "error budget and burn-rate alerts speak for the measured replicas alone. `llmdash doctor`'s slo section "
        "names the replicas and the bounds they export (a latency histogram configured with other buckets, e.g. "
        "SGLang's --bucket-time-to-first-token, or a release without the series).")
    return {"name": Alert.SLO_COVERAGE_LOW, "expr": f"{sig.slo('slo_coverage', ind.name)} < 1",
            "duration": COVERAGE_FOR,
            "summary": f"{o.name} SLO of {where} on {sig.spec.title} cannot count every replica",
            "description": description, "labels": {SLO_LABEL: ind.name}}


def slo_alerts(sig: RecordedSignals, config, where: str) -> list[dict]:
    """The fields of the fast and the slow burn-rate alert and the coverage warning of every objective that
    covers the engine (none without any objective)."""
    return [fields for ind in indicators(sig.spec, config)
            for fields in [*(burn_rate_alert(sig, ind, alert, where) for alert in PAIRS),
                           coverage_alert(sig, ind, where)]]
