"""Will each panel, annotation and rule have data on these series, and if not, why?

The engine is recognised by which catalog series are present, or by a series under its catalog's
name prefix (`vllm:`), which a release newer than the catalog may be alone in exporting. The
versions consistent with the series present follow from each metric's since/removed_in/hidden_in
and from the labels the series carry (labels_since). Then every expression the build generates for
that engine is parsed and walked: a selector has data when some series of its name satisfies all
its matchers; `a or b` has data when either side has; `a unless b` when `a` has; any other operator
or function needs all of its operands. A recorded series or ALERTS has data when one of the rules
that produce it has. Values are never evaluated: a panel can be "filled" and show zero.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import os
import re
from dataclasses import dataclass, field, replace

from packaging.version import Version

from llmdash.build import build_dashboards, build_rule_files
from llmdash.config import Config
from llmdash.dashboards.promql_walk import PromqlWalk, parse
from llmdash.dashboards.walk import walk_panels
from llmdash.doctor import printing
from llmdash.doctor.inventory import Inventory
from llmdash.doctor.slo import SloCheck, replica_series, slo_checks
from llmdash.engines.catalog import load_all
from llmdash.engines.model import REQUIRED_ROLES, EngineSpec, Metric
from llmdash.errors import LlmdashError
from llmdash.vocabulary import ALERTS_SERIES, LOG_PREEMPTIONS

PRESENCE_NOT_NEEDED = {"absent", "absent_over_time"}   # these have data precisely when series are missing
VALUES_SHOWN = 5          # label values quoted when none matches
VALUE_CHARS = 60          # of each
RENAME_CANDIDATES = 256   # names the catalog does not know, compared with each absent one (difflib is quadratic)


@dataclass
class Detection:
    """An engine whose series are present, and the versions that export all of them."""

    spec: EngineSpec
    present: list[str]                  # catalog metrics (families) present
    missing: list[str]                  # catalog metrics absent
    since: Version | None               # None: none is present (recognised by the name prefix alone)
    until: Version | None               # first version that no longer exports one of them

    @property
    def versions(self) -> str:
        if self.since is None:
            return "unknown: no catalog metric present"
        if self.mixed:
            return f"mixed: no single version exports all of them (newest since {self.since}, oldest gone in " \
                   f"{self.until})"
        return f"{self.since} or later" if self.until is None else f"{self.since} to before {self.until}"

    @property
    def mixed(self) -> bool:
        return self.since is not None and self.until is not None and self.until <= self.since

    def exports(self, metric: Metric) -> bool:
        """Whether some version consistent with the present series exports `metric`."""
        if self.since is None or self.mixed:
            return True
        gone = metric.exposed_until
        return (gone is None or gone > self.since) and (self.until is None or metric.since < self.until)

    @property
    def outside_catalog(self) -> bool:
        spec = self.spec
        if self.since is None:
            return False
        return self.since > spec.supported_to or (self.until is not None and self.until <= spec.supported_from)


@dataclass
class Check:
    """One panel target, annotation or rule, and why it will be empty (no problems: it has data)."""

    kind: str            # "panel", "annotation", "alert", "record"
    group: str           # dashboard row, or rule group
    title: str
    ref: str             # the panel target's refId, else ""
    problems: list[str] = field(default_factory=list)

    @property
    def filled(self) -> bool:
        return not self.problems


@dataclass
class EngineReport:
    detection: Detection
    checks: list[Check]
    notes: list[str] = field(default_factory=list)
    slos: list[SloCheck] = field(default_factory=list)

    @property
    def empty(self) -> list[Check]:
        return [c for c in self.checks if not c.filled]

    @property
    def failing_slos(self) -> list[SloCheck]:
        return [c for c in self.slos if c.problems]


def _metric_of_series(spec: EngineSpec) -> dict[str, Metric]:
    return {series: metric for metric in spec.metrics.values() for series in metric.stored_series}


def name_prefixes(spec: EngineSpec) -> tuple[str, ...]:
    """The namespace every one of the engine's own (non-generic) series names starts with, separator
    included ("vllm:", "tgi_"; "ray_vllm:" and "ray_vllm_" for Ray's two spellings); () without one."""
    own = [m.name for m in spec.metrics.values() if not m.generic]
    common = os.path.commonprefix(own) if own else ""
    following = {name[len(common):len(common) + 1] for name in own}
    if common and following <= {":", "_"}:
        return tuple(sorted(common + separator for separator in following))
    cut = max(common.rfind(":"), common.rfind("_"))
    return (common[:cut + 1],) if cut > 0 else ()


def _recognised(spec: EngineSpec, present: list[Metric]) -> bool:
    """One of the engine's own (non-generic) series is present; or, for an engine whose names are all
    generic (unprefixed, shared with other exporters), every required signal has a source present."""
    if any(not m.generic for m in present):
        return True
    if any(not m.generic for m in spec.metrics.values()):
        return False
    names = {m.name for m in present}
    return all(any(s.metric.name in names for s in spec.signal(role).sources) for role in REQUIRED_ROLES)


def detect(inventory: Inventory, specs: dict[str, EngineSpec]) -> list[Detection]:
    """Every engine recognised by its series (see `_recognised`) or by a series under its name prefix
    (a release newer than the catalog may export only names the catalog does not list yet)."""
    found = []
    for spec in specs.values():
        present = [m for m in spec.metrics.values() if any(s in inventory.series for s in m.stored_series)]
        prefixes = name_prefixes(spec)
        if not _recognised(spec, present) and not (prefixes and any(n.startswith(prefixes) for n in inventory.series)):
            continue
        sinces = [m.since for m in present]
        untils = [m.exposed_until for m in present if m.exposed_until is not None]
        for metric in present:
            labelled, unlabelled = _label_evidence(metric, inventory)
            sinces += labelled
            untils += unlabelled
        found.append(Detection(spec, [m.name for m in present],
                               [name for name in spec.metrics if spec.metrics[name] not in present],
                               max(sinces, default=None), min(untils) if untils else None))
    return found


def _label_evidence(metric: Metric, inventory: Inventory) -> tuple[list[Version], list[Version]]:
    """Versions a present series' labels imply: a label the catalog says arrived in version V, carried
    by some series, means V or later; carried by none, before V (SGLang's gauges gained tp_rank in 0.4.10)."""
    series = [labels for name in metric.stored_series for labels in inventory.series.get(name, [])]
    since, until = [], []
    for label, first in metric.labels_since:
        (since if any(label in labels for labels in series) else until).append(first)
    return since, until


class _Walker(PromqlWalk):
    """Decides, per expression, which selectors keep it from having data (memoised per derived series)."""

    def __init__(self, inventory: Inventory, detection: Detection, derived: dict[str, list[str]],
                 target_labels: set[str]):
        self.inventory = inventory
        self.detection = detection
        self.spec = detection.spec
        self.derived = derived            # recorded series (and ALERTS) -> the expressions producing it
        self.target_labels = target_labels
        self.metric_of = _metric_of_series(self.spec)
        self.resolving: set[str] = set()
        self.derived_problems: dict[str, list[str]] = {}

    def expression(self, expr: str) -> list[str]:
        return list(dict.fromkeys(self.walk(parse(expr))))

    def binary(self, node, context) -> list[str]:
        """`a unless b` has data where `a` has; `a or b` where either has."""
        op = str(node.op)
        left = self.walk(node.lhs)
        if op == "unless":
            return left
        right = self.walk(node.rhs)
        if op == "or":
            return [] if not left or not right else left + right
        return left + right

    def call(self, node, context) -> list[str]:
        return [] if node.func.name in PRESENCE_NOT_NEEDED else super().call(node, context)

    def selector(self, node, context=None) -> list[str]:
        matchers = node.matchers.matchers
        name = node.name or next((m.value for m in matchers if m.name == "__name__"), "")
        if name in self.derived:
            return self.derived_series(name)
        wanted = [m for m in matchers if m.name != "__name__" and m.name not in self.target_labels]
        series = self.inventory.series.get(name, [])
        if any(all(_matches(m, labels) for m in wanted) for labels in series):
            return []
        if not series:
            return [self.absent(name)]
        for matcher in wanted:
            if not any(_matches(matcher, labels) for labels in series):
                seen = sorted({labels.get(matcher.name, "") for labels in series})
                shown = ", ".join(f'"{printing.text(v, self.inventory.secrets, VALUE_CHARS)}"'
                                  for v in seen[:VALUES_SHOWN]) + (" …" if len(seen) > VALUES_SHOWN else "")
                return [f"{name} has no series with label {_render(matcher)} (values present: {shown})"]
        return [f"{name} has no series with all of {', '.join(_render(m) for m in wanted)}"]

    def absent(self, name: str) -> str:
        metric = self.metric_of.get(name)
        if name == LOG_PREEMPTIONS:
            return (f"{name} absent: mtail counts it from the engine's log (generated/mtail/{self.spec.id}.mtail), "
                    "so it is on mtail's /metrics, not the engine's")
        if metric is None:
            return f"{name} absent (not in the {self.spec.id} catalog)"
        detection = self.detection
        if not detection.exports(metric):
            gone = f", gone from {metric.exposed_until}" if metric.exposed_until else ""
            return (f"{name} absent: not exported by {self.spec.id} {detection.versions} "
                    f"(exported from {metric.since}{gone})")
        for signal in self.spec.signals.values():
            names = [s.metric.name for s in signal.sources]
            if metric.name in names:
                others = [n for n in names if n != metric.name and n in detection.present]
                if others:
                    return f"{name} absent; the same {signal.role} signal is present under another name: " \
                           f"{', '.join(others)}"
        # A name the catalog does not know yet, close to the missing one: most likely a rename in a release
        # newer than the catalog's.
        close = difflib.get_close_matches(name, self.rename_candidates, n=1, cutoff=0.8)
        if close:
            return f"{name} absent; {close[0]} is present but not in the catalog (renamed in a newer release?)"
        return f"{name} absent"

    @functools.cached_property
    def rename_candidates(self) -> list[str]:
        """The first RENAME_CANDIDATES names the catalog does not list, under the engine's name prefix
        where it has one (a rename keeps it): a page with 50 000 of them must not take minutes."""
        prefixes = name_prefixes(self.spec)
        unknown = (n for n in self.inventory.series
                   if n not in self.metric_of and (not prefixes or n.startswith(prefixes)))
        return list(itertools.islice(unknown, RENAME_CANDIDATES))

    def derived_series(self, name: str) -> list[str]:
        if name in self.derived_problems:
            return self.derived_problems[name]
        if name in self.resolving:      # a rule reading its own output: judged by its other inputs
            return []
        self.resolving.add(name)
        outcomes = [self.expression(expr) for expr in self.derived[name]]
        self.resolving.discard(name)
        problems = [] if any(not o for o in outcomes) else \
            [f"{'no llmdash alert can fire' if name == ALERTS_SERIES else f'recorded {name} is empty'}: "
             f"{next(o for o in outcomes if o)[0]}"]
        self.derived_problems[name] = problems
        return problems


def _render(matcher) -> str:
    op = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}[str(matcher.op).split(".")[-1]]
    return f'{matcher.name}{op}"{matcher.value}"'


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _matches(matcher, labels: dict[str, str]) -> bool:
    value = labels.get(matcher.name, "")   # an absent label equals "" in PromQL
    op = str(matcher.op).split(".")[-1]
    if op in ("Equal", "NotEqual"):
        return (value == matcher.value) == (op == "Equal")
    pattern = _regex(matcher.value)
    return pattern is not None and (pattern.fullmatch(value) is not None) == (op == "Re")


