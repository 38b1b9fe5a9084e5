"""Can each configured SLO count its events on these series? One line per objective and series it reads.

A latency SLO counts good events from the bucket whose bound is its target, so the doctor looks for a
`_bucket` series with that bound, under either `le` text the rules match (the exporter's, `le="2"`, and
Prometheus 3's normalised float, `le="2.0"`), and says which catalogued bucket layout the histogram's bounds
are (the releases that export it), or that none is, with the bounds seen. The build already refuses a target
that some catalogued release lacks; a page still lacks it when its release or its deployment exports other
bounds than the catalog's (a release outside the catalog's range, bounds overridden by configuration). An
availability SLO counts the failed requests of the catalog's `errors` series. Either missing is a problem, like a
query that will be empty: the SLI leaves a replica without it out of its good and valid events, so it cannot burn.
A failure counter absent altogether is only noted where the exporter creates it at its first increment (TGI): it
has none until a request fails. Where some replicas have the series and others not, the problem names those left
out and the coverage (measured over all replicas, the recorded `llm_slo_coverage:ratio` the warning reads).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from llmdash.doctor import printing
from llmdash.doctor.inventory import Inventory
from llmdash.engines.model import UNIT_TO_SECONDS, EngineSpec, Metric, bucket_for, layout_versions
from llmdash.panels.promql import Matcher, bucket_texts, selector
from llmdash.panels.signals import Signals, fixed_selectors, source_matchers
from llmdash.panels.slo import Indicator, indicators
from llmdash.vocabulary import Alert, Role

BOUNDS_SHOWN = 12      # of a layout no catalog lists


@dataclass
class SloCheck:
    """One objective and one series it reads; no problems: it can count."""

    objective: str       # the objective's name (its `slo` label)
    sli: str
    series: str          # as scraped, with the matchers that pick its events
    target: str          # what the series must carry: `le="2" or le="2.0"`; "" for a counter
    found: bool
    layout: str = ""     # which catalogued bucket layout the page's bounds are
    problems: list[str] = field(default_factory=list)
    note: str = ""       # why an absent series is not a problem


def slo_checks(inventory: Inventory, spec: EngineSpec, config) -> list[SloCheck]:
    """The checks of every configured objective that covers `spec`, in config order."""
    checks = []
    sig = Signals(spec, config, fixed_selectors(spec, config), "5m")
    replica = sig.instance_group
    for ind in indicators(spec, config):
        sources = sig.sources(ind.role)
        if ind.is_latency:
            checks += _latency(inventory, spec, ind, [s.metric for s in sources], replica)
        else:
            first_increment = spec.signal(ind.role).appears_at_first_increment
            requests = [s.series for s in sig.sources(Role.REQUESTS)]
            checks += [_counter(inventory, ind, source, first_increment, requests, replica) for source in sources]
    return checks


def replica_series(spec: EngineSpec, config) -> set[str]:
    """The series whose replicas `slo_checks` counts (the coverage): each latency SLI's buckets and counts, and
    where failed requests are exported from the start, each availability SLI's failed and request series."""
    sig = Signals(spec, config, fixed_selectors(spec, config), "5m")
    names = set()
    for ind in indicators(spec, config):
        if ind.is_latency:
            names |= {f"{s.metric.name}_{part}" for s in sig.sources(ind.role) for part in ("bucket", "count")}
        elif not spec.signal(ind.role).appears_at_first_increment:
            names |= {s.series for s in sig.sources(ind.role)} | {s.series for s in sig.sources(Role.REQUESTS)}
    return names


def _replicas(series: list[dict[str, str]], replica: tuple[str, ...]) -> set[tuple[str, ...]]:
    """The replicas (values of the `replica` labels) among the label sets."""
    return {tuple(labels.get(label, "") for label in replica) for labels in series}


def _uncounted(every: set, measured: set, replica: tuple[str, ...], secrets, what: str) -> str | None:
    """A problem naming the replicas the SLI leaves out, where some are measured and some not (where none is,
    the check's own problem says so)."""
    left_out = sorted(every - measured)
    if not measured or not left_out:
        return None
    named = "; ".join(", ".join(f'{label}="{printing.text(value, secrets)}"' for label, value in zip(replica, r)
                                if value) or "(no labels)" for r in left_out[:BOUNDS_SHOWN])
    more = f" … ({len(left_out)} replicas)" if len(left_out) > BOUNDS_SHOWN else ""
    return (f"{len(left_out)} of {len(every)} replicas have no {what}, so the SLO leaves them out of its good and "
            f"valid events (coverage {100 * len(measured & every) / len(every):.0f} %, recorded as "
            f"llm_slo_coverage:ratio; {Alert.SLO_COVERAGE_LOW} warns): {named}{more}")


def _latency(inventory: Inventory, spec: EngineSpec, ind: Indicator, metrics: list[Metric],
             replica: tuple[str, ...]) -> list[SloCheck]:
    """A check per histogram of the SLI on the page (the rules fall back per replica between them); one
    naming the newest when none is."""
    present = [m for m in metrics if f"{m.name}_bucket" in inventory.series]
    native = [SloCheck(ind.name, ind.objective.kind, m.name, f"histogram_fraction up to {ind.target_seconds:g}s", True,
                       note="a native histogram (its bounds are not in the series list): the SLI counts good events "
                            "as histogram_fraction up to the target times histogram_count, exact at a bucket bound")
              for m in metrics if m.name in inventory.series and m not in present]
    if native:
        return [_bucket(inventory, spec, ind, metric) for metric in present] + native
    if not present:
        names = ", ".join(f"{m.name}_bucket" for m in metrics)
        check = SloCheck(ind.name, ind.objective.kind, f"{metrics[0].name}_bucket", _target(spec, metrics[0], ind),
                         False)
        check.problems.append(f"{names} absent: no histogram to count {ind.objective.kind} events from")
        return [check]
    return [_bucket(inventory, spec, ind, metric, replica) for metric in present]


