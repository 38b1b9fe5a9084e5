"""The engine catalog model: what an engine exposes, as typed values the other layers read.

A catalog is data about what an engine exposes: every series exactly as scraped, its type,
labels and the versions that export it, and which series feeds each signal (role).
Capabilities (has an ITL histogram? a preemption counter?) are derived from the roles,
never hard-coded per engine. How a YAML file becomes these values (and is refused) is
`llmdash.engines.catalog`'s job; this module only says what a valid catalog means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Callable

from packaging.version import Version

from llmdash.vocabulary import Role

METRIC_TYPES = ("counter", "gauge", "histogram")


def _rust_float(bound: float) -> str:
    """Rust's f64 Display: the shortest text that reads back as the same float, never in exponent
    form, and without a fraction for whole numbers (2.0 -> "2", 0.0022 -> "0.0022")."""
    if float(bound).is_integer():
        return str(int(bound))
    return format(Decimal(repr(float(bound))), "f")


@dataclass(frozen=True)
class Exporter:
    """How a metrics library writes what it exports: the suffix it gives counters, and how it
    writes a bucket bound into the `le` label."""

    counter_suffix: str
    le: Callable[[float], str]


EXPORTERS = {
    "prometheus_client": Exporter("_total", lambda bound: repr(float(bound))),        # 1 -> "1.0", 0.1 -> "0.1"
    # prometheus-cpp (Triton) keeps names as declared; 500 -> "500"
    "prometheus_cpp": Exporter("", lambda bound: f"{bound:.17g}" if bound != int(bound) else str(int(bound))),
    "rust_prometheus": Exporter("", _rust_float),   # Rust `prometheus` crate (Dynamo): names as declared
    "metrics_rs": Exporter("", _rust_float),        # metrics-exporter-prometheus (TGI): never adds _total
    "llama_cpp": Exporter("", _rust_float),         # llama-server writes its /metrics text by hand
}
HISTOGRAM_PARTS = ("bucket", "sum", "count")

# Role -> metric types a source of that role may have. `part` turns a histogram into a counter.
ROLE_TYPES = {
    Role.THROUGHPUT: ("counter",),
    Role.REQUESTS: ("counter",),
    Role.TTFT: ("histogram",),
    Role.ITL: ("histogram",),
    Role.TPOT: ("histogram",),
    # a seconds counter divided by the counter its source names in `per`: a mean, where no histogram exists
    Role.TOKEN_LATENCY_MEAN: ("counter",),
    Role.PREEMPTIONS: ("counter", "gauge"),
    Role.PREEMPTIONS_PER_REQUEST: ("histogram",),
    Role.RETRACTED_INPUT_TOKENS: ("counter",),
    Role.RETRACTED_OUTPUT_TOKENS: ("counter",),
    Role.KV_USAGE: ("gauge",),
    Role.WAITING: ("gauge",),
    Role.RUNNING: ("gauge",),
    Role.ERRORS: ("counter",),   # failed finished requests, counted among `requests` (availability SLOs)
    Role.ABORTS: ("counter",),   # finished requests the client ended, among `requests`: not valid events
}
REQUIRED_ROLES = (Role.THROUGHPUT, Role.WAITING, Role.RUNNING)
# Roles every catalog must state: with sources, or with none and a note saying why (the dashboard shows it).
DECLARED_ROLES = (Role.REQUESTS, Role.KV_USAGE, Role.PREEMPTIONS)
# How a log line adds to the preemption count: the number it captures (`n`), the cumulative total it
# carries (`n`, copied), or one per line.
LOG_COUNTS = ("capture", "cumulative", "line")
# What a catalogued component is in a deployment: an engine holds KV caches and preempts; a frontend (Dynamo's
# HTTP frontend) routes requests to engines and measures latency from outside, so its latency alerts describe
# an engine's incident and a page of that engine silences them.
ENGINE_ROLE, FRONTEND_ROLE = "engine", "frontend"
COMPONENT_ROLES = (ENGINE_ROLE, FRONTEND_ROLE)
UNITS = ("seconds", "milliseconds", "ratio", "tokens", "preemptions", None)


@dataclass(frozen=True)
class Metric:
    name: str
    type: str
    labels: tuple[str, ...]
    since: Version
    removed_in: Version | None
    hidden_in: Version | None
    unit: str | None
    buckets: tuple[float, ...] | None
    help: str
    generic: bool = False  # an unprefixed name other exporters may share: read only under a `job` selector
    labels_since: tuple[tuple[str, Version], ...] = ()  # labels added after `since`: label -> first version
    # older bounds: (first version without them, bounds)
    buckets_before: tuple[tuple[Version, tuple[float, ...]], ...] = ()

    def labels_at(self, version: Version) -> tuple[str, ...]:
        """The labels the series carries in `version` (`labels` minus those added later)."""
        added = dict(self.labels_since)
        return tuple(label for label in self.labels if label not in added or added[label] <= version)

    def buckets_at(self, version: Version) -> tuple[float, ...] | None:
        """The bucket bounds `version` exports: the first older list it predates, else `buckets`."""
        return next((bounds for until, bounds in self.buckets_before if version < until), self.buckets)

    @property
    def layouts(self) -> tuple[tuple[Version | None, Version | None, tuple[float, ...]], ...]:
        """(first version, first version without, bounds) of each bucket layout the catalog records, oldest
        first; None where the catalog names no limit."""
        out, first = [], None
        for until, bounds in self.buckets_before:
            out.append((first, until, bounds))
            first = until
        return tuple(out) + (((first, None, self.buckets),) if self.buckets is not None else ())

    @property
    def exposed_until(self) -> Version | None:
        """First version that no longer exports the series by default (hidden counts as gone)."""
        return self.hidden_in or self.removed_in

    def exposed_in(self, first: Version, last: Version) -> bool:
        """True when some version in [first, last] exports this series."""
        until = self.exposed_until
        return self.since <= last and (until is None or until > first)

    @property
    def scraped_series(self) -> tuple[str, ...]:
        if self.type == "histogram":
            return tuple(f"{self.name}_{part}" for part in HISTOGRAM_PARTS)
        return (self.name,)

    @property
    def stored_series(self) -> tuple[str, ...]:
        """The names a Prometheus may store it under: the scraped series and, for a histogram, its base name, which
        holds it as a native histogram (`convert_classic_histograms_to_nhcb`, or a native exposition)."""
        return self.scraped_series + ((self.name,) if self.type == "histogram" else ())


@dataclass(frozen=True)
class Source:
    """One series feeding a signal; a signal's sources are fallbacks, newest first."""

    metric: Metric
    # label -> value, or -> alternatives (a tuple; "" matches a series without the label)
    match: tuple[tuple[str, str | tuple[str, ...]], ...] = ()
    part: str | None = None  # "sum"/"count" of a histogram used as a counter
    per: Metric | None = None  # a mean's denominator: the counter this seconds counter is divided by

    @property
    def match_text(self) -> str:
        """The match as PromQL matchers would show it, for descriptions and tables."""
        return ", ".join(f'{label}=~"{"|".join(value)}"' if isinstance(value, tuple) else f'{label}="{value}"'
                         for label, value in self.match)

    @property
    def series(self) -> str:
        return f"{self.metric.name}_{self.part}" if self.part else self.metric.name

    @property
    def kind(self) -> str:
        return "counter" if self.part else self.metric.type


