"""Engine catalogs: `engines/<engine>.yaml` loaded into a typed, validated `EngineSpec`.

The shape of a catalog (keys, types, names, enums) is checked against `llmdash.engines.schema`;
what one key means for another (a source's metric exists, an SLO target is a bucket bound, a log
pattern counts its example) is checked here; a variant is derived by `llmdash.engines.variants`.
Every inconsistency is a one-line `LlmdashError` that names the file and the key.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

from packaging.version import InvalidVersion, Version

from llmdash.engines.log_regex import PatternError, compile_pattern
from llmdash.engines.model import (DECLARED_ROLES, ENGINE_ROLE, EXPORTERS, HISTOGRAM_PARTS, REQUIRED_ROLES,
                                   ROLE_TYPES, UNIT_TO_SECONDS, EngineSpec, LogPattern, Metric, Ranks, Router, Signal,
                                   Source, bound_problem)
from llmdash.engines.schema import first_problem
from llmdash.engines.variants import derive
from llmdash.errors import LlmdashError
from llmdash.inputs import read_yaml, shorten
from llmdash.vocabulary import LATENCY_ROLES, RESERVED_ENGINE_IDS, Role

CATALOG_DIR = Path(__file__).resolve().parent
CATALOG_DIR_ENV = "LLMDASH_CATALOG_DIR"  # to try catalogs kept outside the tree


def catalog_dir() -> Path:
    """The catalogs' directory; a mistyped LLMDASH_CATALOG_DIR is an error, never zero engines."""
    configured = os.environ.get(CATALOG_DIR_ENV)
    if not configured:
        return CATALOG_DIR
    if not Path(configured).is_dir():
        raise LlmdashError(f"{CATALOG_DIR_ENV}={shorten(configured)}: no such directory")
    return Path(configured)


def available_engines(directory: Path | None = None) -> list[str]:
    """Every engine with a catalog in `directory`; at least one, so a build never covers nothing.
    Only regular files are catalogs: a FIFO or a folder named `x.yaml` is not an engine."""
    directory = directory or catalog_dir()
    engines = sorted(p.stem for p in directory.glob("*.yaml") if p.is_file())
    if not engines:
        raise LlmdashError(f"{directory}: no engine catalogs (*.yaml) in this directory")
    return engines