def _dashboard_checks(model: dict) -> list[tuple[Check, str]]:
    checks = []
    for annotation in model.get("annotations", {}).get("list", []):
        expr = (annotation.get("target") or {}).get("expr")
        if expr:
            checks.append((Check("annotation", "annotations", annotation["name"], ""), expr))
    for placed in walk_panels(model):
        panel, row = placed.panel, placed.panel["title"] if placed.is_row else placed.row_title
        for target in panel.get("targets", []):
            checks.append((Check("panel", row, panel["title"], target["refId"]), target["expr"]))
    return checks


def _rule_checks(model: dict) -> tuple[list[tuple[Check, str]], dict[str, list[str]]]:
    checks, derived = [], {}
    for group in model.get("groups", []):
        for rule in group["rules"]:
            kind, name = ("alert", rule["alert"]) if "alert" in rule else ("record", rule["record"])
            checks.append((Check(kind, group["name"], name, ""), rule["expr"]))
            derived.setdefault(ALERTS_SERIES if kind == "alert" else name, []).append(rule["expr"])
    return checks, derived


def diagnose(inventory: Inventory, config: Config, from_scrape: bool) -> list[EngineReport]:
    """One report per recognised engine. `from_scrape`: the series come from a /metrics page, which lacks
    the target labels Prometheus adds, so matchers on the config's and the catalog's selector labels are
    not judged."""
    detections = detect(inventory, load_all())
    configured = [d for d in detections if d.spec.id in config.engine_ids]
    if not configured:
        if detections:
            raise LlmdashError(f"{inventory.source}: series of {', '.join(d.spec.id for d in detections)}, which "
                               f"the config does not build (engines: {', '.join(config.engine_ids)})")
        raise LlmdashError(f"{inventory.source}: no engine recognised: none of its {len(inventory.series)} "
                           "series names is in an engine catalog or under an engine's name prefix")
    detected = replace(config, engines=tuple(d.spec.id for d in configured))  # build only what is being checked
    built = _Built(detected)
    reports = []
    for detection in configured:
        checks = built.checks(inventory, detection, config, from_scrape)
        notes = []
        if detection.outside_catalog:
            notes.append(f"versions {detection.versions} are outside the catalog's {detection.spec.versions}")
        notes += _native_notes(inventory, detection, config, checks, from_scrape)
        reports.append(EngineReport(detection, checks, notes, slo_checks(inventory, detection.spec, config)))
    return reports


