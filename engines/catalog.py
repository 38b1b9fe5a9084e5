"""Engine catalogs: `engines/<engine>.yaml` loaded into a typed, validated `EngineSpec`.

A catalog is data about what an engine exposes: every series exactly as scraped, its type,
labels and the versions that export it, and which series feeds each signal (role).
Capabilities (has an ITL histogram? a preemption counter?) are derived from the roles,
never hard-coded per engine. Every inconsistency is a one-line `LlmdashError` that names
the file and the key.
"""

from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Callable

from packaging.version import InvalidVersion, Version

from llmdash.errors import LlmdashError
from llmdash.inputs import read_yaml, shorten

CATALOG_DIR = Path(__file__).resolve().parent
CATALOG_DIR_ENV = "LLMDASH_CATALOG_DIR"  # to try catalogs kept outside the tree

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
ROLES = {
    "throughput": ("counter",),
    "requests": ("counter",),
    "ttft": ("histogram",),
    "itl": ("histogram",),
    "tpot": ("histogram",),
    # a seconds counter divided by the counter its source names in `per`: a mean, where no histogram exists
    "token_latency_mean": ("counter",),
    "preemptions": ("counter", "gauge"),
    "preemptions_per_request": ("histogram",),
    "retracted_input_tokens": ("counter",),
    "retracted_output_tokens": ("counter",),
    "kv_usage": ("gauge",),
    "waiting": ("gauge",),
    "running": ("gauge",),
    "errors": ("counter",),   # failed finished requests, counted among `requests` (availability SLOs)
}
REQUIRED_ROLES = ("throughput", "waiting", "running")
# Roles every catalog must state: with sources, or with none and a note saying why (the dashboard shows it).
DECLARED_ROLES = ("requests", "kv_usage", "preemptions")
LATENCY_HISTOGRAM_ROLES = ("itl", "tpot", "ttft")
MEAN_LATENCY_ROLE = "token_latency_mean"   # its sources carry `per`: the counter the seconds are divided by
# How a log line adds to the preemption count: the number it captures (`n`), the cumulative total it
# carries (`n`, copied), or one per line.
LOG_COUNTS = ("capture", "cumulative", "line")
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
    buckets_before: tuple[tuple[Version, tuple[float, ...]], ...] = ()  # older bounds: (first version without them, bounds)

    def labels_at(self, version: Version) -> tuple[str, ...]:
        """The labels the series carries in `version` (`labels` minus those added later)."""
        added = dict(self.labels_since)
        return tuple(label for label in self.labels if label not in added or added[label] <= version)

    def buckets_at(self, version: Version) -> tuple[float, ...] | None:
        """The bucket bounds `version` exports: the first older list it predates, else `buckets`."""
        return next((bounds for until, bounds in self.buckets_before if version < until), self.buckets)

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

    def exported_name(self, base_name: str) -> str | None:
        """The name a series the base engine calls `base_name` has here (newest form); None if not exported."""
        if self.base is None:
            return base_name if base_name in self.metrics else None
        names = dict(self.renames).get(base_name, ())
        return names[0] if names else None

    def has(self, role: str) -> bool:
        signal = self.signals.get(role)
        return bool(signal and signal.sources)

    def signal(self, role: str) -> Signal:
        return self.signals[role]

    def note(self, role: str) -> str:
        signal = self.signals.get(role)
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
    def versions(self) -> str:
        own = f"{self.supported_from}–{self.supported_to}"
        return f"{self.releases} ({self.base} {own})" if self.base else own


UNIT_TO_SECONDS = {"seconds": 1.0, "milliseconds": 0.001}


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


def catalog_dir() -> Path:
    """The catalogs' directory; a mistyped LLMDASH_CATALOG_DIR is an error, never zero engines."""
    configured = os.environ.get(CATALOG_DIR_ENV)
    if not configured:
        return CATALOG_DIR
    if not Path(configured).is_dir():
        raise LlmdashError(f"{CATALOG_DIR_ENV}={shorten(configured)}: no such directory")
    return Path(configured)


def available_engines(directory: Path | None = None) -> list[str]:
    """Every engine with a catalog in `directory`; at least one, so a build never covers nothing."""
    directory = directory or catalog_dir()
    engines = sorted(p.stem for p in directory.glob("*.yaml"))
    if not engines:
        raise LlmdashError(f"{directory}: no engine catalogs (*.yaml) in this directory")
    return engines


