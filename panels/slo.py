"""Service-level objectives read from the catalogs: which series an objective's SLI counts good and bad events
from on one engine, and why a build refuses it.

A latency SLI counts good events from one histogram bucket (the requests whose TTFT, or the ITL samples whose
gap, fell at or under the bucket's bound) against the histogram's count, never from a quantile: a quantile
says how slow the tail is, not how many events missed the target, and the error budget is a count. So the
target must be a bound that every version the engine's catalog covers exports; where it is not, the build
names the nearest bounds on each side. Per-token latency is ITL where the engine has it, else per-request
TPOT; an engine with only a mean time per token (llama.cpp) has no bucket to count from. Availability counts
the failed requests of the catalog's `errors` role among its finished `requests`, less the requests its
`aborts` role names (the client's cancels: neither good nor bad, so not valid events).

Events are counted, not averaged: each evaluation records what the counters gained since the previous one
(`promql.increments`), and a window's count is the sum of those (`llmdash.panels.recorded`), so a count reads
what happened over the data that exists, however young the series.

The recorded series built from these live in `llmdash.panels.recorded` (`RECORDINGS`); the alerts in
`llmdash.rules.slo`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmdash.engines.catalog import UNIT_TO_SECONDS, EngineSpec, Metric
from llmdash.engines.model import layout_versions
from llmdash.errors import LlmdashError
from llmdash.panels import promql
from llmdash.panels.promql import Matcher
from llmdash.panels.signals import Signals, fixed_selectors
from llmdash.vocabulary import Role, Sli

WHAT = {Sli.TTFT: "time to first token", Sli.TOKEN_LATENCY: "per-token latency",
        Sli.AVAILABILITY: "availability"}


def objectives_for(config, engine: str) -> tuple:
    """The configured objectives (`llmdash.config.Objective`) that cover `engine`, in config order."""
    return tuple(o for o in config.slo.objectives if not o.engines or engine in o.engines)


@dataclass(frozen=True)
class Indicator:
    """One objective on one engine: the role it reads and, for latency, the target in seconds."""

    objective: object     # llmdash.config.Objective
    role: str             # ttft, itl, tpot or errors
    target_seconds: float | None

    @property
    def name(self) -> str:
        return self.objective.name

    @property
    def is_latency(self) -> bool:
        return self.target_seconds is not None

    def good_means(self) -> str:
        """What a good event is, in words, for descriptions."""
        if not self.is_latency:
            return "a finished request that did not fail on the server's side"
        which = {Role.TTFT: "a request whose first token came", Role.ITL: "an inter-token gap (ITL sample)",
                 Role.TPOT: "a request whose time per output token (per-request TPOT: this engine has no ITL) was"}
        return f"{which[self.role]} within {self.target_seconds:g} s"


def _named(spec: EngineSpec, role: str, suffix: str = "", extra: str = "") -> str:
    """The role's series as scraped, fallbacks joined by "or"."""
    def one(source) -> str:
        matchers = ", ".join(filter(None, (source.match_text, extra)))
        return f"`{source.series}{suffix}" + (f"{{{matchers}}}`" if matchers else "`")
    return " or ".join(one(s) for s in spec.signal(role).sources)


def events_defined(spec: EngineSpec, kind: str, target_seconds: float | None = None) -> dict[str, str] | None:
    """What one SLI counts on `spec`, in words naming the catalog's series: `valid`, `good`, `bad` and `left out`
    (the replicas it cannot measure); None where the engine has no such SLI. `target_seconds` None: the target
    is written T. The dashboards' Error budget panels and docs/slo.md read this."""
    if kind == Sli.AVAILABILITY:
        if not (spec.has(Role.ERRORS) and spec.has(Role.REQUESTS)):
            return None
        errors = spec.signal(Role.ERRORS)
        valid = f"finished requests, {_named(spec, Role.REQUESTS)}"
        if errors.outside_requests:
            valid += f", plus the failed ones, {_named(spec, Role.ERRORS)}"
        if spec.has(Role.ABORTS):
            valid += f", less the client's aborts, {_named(spec, Role.ABORTS)}"
        absent = ("none (the failure series appears at the first failure: a replica without it has had none)"
                  if errors.appears_at_first_increment else f"replicas without {_named(spec, Role.ERRORS)}")
        return {"valid": valid, "good": "valid requests that did not fail", "bad": f"failed requests, "
                f"{_named(spec, Role.ERRORS)}", "left out": absent}
    role = (Role.TTFT if kind == Sli.TTFT else next((r for r in (Role.ITL, Role.TPOT) if spec.has(r)), None))
    if role is None or not spec.has(role):
        return None
    good = f"those in the bucket whose bound is the target, {_named(spec, role, '_bucket')}"
    if target_seconds is not None:
        good = f"those at or under {target_seconds:g} s, {_named(spec, role, '_bucket')} at that bound"
    return {"valid": f"observations, {_named(spec, role, '_count')}, of the replicas exporting the target's bucket",
            "good": good, "bad": "valid minus good",
            "left out": "replicas whose histogram has no bucket at the target"}