@dataclass(frozen=True)
class Signal:
    role: str
    sources: tuple[Source, ...]
    note: str = ""
    # errors only: the failed requests are not among the `requests` counted (TGI counts successes alone), so a
    # request is finished when it is either
    outside_requests: bool = False
    # errors only: the exporter creates the series at its first increment, so a replica without it has had no
    # failure (TGI's metrics-rs), rather than not counting failures at all (the SLI leaves such a replica out)
    appears_at_first_increment: bool = False

    @property
    def metric_names(self) -> list[str]:
        return [source.series for source in self.sources]


@dataclass(frozen=True)
class LogPattern:
    """One log line that reports preemption, as the engine prints it in the versions [since, until)."""

    name: str
    prefix: str      # regex of the log record's prefix, accepting only the rank that speaks for the server
    message: str     # regex of the message; `(?P<n>...)` holds the number for capture/cumulative
    count: str       # one of LOG_COUNTS
    since: Version
    until: Version | None
    source: str      # where the line is printed: file, version, line
    example: str     # a real line it counts (checked at load)
    note: str = ""

    @property
    def regex(self) -> str:
        return f"^{self.prefix}{self.message}"

    @property
    def versions(self) -> str:
        return f"{self.since}+" if self.until is None else f"{self.since} to before {self.until}"


@dataclass(frozen=True)
class Ranks:
    """How an engine labels the parallel ranks of one replica. `unit`: the labels naming one KV cache inside
    an instance (a data-parallel rank: its own scheduler, batch and KV cache); `copies`: the labels of ranks
    that repeat one unit's numbers (tensor, pipeline and expert-parallel ranks of the same scheduler), so a
    value is taken once per unit (the max over its copies), never summed over them."""

    unit: tuple[str, ...] = ()
    copies: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Router:
    """A router or gateway scraped beside the engine that exports series under the engine's own names
    (production-stack's router: `vllm:num_requests_running{server=…}`). `label` is one only its series carry, so
    every read of those `series` excludes it (`label=""`): a router is neither summed into the engine's gauges
    nor taken for a replica missing its other series."""

    id: str
    title: str
    label: str
    series: tuple[str, ...]
    note: str


