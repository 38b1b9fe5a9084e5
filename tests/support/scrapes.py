"""promtool input series as Prometheus scrapes them: every 15 s, at a phase of its own per instance.

Why not `rule_scenarios`: its minute-resolution series line every sample up with the rule evaluation,
which hides what a page does with a burst that falls just before or after a scrape (and `rate()`
extrapolates only when a window's first and last samples sit inside it, not on its edges). Here a
series is built from what the engine's code does (integer counters that jump when events happen,
histogram buckets) and given to promtool on a 5 s grid (`RESOLUTION_S`), with a sample only every
15 s at the instance's phase (0, 5 or 10 s after the rule evaluation's minute) and `_` between, so
scrape timestamps really are not aligned with evaluation. A failed scrape is `_` too.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Callable

STEP_S = 15         # scrape interval
RESOLUTION_S = 5    # promtool's sample grid: a scrape may fall on any 5 s of it
STALE = "stale"     # promtool's word for Prometheus's staleness marker


@dataclass
class Series:
    name: str
    labels: dict[str, str]
    values: list[float | str | None] = field(default_factory=list)

    def render(self) -> dict:
        selector = ", ".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        text = " ".join("_" if v is None else v if isinstance(v, str) else f"{v:.10g}" for v in self.values)
        return {"series": f"{self.name}{{{selector}}}", "values": text}


def times(minutes: float) -> list[float]:
    return [k * RESOLUTION_S for k in range(int(minutes * 60 / RESOLUTION_S) + 1)]


def counter(name: str, labels: dict, minutes: float, total: Callable[[float], float], phase: float = 0.0,
            gaps: tuple[tuple[float, float], ...] = (), removed: float | None = None) -> Series:
    """A counter whose value at time t (seconds) is `total(t)`, scraped every 15 s at `phase` (rounded to the
    5 s grid); no sample inside a gap (start, end) in seconds. `removed`: the target is gone from that second
    on (a pod autoscaling deleted): at its next scrape slot Prometheus writes a stale marker, then nothing."""
    offset = round(phase / RESOLUTION_S) * RESOLUTION_S % STEP_S
    values: list[float | str | None] = []
    for t in times(minutes):
        slot = not (t - offset) % STEP_S
        if removed is not None and t >= removed:
            values.append(STALE if slot and STALE not in values else None)
        else:
            values.append(float(total(t)) if slot and not any(a <= t < b for a, b in gaps) else None)
    return Series(name, labels, values)


def steady(per_s: float, start: float = 0.0, end: float = math.inf) -> Callable[[float], float]:
    """An integer count of events at `per_s` between start and end (seconds): a real counter moves in whole steps."""
    return lambda t: math.floor(per_s * (min(t, end) - start)) if t > start else 0


def events(at: list[float]) -> Callable[[float], float]:
    """One count per event time (seconds); repeat a time for a burst of several."""
    ordered = sorted(at)
    return lambda t: sum(1 for e in ordered if e <= t)


def poisson_events(per_s: float, seconds: float, seed: int) -> list[float]:
    """Event times of a Poisson process: noise as a steady low rate really produces it."""
    rng, t, out = random.Random(seed), 0.0, []
    while True:
        t += rng.expovariate(per_s)
        if t >= seconds:
            return out
        out.append(t)


def plus(*totals: Callable[[float], float]) -> Callable[[float], float]:
    return lambda t: sum(total(t) for total in totals)


def histogram(name: str, labels: dict, minutes: float, bounds: list[str], cumulative: Callable[[float, float], float],
              phase: float = 0.0, gaps: tuple[tuple[float, float], ...] = (),
              removed: float | None = None) -> list[Series]:
    """A histogram's buckets (`bounds` as the exporter writes `le`, "+Inf" last) and count, from
    `cumulative(t, bound)`: the observations at or below `bound` (inf for all) made by time t."""
    out = []
    for le in bounds:
        bound = math.inf if le == "+Inf" else float(le)
        out.append(counter(f"{name}_bucket", {**labels, "le": le}, minutes,
                           lambda t, b=bound: cumulative(t, b), phase, gaps, removed))
    out.append(counter(f"{name}_count", labels, minutes, lambda t: cumulative(t, math.inf), phase, gaps, removed))
    return out


def two_speed(per_s: float, fast: float, slow: float,
              slow_share: Callable[[float], float]) -> Callable[[float, float], float]:
    """Observations at `per_s`, a `slow_share(t)` of them at `slow` seconds and the rest at `fast`, integrated
    minute by minute (counts whole observations)."""
    def cumulative(t: float, bound: float) -> float:
        minutes = int(t // 60)
        done = sum(_share_within(fast, slow, slow_share(m * 60), bound) for m in range(minutes))
        done += _share_within(fast, slow, slow_share(minutes * 60), bound) * (t - minutes * 60) / 60
        return math.floor(per_s * 60 * done)
    return cumulative


def _share_within(fast: float, slow: float, share: float, bound: float) -> float:
    return (1 - share) * (fast <= bound) + share * (slow <= bound)
