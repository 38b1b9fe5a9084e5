"""The series of one engine process and their two text forms.

A `Registry` holds an emitter's series under the names, labels and buckets of its engine era
(`llmdash.lab.eras`) and renders them: OpenMetrics with timestamps in seconds (for `promtool tsdb
create-blocks-from openmetrics`) or the Prometheus text format of a live /metrics (`live_text`, several
processes on one page). What each engine counts, and when, is its emitter's business (`llmdash.lab.emitters`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmdash.engines.model import EngineSpec, Metric
from llmdash.lab.eras import ERAS, NEW, era_names, era_version, stand_ins, version_names

if TYPE_CHECKING:
    from llmdash.lab.emitters.base import EngineMetrics


class Histogram:
    """Cumulative histogram with the engine's bounds; counts are kept per bucket."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float, n: int = 1) -> None:
        """n observations of the same value (le semantics: value <= bound)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += n
        self.total += value * n

    def observe_per_token(self, interval: float, new_tokens: int) -> None:
        """SGLang's ITL observer: interval/new_tokens, observed new_tokens times, sum += interval."""
        if new_tokens <= 0:
            return
        self.counts[bisect.bisect_left(self.bounds, interval / new_tokens)] += new_tokens
        self.total += interval

    def cumulative(self) -> list[int]:
        out, acc = [], 0
        for c in self.counts:
            acc += c
            out.append(acc)
        return out


class Cell:
    """One counter or gauge series."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0


def _labels(pairs: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in pairs.items())


@dataclass
class _Series:
    metric: Metric
    labels: str
    cell: Cell | Histogram


class Registry:
    """The series of one engine process; labels are checked against the catalog."""

    def __init__(self, spec: EngineSpec, constant: dict[str, str], era: str = NEW):
        self.spec = spec
        self.constant = constant
        self.series: list[_Series] = []
        self._head_cache: dict[tuple[int, str], tuple[str, ...]] = {}
        self.version = era_version(spec, era)
        self.metrics = {m.name: m for m in spec.metrics.values() if m.exposed_in(self.version, self.version)}
        self.renamed = era_names(spec, era) if era in ERAS else version_names(spec, self.version)
        self.stand_ins = stand_ins(spec)

    def _exported(self, name: str) -> Metric | None:
        """The catalog metric `name` is exported as in this registry's era (None: not exported).

        A variant's emitter is its base engine's, so `name` is the base's name, translated here.
        """
        if self.spec.base is not None:
            name = self.spec.exported_name(name) or self.stand_ins.get(name)
            if name is None or name not in self.metrics:
                return None
        if name in self.renamed:
            target = self.renamed[name]
            return self.spec.metrics[target] if target else None
        return self.metrics.get(name)

    def _add(self, name: str, labels: dict[str, str], cell):
        metric = self._exported(name)
        if metric is None:
            return cell             # still counted by the emitter, never rendered
        values = {**self.constant, **labels}
        exported = metric.labels_at(self.version)
        missing = [label for label in exported if label not in values]
        if missing:
            raise ValueError(f"{name}: no value for labels {missing}")
        self.series.append(_Series(metric, _labels({k: values[k] for k in exported}), cell))
        return cell

    def cell(self, name: str, **labels: str) -> Cell:
        return self._add(name, labels, Cell())

    def histogram(self, name: str, bounds: tuple[float, ...] | None = None, **labels: str) -> Histogram:
        """`bounds` for a histogram whose buckets the deployment sets (the catalog then lists none)."""
        metric = self._exported(name) or self.spec.metrics.get(name)
        buckets = metric.buckets_at(self.version) if metric else None
        return self._add(name, labels, Histogram(bounds or buckets or ()))

    def render(self, extra: str, timestamp: float | None, declared: set[str] | None = None) -> list[str]:
        """Sample lines; `extra` holds scrape labels (job, instance) for backfill.

        With a timestamp the lines are OpenMetrics (TYPE names without _total); without one
        they are the Prometheus text format a live /metrics serves. `declared` remembers
        which families already had their HELP line in a long backfill file. In a backfill file a
        family's TYPE line comes again wherever its samples follow another family's: Prometheus 3's
        promtool normalises `le` and `quantile` only under their family's TYPE (the parser's current
        type), so a bucket after another family's TYPE would be stored as written, `le="5000"` beside
        `le="5000.0"`, where its scrape stores one series.
        """
        ts = "" if timestamp is None else f" {timestamp:.3f}"
        out: list[str] = []
        seen = set() if declared is None else declared
        current = None
        for s in self.series:
            m = s.metric
            family = m.name
            if timestamp is not None and m.type == "counter" and family.endswith("_total"):
                family = family[: -len("_total")]
            if m.name not in seen:
                seen.add(m.name)
                out.append(f"# HELP {family} {m.help}")
                out.append(f"# TYPE {family} {m.type}")
            elif timestamp is not None and family != current:
                out.append(f"# TYPE {family} {m.type}")
            current = family
            heads = self._heads(s, extra)
            if m.type == "histogram":
                cum = s.cell.cumulative()
                for head, count in zip(heads, cum):
                    out.append(f"{head} {count}{ts}")
                out.append(f"{heads[-2]} {cum[-1]}{ts}")
                out.append(f"{heads[-1]} {s.cell.total:.6f}{ts}")
            else:
                out.append(f"{heads[0]} {_num(s.cell.value)}{ts}")
        return out

    def _heads(self, s: _Series, extra: str) -> tuple[str, ...]:
        """A series' sample names with their labels (for a histogram: each bucket, +Inf, _count, _sum),
        written once per scrape-label set: a long backfill renders them at every scrape."""
        key = (id(s), extra)
        if key not in self._head_cache:
            m, labels = s.metric, ",".join(x for x in (s.labels, extra) if x)
            if m.type == "histogram":
                sep = "," if labels else ""
                les = [self.spec.le(bound) for bound in s.cell.bounds] + ["+Inf"]
                self._head_cache[key] = (*(f'{m.name}_bucket{{{labels}{sep}le="{le}"}}' for le in les),
                                         f"{m.name}_count{{{labels}}}", f"{m.name}_sum{{{labels}}}")
            else:
                self._head_cache[key] = (f"{m.name}{{{labels}}}",)
        return self._head_cache[key]


def live_text(emitters: list["EngineMetrics"], extras: list[str] | None = None) -> str:
    """Prometheus text format for one /metrics holding several processes' series; `extras[i]`
    are labels emitter i's series carry to tell its replica apart.

    Each family appears once, with one HELP/TYPE header and all its samples together,
    as the text parser expects.
    """
    families: dict[str, list[str]] = {}
    for emitter, extra in zip(emitters, extras or [""] * len(emitters)):
        current: list[str] = []
        for line in emitter.render(extra):
            if line.startswith("# HELP "):
                name = line.split(" ", 3)[2]
                current = families.setdefault(name, [])
                if not current:
                    current.append(line)
                    continue
                current = families[name]
            elif line.startswith("# TYPE "):
                if len(current) == 1:
                    current.append(line)
            else:
                current.append(line)
    return "".join(line + "\n" for lines in families.values() for line in lines)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"