@dataclass(frozen=True)
class EngineSpec:
    id: str
    title: str
    exporter: str
    model_label: str
    supported_from: Version
    supported_to: Version
    slo_defaults: dict[str, float]
    metrics: dict[str, Metric]
    signals: dict[str, Signal]
    path: Path = field(compare=False)
    log_patterns: tuple[LogPattern, ...] = ()
    model_label_from_scrape: bool = False  # the engine exports no model label; a scrape relabel adds it
    selectors: tuple[tuple[str, str], ...] = ()  # default label matchers where names alone are ambiguous
    releases: str = ""  # the variant's own releases, where its versions are counted in its base's
    base: str | None = None  # the engine a variant derives from
    renames: tuple[tuple[str, tuple[str, ...]], ...] = ()  # base series -> its names here, newest first
    added_labels: tuple[str, ...] = ()  # labels a variant's exporter adds to every series
    ranks: "Ranks" = field(default_factory=lambda: Ranks())  # how parallel ranks label one replica's series
    role: str = ENGINE_ROLE  # engine, or a frontend in front of engines (`COMPONENT_ROLES`)
    routers: tuple[Router, ...] = ()  # routers that export some series under this engine's names

    def foreign_labels(self, series: str) -> tuple[str, ...]:
        """Labels that mark a series of this name as a router's, not the engine's (absent on the engine's)."""
        return tuple(router.label for router in self.routers if series in router.series)

    def exported_name(self, base_name: str) -> str | None:
        """The name a series the base engine calls `base_name` has here (newest form); None if not exported."""
        if self.base is None:
            return base_name if base_name in self.metrics else None
        names = dict(self.renames).get(base_name, ())
        return names[0] if names else None

    def has(self, role: Role) -> bool:
        """Whether the engine has a source for `role`; a name that is no `Role` raises (a typo such as
        "preemption" must not read as "this engine has none")."""
        signal = self.signals.get(_role(role))
        return bool(signal and signal.sources)

    def signal(self, role: Role) -> Signal:
        return self.signals[_role(role)]

    def note(self, role: Role) -> str:
        signal = self.signals.get(_role(role))
        return signal.note if signal else ""

    def coverage(self, role: str) -> tuple[Version, Version | None] | None:
        """Versions in which at least one source of `role` is exported (earliest since, latest until)."""
        if not self.has(role):
            return None
        metrics = [s.metric for s in self.signal(role).sources]
        until = [m.exposed_until for m in metrics]
        return min(m.since for m in metrics), (None if None in until else max(until))

    def le(self, bound: float) -> str:
        return EXPORTERS[self.exporter].le(bound)

    @property
    def log_prefix_regex(self) -> str:
        """A regex of every log-record prefix the log patterns accept (a line that may report preemption)."""
        prefixes = list(dict.fromkeys(pattern.prefix for pattern in self.log_patterns))
        return f"^{prefixes[0]}" if len(prefixes) == 1 else "^(?:" + "|".join(prefixes) + ")"

    @property
    def versions(self) -> str:
        own = f"{self.supported_from}–{self.supported_to}"
        return f"{self.releases} ({self.base} {own})" if self.base else own


UNIT_TO_SECONDS = {"seconds": 1.0, "milliseconds": 0.001}


def _role(role: str) -> Role:
    """`role` as a `Role`; ValueError naming the known roles for anything else."""
    try:
        return Role(role)
    except ValueError:
        raise ValueError(f"unknown role {role!r} (known: {', '.join(Role)})") from None


def layout_versions(first: Version | None, until: Version | None) -> str:
    """The releases of one bucket layout (`Metric.layouts`) in words; "" for a histogram with only one."""
    if first is None:
        return f"before {until}" if until is not None else ""
    return f"from {first}" if until is None else f"{first} to before {until}"


def _bound_in(bounds: tuple[float, ...], metric: Metric, target_seconds: float) -> float | None:
    wanted = target_seconds / UNIT_TO_SECONDS[metric.unit]
    return next((b for b in bounds if math.isclose(b, wanted, rel_tol=1e-9)), None)


def bucket_for(metric: Metric, target_seconds: float) -> float | None:
    """The bucket bound (in the histogram's own unit) equal to `target_seconds`, or None."""
    if metric.buckets is None or metric.unit not in UNIT_TO_SECONDS:
        return None
    return _bound_in(metric.buckets, metric, target_seconds)


def bound_problem(metric: Metric, target_seconds: float) -> str | None:
    """Why `target_seconds` cannot be read from `metric`'s buckets in every version, or None when it can."""
    if metric.buckets is None or metric.unit not in UNIT_TO_SECONDS:
        return f"{metric.name} has no known bucket bounds in seconds"
    for until, bounds in ((None, metric.buckets),) + metric.buckets_before:
        if _bound_in(bounds, metric, target_seconds) is None:
            scale = UNIT_TO_SECONDS[metric.unit]
            listed = ", ".join(f"{b * scale:g}" for b in bounds)
            which = f" before {until}" if until else ""
            return f"{target_seconds:g}s is not a bucket bound of {metric.name}{which} (bounds in seconds: {listed})"
    return None