def load_engine(engine: str, directory: Path | None = None) -> EngineSpec:
    directory = directory or catalog_dir()
    path = directory / f"{engine}.yaml"
    if not path.is_file():
        known = ", ".join(available_engines(directory))
        raise LlmdashError(f"unknown engine {engine!r}: no catalog {path.name} (known: {known})")
    return load_catalog(path)


def load_all(directory: Path | None = None) -> dict[str, EngineSpec]:
    return {name: load_engine(name, directory) for name in available_engines(directory)}


def load_catalog(path: Path) -> EngineSpec:
    """The spec in `path`, parsed once per process (per file version) with the C YAML loader."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise LlmdashError(f"{path}: cannot read ({exc.strerror})") from None
    return _load_catalog(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=None)
def _load_catalog(path: Path, _mtime_ns: int, _size: int) -> EngineSpec:
    return _Parser(path).engine(read_yaml(path, "catalog"))


def _finite_number(value) -> bool:
    """A YAML int or float that is neither NaN nor infinite (bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


class _Parser:
    def __init__(self, path: Path):
        self.path = path

    def fail(self, key: str, problem: str) -> LlmdashError:
        return LlmdashError(f"{self.path}: {key[:200]}: {problem}")

    def mapping(self, value, key: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a mapping, got {type(value).__name__}")
        for name in required:
            if name not in value:
                raise self.fail(f"{key}.{name}" if key else name, "missing")
        for name in value:
            if name not in required + optional:
                raise self.fail(f"{key}.{name}" if key else str(name), "unknown key")
        return value

    def text(self, value, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, "expected a non-empty string")
        return value

    def version(self, value, key: str) -> Version:
        try:
            if isinstance(value, (list, dict)) or len(str(value)) > 40:
                raise InvalidVersion
            return Version(str(value))
        except InvalidVersion:
            raise self.fail(key, f"not a version: {shorten(value)}") from None

    def engine(self, data) -> EngineSpec:
        if data is None:
            raise self.fail("engine", "missing (empty file)")
        variant = {}
        if isinstance(data, dict) and "derive" in data:
            data, variant = self.derived(data)
        data = self.mapping(data, "", ("engine", "title", "exporter", "model_label", "supported", "slo_defaults",
                                       "metrics", "signals"), ("model_label_from_scrape", "selectors", "logs"))
        engine = self.text(data["engine"], "engine")
        if engine != self.path.stem:
            raise self.fail("engine", f"{shorten(engine)} does not match the file name {self.path.stem!r}")
        exporter = data["exporter"]
        if not isinstance(exporter, str) or exporter not in EXPORTERS:
            raise self.fail("exporter", f"expected one of {', '.join(EXPORTERS)}, got {shorten(exporter)}")
        supported = self.mapping(data["supported"], "supported", ("from", "to"))
        first = self.version(supported["from"], "supported.from")
        last = self.version(supported["to"], "supported.to")
        if first > last:
            raise self.fail("supported", f"from {first} is after to {last}")
        model_label = self.text(data["model_label"], "model_label")
        from_scrape = data.get("model_label_from_scrape", False)
        if not isinstance(from_scrape, bool):
            raise self.fail("model_label_from_scrape", f"expected true or false, got {shorten(from_scrape)}")
        selectors = self.label_values(data.get("selectors", {}), "selectors")
        if not isinstance(data["metrics"], dict) or not data["metrics"]:
            raise self.fail("metrics", "expected a non-empty mapping of series name to metric")
        for name in data["metrics"]:
            if not isinstance(name, str) or not name:
                raise self.fail(f"metrics.{shorten(name)}", "a series name must be a non-empty string")
        metrics = {name: self.metric(name, body, exporter) for name, body in data["metrics"].items()}
        for metric in metrics.values():
            if not metric.exposed_in(first, last):
                raise self.fail(f"metrics.{metric.name}", f"not exported by any supported version {first}–{last}")
        if not isinstance(data["signals"], dict):
            raise self.fail("signals", "expected a mapping of role to signal")
        model_check = None if from_scrape else model_label
        signals = {role: self.signal(role, body, metrics, model_check) for role, body in data["signals"].items()}
        for role in REQUIRED_ROLES:
            if role not in signals or not signals[role].sources:
                raise self.fail(f"signals.{role}", "missing (every dashboard needs it)")
        for role in DECLARED_ROLES:
            if role not in signals:
                raise self.fail(f"signals.{role}", "missing (give its sources, or none and a note saying why)")
        if not any(signals.get(r) and signals[r].sources for r in LATENCY_HISTOGRAM_ROLES + (MEAN_LATENCY_ROLE,)):
            raise self.fail("signals", f"no latency signal (a histogram for itl, tpot or ttft, or {MEAN_LATENCY_ROLE})")
        preemptions = signals.get("preemptions")
        if preemptions and preemptions.sources and preemptions.sources[0].kind == "counter" and \
                not signals["requests"].sources:
            raise self.fail("signals.requests", "a preemption counter is read per finished request: "
                                                "give the requests counter")
        slo = self.slo_defaults(data["slo_defaults"], signals)
        return EngineSpec(engine, self.text(data["title"], "title"), exporter, model_label, first, last, slo,
                          metrics, signals, self.path, log_patterns=self.log_patterns(data.get("logs")),
                          model_label_from_scrape=from_scrape, selectors=tuple(sorted(selectors.items())), **variant)

    def label_values(self, body, key: str) -> dict[str, str]:
        if not isinstance(body, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in body.items()):
            raise self.fail(key, "expected a mapping of label name to string value")
        return body

    def derived(self, data: dict) -> tuple[dict, dict]:
        """A variant's catalog: its base's, with every series renamed, the ones it does not re-export
        dropped, and versions limited to the base releases it re-exports.

        Each base series is read under every name in `rename` that applies to it (newest first); a
        signal's sources become each rename's copy of the base sources in turn, so they fall back per
        replica like any rename. `add_labels` are labels the variant's exporter puts on every series;
        `buckets` the bounds of histograms it declares with other bounds than its base's newest.
        """
        data = self.mapping(data, "", ("engine", "title", "derive", "releases"), ("selectors", "notes"))
        derive = self.mapping(data["derive"], "derive", ("from", "rename"),
                              ("versions", "drop", "generic", "add_labels", "buckets"))
        base_id = self.text(derive["from"], "derive.from")
        base_path = self.path.parent / f"{base_id}.yaml"
        if base_id == self.path.stem or "/" in base_id or not base_path.is_file():
            raise self.fail("derive.from", f"no catalog {shorten(base_id + '.yaml')} beside this one to derive from")
        base = read_yaml(base_path, "catalog")
        if not isinstance(base, dict) or "derive" in base:
            raise self.fail("derive.from", f"{base_id} is not a plain catalog (a variant cannot derive from a variant)")
        base_spec = load_catalog(base_path)     # the base must be valid on its own; its errors name its file
        renames = derive["rename"]
        if (not isinstance(renames, list) or not renames
                or not all(isinstance(r, dict) and set(r) == {"prefix", "to"} and all(isinstance(v, str) for v in r.values())
                           for r in renames)):
            raise self.fail("derive.rename", "expected a list of {prefix: old, to: new}, newest first")
        drop = derive.get("drop", [])
        if not isinstance(drop, list) or not all(isinstance(n, str) and n in base["metrics"] for n in drop):
            raise self.fail("derive.drop", f"expected a list of {base_id}'s series names")
        generic = derive.get("generic", False)
        if not isinstance(generic, bool):
            raise self.fail("derive.generic", f"expected true or false, got {shorten(generic)}")
        buckets = derive.get("buckets", {})
        histograms = {name for name, metric in base_spec.metrics.items() if metric.type == "histogram"}
        if not isinstance(buckets, dict) or not set(buckets) <= histograms:
            raise self.fail("derive.buckets", f"expected a mapping of {base_id}'s histogram names to bucket bounds")
        added = derive.get("add_labels", [])
        if not isinstance(added, list) or not all(isinstance(label, str) and label for label in added):
            raise self.fail("derive.add_labels", "expected a list of label names")
        versions = self.mapping(derive.get("versions", base["supported"]), "derive.versions", ("from", "to"))
        first = self.version(versions["from"], "derive.versions.from")
        last = self.version(versions["to"], "derive.versions.to")
        if not base_spec.supported_from <= first <= last <= base_spec.supported_to:
            raise self.fail("derive.versions", f"{first}–{last} is not within {base_id}'s "
                            f"{base_spec.supported_from}–{base_spec.supported_to}")

        def renamed(base_name: str) -> list[str | None]:
            """The name under each rename, None where its prefix does not apply."""
            out = [r["to"] + base_name[len(r["prefix"]):] if base_name.startswith(r["prefix"]) else None
                   for r in renames]
            if not any(out):
                raise self.fail("derive.rename", f"no prefix applies to {base_id}'s {base_name}")
            return out

        def names(base_name: str) -> list[str]:
            return list(dict.fromkeys(n for n in renamed(base_name) if n))

        kept = [name for name, metric in base_spec.metrics.items()
                if name not in drop and metric.exposed_in(first, last)]
        metrics = {new: {**base["metrics"][n], "labels": list(dict.fromkeys(base["metrics"][n]["labels"] + added)),
                         **({"buckets": buckets[n]} if n in buckets else {}), **({"generic": True} if generic else {})}
                   for n in kept for new in names(n)}
        notes = self.label_values(data.get("notes", {}), "notes")
        signals = {}
        for role, body in base["signals"].items():
            copies = []
            for i in range(len(renames)):
                for src in body["sources"]:
                    if src["metric"] not in kept or src.get("per", src["metric"]) not in kept:
                        continue
                    copy = {**src, "metric": renamed(src["metric"])[i],
                            **({"per": renamed(src["per"])[i]} if "per" in src else {})}
                    if copy["metric"] and copy.get("per", True) and copy not in copies:
                        copies.append(copy)
            note = notes.get(role, body.get("note"))
            if body["sources"] and not copies and role not in notes:
                raise self.fail(f"notes.{role}", f"every source of {base_id}'s {role} is dropped; say why here")
            signals[role] = {"sources": copies, **({"note": note} if note else {})}
        unknown = set(notes) - set(signals)
        if unknown:
            raise self.fail(f"notes.{sorted(unknown)[0]}", f"{base_id} has no such signal")
        catalog = {**base, "engine": data["engine"], "title": data["title"], "metrics": metrics, "signals": signals,
                   "supported": {"from": str(first), "to": str(last)}}
        if "selectors" in data:
            catalog["selectors"] = data["selectors"]
        # A variant's process may print its base's log lines in another format (NIM's containers, Ray's
        # workers), and which ones is unconfirmed: a variant counts no log lines.
        catalog.pop("logs", None)
        variant = {"releases": self.text(data["releases"], "releases"), "base": base_id,
                   "renames": tuple((n, tuple(names(n))) for n in kept), "added_labels": tuple(added)}
        return catalog, variant

    def log_patterns(self, body) -> tuple[LogPattern, ...]:
        """The optional `logs:` section: mapping of name -> the log line that reports preemption."""
        if body is None:
            return ()
        if not isinstance(body, dict) or not body:
            raise self.fail("logs", "expected a non-empty mapping of pattern name to log line")
        return tuple(self.log_pattern(name, entry) for name, entry in body.items())

    def log_pattern(self, name, body) -> LogPattern:
        key = f"logs.{name[:80] if isinstance(name, str) else shorten(name)}"
        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
            raise self.fail(key, "a pattern name is lower-case letters, digits and '-'")
        body = self.mapping(body, key, ("prefix", "message", "count", "since", "source", "example"), ("until", "note"))
        count = body["count"]
        if count not in LOG_COUNTS:
            raise self.fail(f"{key}.count", f"expected one of {', '.join(LOG_COUNTS)}, got {shorten(count)}")
        prefix, message = self.text(body["prefix"], f"{key}.prefix"), self.text(body["message"], f"{key}.message")
        try:
            compiled = re.compile(f"^{prefix}{message}")
        except re.error as exc:
            raise self.fail(key, f"not a regular expression: {exc}") from None
        wants_number = count != "line"
        if wants_number != ("n" in compiled.groupindex):
            raise self.fail(f"{key}.message", "a (?P<n>...) group is required for count capture/cumulative "
                                              "and not allowed for count line")
        since = self.version(body["since"], f"{key}.since")
        until = self.version(body["until"], f"{key}.until") if "until" in body else None
        if until is not None and until <= since:
            raise self.fail(f"{key}.until", f"{until} is not after since {since}")
        example = self.text(body["example"], f"{key}.example")
        found = compiled.search(example)
        if not found or (wants_number and not found.group("n").isdigit()):
            raise self.fail(f"{key}.example", "the pattern does not count this line")
        note = body.get("note", "")
        return LogPattern(name, prefix, message, count, since, until, self.text(body["source"], f"{key}.source"),
                          example, self.text(note, f"{key}.note") if note else "")

    def slo_defaults(self, body, signals: dict[str, Signal]) -> dict[str, float]:
        """Default SLO targets in seconds; each must be a bound of the histogram it is read from. A TTFT
        target is required wherever the engine has a TTFT histogram (TGI has none)."""
        has_ttft = bool(signals.get("ttft") and signals["ttft"].sources)
        body = self.mapping(body, "slo_defaults", ("ttft_seconds",) if has_ttft else (), ("ttft_seconds", "itl_seconds"))
        targets = {}
        for name, value in body.items():
            key = f"slo_defaults.{name}"
            if not _finite_number(value) or value <= 0:
                raise self.fail(key, f"expected a positive number of seconds, got {shorten(value)}")
            role = "ttft" if name == "ttft_seconds" else next((r for r in ("itl", "tpot") if r in signals), None)
            if role is None or role not in signals or not signals[role].sources:
                raise self.fail(key, "this engine has no histogram to read it from")
            for source in signals[role].sources:
                problem = bound_problem(source.metric, float(value))
                if problem:
                    raise self.fail(key, problem)
            targets[name] = float(value)
        return targets

    def metric(self, name, body, exporter: str) -> Metric:
        key = f"metrics.{name}"
        body = self.mapping(body, key, ("type", "labels", "since", "help"),
                            ("unit", "buckets", "removed_in", "hidden_in", "generic", "labels_since",
                             "buckets_before"))
        kind = body["type"]
        if kind not in METRIC_TYPES:
            raise self.fail(f"{key}.type", f"expected one of {', '.join(METRIC_TYPES)}, got {shorten(kind)}")
        suffix = EXPORTERS[exporter].counter_suffix
        if kind == "counter" and suffix and not name.endswith(suffix):
            raise self.fail(key, f"a {exporter} counter scrapes with a {suffix} suffix; write it as {name}{suffix}")
        if kind == "histogram" and name.endswith(tuple(f"_{p}" for p in HISTOGRAM_PARTS)):
            raise self.fail(key, "name a histogram by its family, without _bucket/_sum/_count")
        labels = body["labels"]
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise self.fail(f"{key}.labels", "expected a list of label names")
        unit = body.get("unit")
        if unit not in UNITS:
            raise self.fail(f"{key}.unit", f"expected one of {', '.join(u for u in UNITS if u)}, got {shorten(unit)}")
        buckets = body.get("buckets")
        if buckets is not None:
            if kind != "histogram":
                raise self.fail(f"{key}.buckets", "only histograms have buckets")
            buckets = self.bounds(buckets, f"{key}.buckets")
        since = self.version(body["since"], f"{key}.since")
        removed = self.version(body["removed_in"], f"{key}.removed_in") if "removed_in" in body else None
        hidden = self.version(body["hidden_in"], f"{key}.hidden_in") if "hidden_in" in body else None
        for bound, label in ((removed, "removed_in"), (hidden, "hidden_in")):
            if bound is not None and bound <= since:
                raise self.fail(f"{key}.{label}", f"{bound} is not after since {since}")
        generic = body.get("generic", False)
        if not isinstance(generic, bool):
            raise self.fail(f"{key}.generic", f"expected true or false, got {shorten(generic)}")
        return Metric(name, kind, tuple(labels), since, removed, hidden, unit, buckets,
                      self.text(body["help"], f"{key}.help"), generic,
                      self.labels_since(body.get("labels_since", {}), f"{key}.labels_since", labels, since),
                      self.buckets_before(body.get("buckets_before", {}), f"{key}.buckets_before", buckets, since))

    def bounds(self, buckets, key: str) -> tuple[float, ...]:
        if not isinstance(buckets, list) or not buckets or not all(_finite_number(b) for b in buckets):
            raise self.fail(key, "expected a list of finite numbers")
        if any(b >= c for b, c in zip(buckets, buckets[1:])):
            raise self.fail(key, "bounds must be strictly increasing")
        return tuple(float(b) for b in buckets)

    def labels_since(self, body, key: str, labels: list[str], since: Version) -> tuple[tuple[str, Version], ...]:
        """Labels the series gained after its `since`: label -> the first version that has it."""
        if not isinstance(body, dict):
            raise self.fail(key, "expected a mapping of label to the first version that has it")
        out = []
        for label, first in body.items():
            if label not in labels:
                raise self.fail(f"{key}.{label}", "not in this metric's labels")
            version = self.version(first, f"{key}.{label}")
            if version <= since:
                raise self.fail(f"{key}.{label}", f"{version} is not after since {since}")
            out.append((label, version))
        return tuple(out)

    def buckets_before(self, body, key: str, buckets, since: Version) -> tuple[tuple[Version, tuple[float, ...]], ...]:
        """Older bound lists: version -> the bounds every version before it (and after the previous key) exports."""
        if not isinstance(body, dict):
            raise self.fail(key, "expected a mapping of version to the bounds exported before it")
        if body and buckets is None:
            raise self.fail(key, "only a histogram with buckets has older ones")
        out = sorted((self.version(v, f"{key}.{v}"), self.bounds(b, f"{key}.{v}")) for v, b in body.items())
        if out and out[0][0] <= since:
            raise self.fail(f"{key}.{out[0][0]}", f"not after since {since}")
        return tuple(out)

    def signal(self, role, body, metrics: dict[str, Metric], model_label: str | None) -> Signal:
        key = f"signals.{role}"
        if role not in ROLES:
            raise self.fail(key, f"unknown role (known: {', '.join(ROLES)})")
        body = self.mapping(body, key, ("sources",), ("note",))
        if not isinstance(body["sources"], list):
            raise self.fail(f"{key}.sources", "expected a list")
        if not body["sources"] and not body.get("note"):
            raise self.fail(f"{key}.note", "a signal with no sources must say why in a note")
        sources = tuple(self.source(f"{key}.sources[{i}]", s, metrics, role, model_label)
                        for i, s in enumerate(body["sources"]))
        note = body.get("note", "")
        return Signal(role, sources, self.text(note, f"{key}.note") if note else "")

    def source(self, key, body, metrics, role, model_label: str | None) -> Source:
        body = self.mapping(body, key, ("metric",), ("match", "part", "per"))
        name = body["metric"]
        if not isinstance(name, str) or name not in metrics:
            raise self.fail(f"{key}.metric", f"{shorten(name)} is not in this catalog's metrics")
        metric = metrics[name]
        part = body.get("part")
        if part is not None and (metric.type != "histogram" or part not in ("sum", "count")):
            raise self.fail(f"{key}.part", "only a histogram's sum or count can stand in for a counter")
        kind = "counter" if part else metric.type
        if kind not in ROLES[role]:
            raise self.fail(key, f"{name} is a {kind}; role {role} needs a {' or '.join(ROLES[role])}")
        per = self.per(key, body, metrics, role)
        match = body.get("match") or {}
        if not isinstance(match, dict):
            raise self.fail(f"{key}.match", "expected a mapping of label to value")
        values = {}
        for label, value in match.items():
            if label not in metric.labels:
                raise self.fail(f"{key}.match.{label}", f"{name} has no label {shorten(label)}")
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                values[label] = tuple(value)    # alternatives; "" also matches a series without the label
            elif isinstance(value, str):
                values[label] = value
            else:
                raise self.fail(f"{key}.match.{label}", "a label value is a string (quoted), or a list of them")
            added = dict(metric.labels_since).get(label)
            if added is not None and "" not in (values[label] if isinstance(values[label], tuple) else (values[label],)):
                raise self.fail(f"{key}.match.{label}", f"{name} has {label} only from {added}: "
                                f'add "" to the values, or older versions match nothing')
        if model_label is not None and model_label not in metric.labels_at(metric.since):
            raise self.fail(f"{key}.metric", f"{name} lacks the model label {model_label!r}")
        return Source(metric, tuple(sorted(values.items())), part, per)

    def per(self, key: str, body: dict, metrics: dict[str, Metric], role: str) -> Metric | None:
        """A mean's denominator: required for the mean latency role (a seconds counter), allowed nowhere else."""
        if role != MEAN_LATENCY_ROLE:
            if "per" in body:
                raise self.fail(f"{key}.per", f"only a {MEAN_LATENCY_ROLE} source is divided by another counter")
            return None
        if metrics[body["metric"]].unit not in UNIT_TO_SECONDS:
            raise self.fail(f"{key}.metric", f"{body['metric']} is not in seconds (give it a unit)")
        name = body.get("per")
        if name is None:
            raise self.fail(f"{key}.per", "missing: the counter the seconds are divided by")
        if not isinstance(name, str) or name not in metrics or metrics[name].type != "counter":
            raise self.fail(f"{key}.per", f"{shorten(name)} is not a counter in this catalog's metrics")
        return metrics[name]