def _target(spec: EngineSpec, metric: Metric, ind: Indicator) -> str:
    bound = bucket_for(metric, ind.target_seconds)
    return " or ".join(f'le="{text}"' for text in bucket_texts(spec.le(bound), bound))


def _bucket(inventory: Inventory, spec: EngineSpec, ind: Indicator, metric: Metric,
            replica: tuple[str, ...]) -> SloCheck:
    name = f"{metric.name}_bucket"
    bound = bucket_for(metric, ind.target_seconds)
    texts = bucket_texts(spec.le(bound), bound)
    series = inventory.series[name]
    layouts = _page_layouts(series)
    check = SloCheck(ind.name, ind.objective.kind, name, _target(spec, metric, ind),
                     any(labels.get("le") in texts for labels in series),
                     "; ".join(_layout(spec, metric, layout, inventory.secrets) for layout in layouts))
    if not check.found:
        seen = {value for layout in layouts for value in layout}
        below = max((b for b in seen if b[0] < bound), default=None)
        above = min((b for b in seen if b[0] > bound), default=None)
        nearest = " and ".join(f'le="{printing.text(b[1], inventory.secrets)}"' for b in (below, above) if b)
        check.problems.append(
            f"{name} has no bucket at the {ind.target_seconds:g}s target ({check.target}): its bounds "
            f"{_scale_note(metric)}nearest it are {nearest or 'none'}, so its recorded series stay empty and its "
            "alerts cannot fire")
    measured = _replicas([labels for labels in series if labels.get("le") in texts], replica)
    every = _replicas(series + inventory.series.get(f"{metric.name}_count", []), replica)
    if problem := _uncounted(every, measured, replica, inventory.secrets, f"bucket at {check.target}"):
        check.problems.append(problem)
    return check


def _scale_note(metric: Metric) -> str:
    return "" if UNIT_TO_SECONDS.get(metric.unit) == 1.0 else f"(in {metric.unit}) "


def _page_layouts(series: list[dict[str, str]]) -> list[tuple[tuple[float, str], ...]]:
    """The distinct bound sets of the histogram's series (one per replica and label set), each as
    (bound, `le` text) in order, without +Inf; a text that is not a number is left out."""
    per_series: dict[tuple, dict[float, str]] = {}
    for labels in series:
        text = labels.get("le", "")
        try:
            bound = float(text)
        except ValueError:
            continue
        if math.isfinite(bound):
            key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
            per_series.setdefault(key, {}).setdefault(bound, text)
    return list(dict.fromkeys(tuple(sorted(bounds.items())) for bounds in per_series.values()))


def _layout(spec: EngineSpec, metric: Metric, layout: tuple[tuple[float, str], ...], secrets) -> str:
    """Which catalogued releases export exactly these bounds, or the bounds themselves."""
    bounds = [bound for bound, _ in layout]
    for first, until, catalogued in metric.layouts:
        if len(catalogued) == len(bounds) and all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(catalogued, bounds)):
            versions = layout_versions(first, until)
            return f"the layout of {spec.id} {versions}" if versions else f"the layout of every {spec.id} release"
    shown = ", ".join(printing.text(text, secrets) for _, text in layout[:BOUNDS_SHOWN])
    more = f" … ({len(layout)} bounds)" if len(layout) > BOUNDS_SHOWN else ""
    return f"no catalogued layout; bounds: {shown}{more}" if layout else "no bounds"


def _counter(inventory: Inventory, ind: Indicator, source, first_increment: bool, requests: list[str],
             replica: tuple[str, ...]) -> SloCheck:
    """The failed-request series an availability SLI counts: some series of its name carrying its match. Where
    the exporter creates it at the first failure, its absence is no failure yet; elsewhere a replica without it
    cannot be counted and is left out."""
    matchers = source_matchers(source)
    series = inventory.series.get(source.series, [])
    carrying = [labels for labels in series if all(_matches(m, labels) for m in matchers)]
    check = SloCheck(ind.name, ind.objective.kind, selector(source.series, matchers), "", bool(carrying))
    if first_increment and not series:
        check.note = (f"{source.series} absent: no request has failed since the engine started, or the engine "
                      "does not export it; until it appears availability reads 100 %")
    elif first_increment and not carrying:
        check.problems.append(f"{source.series} has no series with {', '.join(m.render() for m in matchers)}: "
                              "the SLO counts no failed request, so availability reads 100 % and it cannot burn")
    elif not carrying:
        check.problems.append(f"{source.series} has no series with {', '.join(m.render() for m in matchers)}: "
                              "the SLO cannot count these replicas' failed requests, so it leaves them out of its "
                              f"valid events (coverage 0 %; {Alert.SLO_COVERAGE_LOW} warns) and cannot burn")
    elif not first_increment:
        every = _replicas([labels for name in requests for labels in inventory.series.get(name, [])], replica)
        if problem := _uncounted(every | _replicas(carrying, replica), _replicas(carrying, replica), replica,
                                 inventory.secrets, f"{check.series} series"):
            check.problems.append(problem)
    return check


def _matches(matcher: Matcher, labels: dict[str, str]) -> bool:
    value = labels.get(matcher.label, "")    # an absent label equals "" in PromQL
    if matcher.op == "=":
        return value == matcher.value
    return re.fullmatch(matcher.value, value) is not None    # source_matchers: "=" or "=~" of escaped values