def _key(config, objective) -> str:
    return f"{config.source}: slo.objectives[{config.slo.objectives.index(objective)}]"


def indicator(spec: EngineSpec, config, objective) -> Indicator:
    """The objective's SLI on `spec`, or a one-line refusal naming the key, the engine and why."""
    where = _key(config, objective)
    kind = objective.kind
    if kind == Sli.AVAILABILITY:
        if not (spec.has(Role.ERRORS) and spec.has(Role.REQUESTS)):
            raise LlmdashError(f"{where}: {spec.id} has no failed-request counter in its catalog (no `errors` "
                               "signal), so its availability cannot be counted; limit the objective's `engines:`")
        return Indicator(objective, Role.ERRORS, None)
    if kind == Sli.TTFT:
        role = Role.TTFT if spec.has(Role.TTFT) else None
        missing = "exports no time-to-first-token histogram"
    else:
        role = next((r for r in (Role.ITL, Role.TPOT) if spec.has(r)), None)
        missing = ("has no per-token latency histogram (only a mean time per token, which cannot count slow "
                   "events)" if spec.has(Role.TOKEN_LATENCY_MEAN) else "has no per-token latency histogram")
    if role is None:
        raise LlmdashError(f"{where}: {spec.id} {missing}, so a {WHAT[kind]} SLO cannot be counted; "
                           "limit the objective's `engines:`")
    sig = Signals(spec, config, fixed_selectors(spec, config), "5m")   # the rules' scope: generic names count
    for source in sig.sources(role):
        problem = slo_target_problem(spec, source.metric, objective.target_seconds)
        if problem:
            raise LlmdashError(f"{where}.target_seconds: {problem} ({spec.id}); a latency SLO counts good events "
                               "from the bucket whose bound is the target")
    return Indicator(objective, role, objective.target_seconds)


def indicators(spec: EngineSpec, config) -> tuple[Indicator, ...]:
    return tuple(indicator(spec, config, o) for o in objectives_for(config, spec.id))


def slo_target_problem(spec: EngineSpec, metric: Metric, target_seconds: float) -> str | None:
    """Why `target_seconds` is not a bucket bound of `metric` in every supported version of `spec`, naming the
    nearest bounds on each side (per range of versions where those differ); None when it is one everywhere."""
    if metric.buckets is None or metric.unit not in UNIT_TO_SECONDS:
        return f"{metric.name} has no known bucket bounds in seconds"
    scale = UNIT_TO_SECONDS[metric.unit]
    # (versions, bounds) in use between the engine's supported versions
    layouts = [(layout_versions(first, until), bounds) for first, until, bounds in metric.layouts
               if until is None or until > spec.supported_from]
    nearest = {}
    for versions, bounds in layouts:
        seconds = [b * scale for b in bounds]
        if any(abs(b - target_seconds) <= 1e-9 * max(b, target_seconds) for b in seconds):
            continue
        below = max((b for b in seconds if b < target_seconds), default=None)
        above = min((b for b in seconds if b > target_seconds), default=None)
        sides = " and ".join(f"{b:g}s" for b in (below, above) if b is not None)
        nearest.setdefault(sides, []).append(versions)
    if not nearest:
        return None
    if len(nearest) == 1 and len(next(iter(nearest.values()))) == len(layouts):
        return f"{target_seconds:g}s is not a bucket bound of {metric.name} (nearest: {next(iter(nearest))})"
    parts = "; ".join(f"{' and '.join(v for v in versions if v) or 'all versions'}: {sides}"
                      for sides, versions in nearest.items())
    return f"{target_seconds:g}s is not a bucket bound of {metric.name} (nearest bounds, {parts})"