class _Built:
    """The dashboards and rule files of a config, built once, and the checks of one engine's queries on them."""

    def __init__(self, config: Config):
        self.dashboards = build_dashboards(config, config.engine_ids)
        self.rules = build_rule_files(config)

    def checks(self, inventory: Inventory, detection: Detection, config: Config, from_scrape: bool) -> list[Check]:
        engine = detection.spec.id
        # the catalog's default selectors (e.g. job) are target labels too
        target_labels = set(config.selectors) | set(dict(detection.spec.selectors)) if from_scrape else set()
        rule_checks, derived = _rule_checks(self.rules[engine])
        walker = _Walker(inventory, detection, derived, target_labels)
        checks = []
        for check, expr in _dashboard_checks(self.dashboards[engine]) + rule_checks:
            check.problems = walker.expression(expr)
            checks.append(check)
        return checks


def counted_series(specs, config: Config) -> dict[str, set[str]]:
    """A series name -> the series whose replicas the checks count when it is present (what a Prometheus is asked
    replica by replica), for the engines `config` builds (the only ones checked): the SLOs' series
    (`slo.replica_series`), and a native histogram with its classic count, which tell the replicas stored only
    as native histograms apart."""
    specs = [spec for spec in specs if spec.id in config.engine_ids]
    counted = {name: {name} for spec in specs for name in replica_series(spec, config)}
    for spec in specs:
        for metric in spec.metrics.values():
            if metric.type == "histogram":
                counted.setdefault(metric.name, set()).update((metric.name, f"{metric.name}_count"))
    return counted


