"""Service-level objectives read from the catalogs: which series an objective's SLI counts good and bad events
from on one engine, and why a build refuses it.

A latency SLI counts good events from one histogram bucket (the requests whose TTFT, or the ITL samples whose
gap, fell at or under the bucket's bound) against the histogram's count, never from a quantile: a quantile
says how slow the tail is, not how many events missed the target, and the error budget is a count. So the
target must be a bound that every version the engine's catalog covers exports; where it is not, the build
names the nearest bounds on each side. Per-token latency is ITL where the engine has it, else per-request
TPOT; an engine with only a mean time per token (llama.cpp) has no bucket to count from. Availability counts
the failed requests of the catalog's `errors` role among its finished `requests`.

The recorded series built from these live in `llmdash.panels.recorded` (`RECORDINGS`); the alerts in
`llmdash.rules.slo`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmdash.engines.catalog import UNIT_TO_SECONDS, EngineSpec, Metric
from llmdash.engines.model import layout_versions
from llmdash.errors import LlmdashError
from llmdash.panels.promql import Matcher
from llmdash.panels.signals import Signals, fixed_selectors
from llmdash.vocabulary import Alert, Role, Sli

WHAT = {Sli.TTFT: "time to first token", Sli.TOKEN_LATENCY: "per-token latency",
        Sli.AVAILABILITY: "availability"}


@dataclass(frozen=True)
class Pair:
    """A burn rate and the two windows that must both reach it (llmdash.rules.slo explains the choice)."""

    burn: float
    long: str
    short: str


PAIRS = {
    Alert.SLO_BURN_FAST: (Pair(14.4, "1h", "5m"), Pair(6, "6h", "30m")),
    Alert.SLO_BURN_SLOW: (Pair(3, "1d", "2h"), Pair(1, "3d", "6h")),
}


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
    """The raw-series PromQL of one indicator's 5m event rates, per model and fleet group, with fallbacks per
    replica; under the objective's `models:` where it names some."""

    def __init__(self, spec: EngineSpec, config, scope: tuple[Matcher, ...], ind: Indicator):
        models = ind.objective.models
        extra = (Matcher(spec.model_label, "=~", "|".join(re.escape(m) for m in models)),) if models else ()
        self.raw = Signals(spec, config, scope + extra, "5m")
        self.ind = ind

    def events(self, window: str) -> str:
        """Events/s: observations, or finished requests; where the catalog counts failures apart from requests
        (TGI), successes plus failures, either alone where the other is absent (an exporter that creates a
        counter at its first increment has no failure series before the first failure, no success series when
        every request since its start failed)."""
        if self.ind.is_latency:
            return self.raw.observation_rate(self.ind.role, window)
        requests = self.raw.requests(window=window)
        if not self.raw.spec.signal(Role.ERRORS).outside_requests:
            return requests
        failed = self.raw.counter_rate(Role.ERRORS, window=window)
        return f"((({requests}) + ({failed})) or ({requests}) or ({failed}))"   # whole: it is an operand

    def errors(self, window: str) -> str:
        """Bad events/s: observations above the target (all minus the target's bucket), or failed requests
        (none where the failure series is absent, so a model serving without failures reads 0, not nothing)."""
        if self.ind.is_latency:
            good = self.raw.observation_rate(self.ind.role, window, self.ind.target_seconds)
            return f"clamp_min({self.events(window)} - {good}, 0)"
        return f"({self.raw.counter_rate(Role.ERRORS, window=window)}) or (0 * {self.events(window)})"