def load_engine(engine: str, directory: Path | None = None) -> EngineSpec:
    directory = directory or catalog_dir()
    path = directory / f"{engine}.yaml"
    if not path.is_file():
        if path.exists():
            raise LlmdashError(f"{path}: catalog is not a regular file")
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
    """The checks of one catalog file that relate keys to each other; the schema has checked the shape."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, key: str, problem: str) -> LlmdashError:
        return LlmdashError(f"{self.path}: {key[:200]}: {problem}")

    def check(self, data, kind: str) -> None:
        problem = first_problem(data, kind)
        if problem is not None:
            raise self.fail(*problem)

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
        self.check(data, "catalog")
        engine = data["engine"]
        if engine in RESERVED_ENGINE_IDS:
            raise self.fail("engine", f"{engine!r} is reserved: llmdash's own dashboard of that name would be replaced")
        if engine != self.path.stem:
            raise self.fail("engine", f"{shorten(engine)} does not match the file name {self.path.stem!r}")
        exporter = data["exporter"]
        first = self.version(data["supported"]["from"], "supported.from")
        last = self.version(data["supported"]["to"], "supported.to")
        if first > last:
            raise self.fail("supported", f"from {first} is after to {last}")
        model_label = data["model_label"]
        from_scrape = data.get("model_label_from_scrape", False)
        metrics = {name: self.metric(name, body, exporter) for name, body in data["metrics"].items()}
        for metric in metrics.values():
            if not metric.exposed_in(first, last):
                raise self.fail(f"metrics.{metric.name}", f"not exported by any supported version {first}–{last}")
        model_check = None if from_scrape else model_label
        signals = {role: self.signal(role, body, metrics, model_check) for role, body in data["signals"].items()}
        for role in REQUIRED_ROLES:
            if role not in signals or not signals[role].sources:
                raise self.fail(f"signals.{role}", "missing (every dashboard needs it)")
        for role in DECLARED_ROLES:
            if role not in signals:
                raise self.fail(f"signals.{role}", "missing (give its sources, or none and a note saying why)")
        if not any(signals.get(r) and signals[r].sources for r in LATENCY_ROLES):
            raise self.fail("signals", f"no latency signal (a histogram for itl, tpot or ttft, "
                                       f"or {Role.TOKEN_LATENCY_MEAN})")
        preemptions = signals.get(Role.PREEMPTIONS)
        if preemptions and preemptions.sources and preemptions.sources[0].kind == "counter" and \
                not signals[Role.REQUESTS].sources:
            raise self.fail("signals.requests", "a preemption counter is read per finished request: "
                                                "give the requests counter")
        slo = self.slo_defaults(data["slo_defaults"], signals)
        spec = EngineSpec(engine, data["title"], exporter, model_label, first, last, slo, metrics, signals, self.path,
                          log_patterns=self.log_patterns(data.get("logs")), model_label_from_scrape=from_scrape,
                          selectors=tuple(sorted(data.get("selectors", {}).items())),
                          ranks=self.ranks(data.get("ranks") or {}, metrics), role=data.get("role", ENGINE_ROLE),
                          routers=self.routers(data.get("routers") or {}, metrics), **variant)
        if spec.log_patterns:
            self.regex(spec.log_prefix_regex, "logs")   # mtail's program also matches every prefix at once
        return spec

    def ranks(self, body: dict, metrics: dict[str, Metric]) -> Ranks:
        """The rank labels, each carried by some series (a misspelt one would silently dedup nothing)."""
        unit, copies = tuple(body.get("unit", ())), tuple(body.get("copies", ()))
        carried = {label for metric in metrics.values() for label in metric.labels}
        for kind, labels in (("unit", unit), ("copies", copies)):
            for label in labels:
                if label not in carried:
                    raise self.fail(f"ranks.{kind}", f"no series of this catalog has the label {shorten(label)}")
        if set(unit) & set(copies):
            raise self.fail("ranks", "a label is either a unit or a copy, not both")
        return Ranks(unit, copies, body.get("note", ""))

    def routers(self, body: dict, metrics: dict[str, Metric]) -> tuple[Router, ...]:
        """Each router's series are this catalog's, and none of them carries the router's label itself (else the
        exclusion would drop the engine's own series)."""
        out = []
        for router_id, router in body.items():
            for name in router["series"]:
                if name not in metrics:
                    raise self.fail(f"routers.{router_id}.series", f"{shorten(name)} is not in this catalog's metrics")
                if router["label"] in metrics[name].labels:
                    raise self.fail(f"routers.{router_id}.label",
                                    f"{name} carries {router['label']} itself: it cannot tell the router apart")
            out.append(Router(router_id, router["title"], router["label"], tuple(router["series"]), router["note"]))
        return tuple(out)

    def derived(self, data: dict) -> tuple[dict, dict]:
        """A variant's catalog (see `llmdash.engines.variants`), from its base beside it."""
        self.check(data, "variant")
        base_id = data["derive"]["from"]
        base_path = self.path.parent / f"{base_id}.yaml"
        if base_id == self.path.stem or not base_path.is_file():
            raise self.fail("derive.from", f"no catalog {shorten(base_id + '.yaml')} beside this one to derive from")
        base = read_yaml(base_path, "catalog")
        if not isinstance(base, dict) or "derive" in base:
            raise self.fail("derive.from", f"{base_id} is not a plain catalog (a variant cannot derive from a variant)")
        base_spec = load_catalog(base_path)     # the base must be valid on its own; its errors name its file
        return derive(data, base, base_spec, self)

    def regex(self, pattern: str, key: str):
        try:
            return compile_pattern(pattern)
        except PatternError as exc:
            raise self.fail(key, str(exc)) from None

    def log_patterns(self, body) -> tuple[LogPattern, ...]:
        """The optional `logs:` section: mapping of name -> the log line that reports preemption."""
        return tuple(self.log_pattern(name, entry) for name, entry in (body or {}).items())

    def log_pattern(self, name: str, body: dict) -> LogPattern:
        key = f"logs.{name}"
        count, prefix, message = body["count"], body["prefix"], body["message"]
        self.regex(f"^{prefix}", f"{key}.prefix")
        compiled = self.regex(f"^{prefix}{message}", key)
        wants_number = count != "line"
        if wants_number != ("n" in compiled.groupindex):
            raise self.fail(f"{key}.message", "a (?P<n>...) group is required for count capture/cumulative "
                                              "and not allowed for count line")
        since = self.version(body["since"], f"{key}.since")
        until = self.version(body["until"], f"{key}.until") if "until" in body else None
        if until is not None and until <= since:
            raise self.fail(f"{key}.until", f"{until} is not after since {since}")
        example = body["example"]
        found = compiled.search(example)   # RE2: time linear in the line, whatever the pattern
        if not found or (wants_number and not (found.group("n") or "").isdigit()):
            raise self.fail(f"{key}.example", "the pattern does not count this line")
        return LogPattern(name, prefix, message, count, since, until, body["source"], example, body.get("note") or "")

    def slo_defaults(self, body: dict, signals: dict[str, Signal]) -> dict[str, float]:
        """Default SLO targets in seconds; each must be a bound of the histogram it is read from. A TTFT
        target is required wherever the engine has a TTFT histogram (TGI has none)."""
        if signals.get(Role.TTFT) and signals[Role.TTFT].sources and "ttft_seconds" not in body:
            raise self.fail("slo_defaults.ttft_seconds", "missing")
        targets = {}
        for name, value in body.items():
            key = f"slo_defaults.{name}"
            if not _finite_number(value) or value <= 0:
                raise self.fail(key, f"expected a positive number of seconds, got {shorten(value)}")
            role = Role.TTFT if name == "ttft_seconds" else next((r for r in (Role.ITL, Role.TPOT) if r in signals),
                                                                  None)
            if role is None or role not in signals or not signals[role].sources:
                raise self.fail(key, "this engine has no histogram to read it from")
            for source in signals[role].sources:
                problem = bound_problem(source.metric, float(value))
                if problem:
                    raise self.fail(key, problem)
            targets[name] = float(value)
        return targets

    def metric(self, name: str, body: dict, exporter: str) -> Metric:
        key = f"metrics.{name}"
        kind = body["type"]
        suffix = EXPORTERS[exporter].counter_suffix
        if kind == "counter" and suffix and not name.endswith(suffix):
            raise self.fail(key, f"a {exporter} counter scrapes with a {suffix} suffix; write it as {name}{suffix}")
        if kind == "histogram" and name.endswith(tuple(f"_{p}" for p in HISTOGRAM_PARTS)):
            raise self.fail(key, "name a histogram by its family, without _bucket/_sum/_count")
        labels = body["labels"]
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
        return Metric(name, kind, tuple(labels), since, removed, hidden, body.get("unit"), buckets, body["help"],
                      body.get("generic", False),
                      self.labels_since(body.get("labels_since", {}), f"{key}.labels_since", labels, since),
                      self.buckets_before(body.get("buckets_before", {}), f"{key}.buckets_before", buckets, since))

    def bounds(self, buckets: list, key: str) -> tuple[float, ...]:
        if not all(_finite_number(b) for b in buckets):
            raise self.fail(key, "expected a list of finite numbers")
        if any(b >= c for b, c in zip(buckets, buckets[1:])):
            raise self.fail(key, "bounds must be strictly increasing")
        return tuple(float(b) for b in buckets)

    def labels_since(self, body: dict, key: str, labels: list[str], since: Version) -> tuple[tuple[str, Version], ...]:
        """Labels the series gained after its `since`: label -> the first version that has it."""
        out = []
        for label, first in body.items():
            if label not in labels:
                raise self.fail(f"{key}.{label}", "not in this metric's labels")
            version = self.version(first, f"{key}.{label}")
            if version <= since:
                raise self.fail(f"{key}.{label}", f"{version} is not after since {since}")
            out.append((label, version))
        return tuple(out)

    def buckets_before(self, body: dict, key: str, buckets,
                       since: Version) -> tuple[tuple[Version, tuple[float, ...]], ...]:
        """Older bound lists: version -> the bounds every version before it (and after the previous key) exports."""
        if body and buckets is None:
            raise self.fail(key, "only a histogram with buckets has older ones")
        out = sorted((self.version(v, f"{key}.{v}"), self.bounds(b, f"{key}.{v}")) for v, b in body.items())
        if out and out[0][0] <= since:
            raise self.fail(f"{key}.{out[0][0]}", f"not after since {since}")
        return tuple(out)

    def signal(self, role: str, body: dict, metrics: dict[str, Metric], model_label: str | None) -> Signal:
        key = f"signals.{role}"
        if not body["sources"] and not body.get("note"):
            raise self.fail(f"{key}.note", "a signal with no sources must say why in a note")
        sources = tuple(self.source(f"{key}.sources[{i}]", s, metrics, role, model_label)
                        for i, s in enumerate(body["sources"]))
        outside = body.get("outside_requests", False)
        if outside and role != Role.ERRORS:
            raise self.fail(f"{key}.outside_requests", "only the errors signal is counted apart from requests")
        first_increment = body.get("appears_at_first_increment", False)
        if first_increment and role != Role.ERRORS:
            raise self.fail(f"{key}.appears_at_first_increment", "only the errors signal is told apart by its absence")
        return Signal(role, sources, body.get("note") or "", outside, first_increment)

    def source(self, key: str, body: dict, metrics: dict[str, Metric], role: str, model_label: str | None) -> Source:
        name = body["metric"]
        if name not in metrics:
            raise self.fail(f"{key}.metric", f"{shorten(name)} is not in this catalog's metrics")
        metric = metrics[name]
        part = body.get("part")
        if part is not None and metric.type != "histogram":
            raise self.fail(f"{key}.part", "only a histogram's sum or count can stand in for a counter")
        kind = "counter" if part else metric.type
        if kind not in ROLE_TYPES[role]:
            raise self.fail(key, f"{name} is a {kind}; role {role} needs a {' or '.join(ROLE_TYPES[role])}")
        per = self.per(key, body, metrics, role)
        values = {}
        for label, value in (body.get("match") or {}).items():
            if label not in metric.labels:
                raise self.fail(f"{key}.match.{label}", f"{name} has no label {shorten(label)}")
            values[label] = tuple(value) if isinstance(value, list) else value  # "" also matches an absent label
            added = dict(metric.labels_since).get(label)
            if added is not None and "" not in (value if isinstance(value, list) else (value,)):
                raise self.fail(f"{key}.match.{label}", f"{name} has {label} only from {added}: "
                                f'add "" to the values, or older versions match nothing')
        if model_label is not None and model_label not in metric.labels_at(metric.since):
            raise self.fail(f"{key}.metric", f"{name} lacks the model label {model_label!r}")
        return Source(metric, tuple(sorted(values.items())), part, per)

    def per(self, key: str, body: dict, metrics: dict[str, Metric], role: str) -> Metric | None:
        """A mean's denominator: required for the mean latency role (a seconds counter), allowed nowhere else."""
        mean = Role.TOKEN_LATENCY_MEAN
        if role != mean:
            if "per" in body:
                raise self.fail(f"{key}.per", f"only a {mean} source is divided by another counter")
            return None
        if metrics[body["metric"]].unit not in UNIT_TO_SECONDS:
            raise self.fail(f"{key}.metric", f"{body['metric']} is not in seconds (give it a unit)")
        name = body.get("per")
        if name is None:
            raise self.fail(f"{key}.per", "missing: the counter the seconds are divided by")
        if name not in metrics or metrics[name].type != "counter":
            raise self.fail(f"{key}.per", f"{shorten(name)} is not a counter in this catalog's metrics")
        return metrics[name]