def _native_notes(inventory: Inventory, detection: Detection, config: Config, checks: list[Check],
                  from_scrape: bool) -> list[str]:
    """What the series say of native histograms. A Prometheus stores one under the histogram's base name (a classic
    one converted at scrape by `convert_classic_histograms_to_nhcb`, or scraped native by protobuf): then which of
    the engine's queries read them, that classic-only queries would leave empty. A text page never shows a native
    histogram (only the protobuf exposition carries one), but a histogram whose text has no finite bucket, only
    +Inf, `_count` and `_sum`, is exported as a native one."""
    spec = detection.spec
    histograms = [m for m in spec.metrics.values() if m.type == "histogram"]
    if from_scrape:
        native_only = [m.name for m in histograms if f"{m.name}_count" in inventory.series and all(
            labels.get("le") == "+Inf" for labels in inventory.series.get(f"{m.name}_bucket", []))]
        return [f"{', '.join(native_only)}: no finite bucket on this text page, only +Inf: exported as native "
                "histograms, which a Prometheus scraping protobuf with scrape_native_histograms stores under the base "
                "name (the text form's classic buckets are then dropped); check it with --prometheus"] \
            if native_only else []
    native = [m.name for m in histograms if m.name in inventory.series]
    if not native:
        return []
    stored = f"stored as native histograms: {', '.join(native)}"
    # series with no classic twin (the classic parts dropped): classic-only queries leave their replicas out
    alone = sorted({labels.get(config.fleet.instance_label, "") for name in native for labels in inventory.series[name]
                    if labels not in inventory.series.get(f"{name}_count", [])})
    if alone:
        shown = ", ".join(printing.text(i, inventory.secrets, VALUE_CHARS) for i in alone[:VALUES_SHOWN])
        stored += f", with no classic series on {config.fleet.instance_label} {shown}" + \
            (" …" if len(alone) > VALUES_SHOWN else "")
    else:
        stored += ", each beside its classic series (always_scrape_classic_histograms), which the queries read"
    if not config.native_histograms:
        return [f"{stored}; histograms.native: false reads only the classic series: leave it unset or set it true"]
    classic = _Built(replace(config, engines=(spec.id,), histograms=replace(config.histograms, native=False)))
    would_be_empty = [c for c, now in zip(classic.checks(inventory, detection, config, False), checks)
                      if now.filled and not c.filled]
    if not would_be_empty:
        return [stored]
    panels = list(dict.fromkeys(c.title for c in would_be_empty if c.kind in ("panel", "annotation")))
    rules = list(dict.fromkeys(c.title for c in would_be_empty if c.kind not in ("panel", "annotation")))
    return [f"{stored}; read from them, empty on classic series alone: panels {', '.join(panels) or 'none'}; "
            f"rules {', '.join(rules) or 'none'}"]