class Leaves:
    """The raw-series PromQL of one indicator's event counts since the previous rule evaluation (`step` ago), per
    model and fleet group, with fallbacks per replica; under the objective's `models:` where it names some.

    Only replicas the SLI can measure count: for latency those that export the target's bucket, for availability
    those that export the failed-request series (or, where the exporter creates it at the first failure, every
    replica). An unmeasurable replica adds neither good nor valid events, so it cannot page; `coverage` says how
    many are left out."""

    def __init__(self, spec: EngineSpec, config, scope: tuple[Matcher, ...], ind: Indicator):
        models = ind.objective.models
        extra = (Matcher(spec.model_label, "=~", "|".join(re.escape(m) for m in models)),) if models else ()
        self.raw = Signals(spec, config, scope + extra, config.rules.evaluation_interval)   # no rate: increments
        self.ind = ind
        self.replica = self.raw.instance_group

    def _on(self, expr: str, measured: str) -> str:
        return f"({expr}) and on ({', '.join(self.replica)}) ({measured})"

    def _measured_replicas(self) -> str:
        """1 per replica the SLI can count."""
        raw, ind = self.raw, self.ind
        if ind.is_latency:
            return raw.exporting(ind.role, lambda s: raw.target_bucket(s, ind.target_seconds))
        if raw.spec.signal(Role.ERRORS).appears_at_first_increment:
            return self._all_replicas()
        return raw.exporting(Role.ERRORS)

    def _all_replicas(self) -> str:
        """1 per replica serving the SLI's events (requests, or a histogram's observations)."""
        if self.ind.is_latency:
            return self.raw.present(self.ind.role)
        requests = self.raw.present(Role.REQUESTS)
        if self.raw.spec.signal(Role.ERRORS).outside_requests:
            return f"({requests}) or ({self.raw.present(Role.ERRORS)})"
        return requests

    def events(self, step: str) -> str:
        """Valid events since the previous evaluation, per model, on measured replicas: observations, or finished
        requests less the client's aborts (`aborts` role); where the catalog counts failures apart from requests
        (TGI), successes plus failures, either alone where the other is absent (an exporter that creates a counter
        at its first increment has no failure series before the first failure, no success series when every
        request since its start failed)."""
        raw, ind = self.raw, self.ind
        if ind.is_latency:
            return raw.measured_increments(ind.role, step, ind.target_seconds)[0]
        per_replica = raw.increments(Role.REQUESTS, step, self.replica)
        if raw.spec.has(Role.ABORTS):
            aborts = raw.increments(Role.ABORTS, step, self.replica)
            per_replica = f"(({per_replica}) - ({aborts})) or ({per_replica})"
        if raw.spec.signal(Role.ERRORS).outside_requests:
            failed = raw.increments(Role.ERRORS, step, self.replica)
            per_replica = f"(({per_replica}) + ({failed})) or ({per_replica}) or ({failed})"
        return f"sum{promql.by(raw.model)} ({self._on(per_replica, self._measured_replicas())})"

    def errors(self, step: str) -> str:
        """Bad events since the previous evaluation, per model: observations above the target (all minus the
        target's bucket, on the replicas that have it), or failed requests (0 where the failure series is absent,
        so a model serving without failures reads 0, not nothing)."""
        raw, ind = self.raw, self.ind
        if ind.is_latency:
            events, good = raw.measured_increments(ind.role, step, ind.target_seconds)
            return f"clamp_min({events} - {good}, 0)"
        return f"({raw.increments(Role.ERRORS, step)}) or (0 * {self.events(step)})"

    def coverage(self) -> str:
        """Measured replicas over every replica serving, per model (0 where none can be measured)."""
        every = f"count{promql.by(self.raw.model)} ({self._all_replicas()})"
        measured = f"count{promql.by(self.raw.model)} ({self._on(self._measured_replicas(), self._all_replicas())})"
        return f"(({measured}) / ({every})) or (0 * {every})"
