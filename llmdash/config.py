"""The one config object (`llmdash.yaml`) shared by dashboards, annotations and rules.

Every field has a default, so no file is needed. A file may set any subset; unknown keys,
wrong types and out-of-range values are one-line `LlmdashError`s naming the key.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from llmdash.durations import milliseconds, seconds
from llmdash.engines.catalog import available_engines
from llmdash.engines.schema import LABEL_NAME
from llmdash.errors import LlmdashError
from llmdash.inputs import read_yaml, shorten
from llmdash.rules.alertmanager import ROUTE_GROUP_LABELS
from llmdash.rules.targets import RULERS, TARGETS
from llmdash.panels.signals import PAUSED_RESOLUTION
from llmdash.vocabulary import BURN_PAIRS

# Prometheus turns durations into Go time.Duration, int64 nanoseconds: promtool refuses 9223372037s.
MAX_DURATION_SECONDS = (2**63 - 1) // 10**9
# Grafana's refresh picker takes an interval like 30s, 1m, 1h ("" turns auto-refresh off); its
# time picker a relative time like now-3h, now-7d, now/d or now-1d/d.
GRAFANA_REFRESH = re.compile(r"^[1-9][0-9]{0,9}[smhd]$")
GRAFANA_RELATIVE_TIME = re.compile(r"^now(-[1-9][0-9]*[smhdwMy])?(/[smhdwMy])?$")
PROMETHEUS_EVALUATION_INTERVAL = "1m"   # Prometheus' default global evaluation_interval
MIN_REFRESH_SECONDS = 5      # Grafana's default min_refresh_interval; shorter is silently raised
MAX_TIMEOUT_SECONDS = 3600
# Kubernetes object names and keys (k8s.io/apimachinery/pkg/util/validation/validation.go).
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")                         # max 63
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")  # max 253
QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")             # max 63
DEFAULT_CONFIG_FILE = "llmdash.yaml"
RUNBOOK_PLACEHOLDER = "{alertname}"
# Keys that moved: old dotted key -> what to write instead.
REPLACED_KEYS = {"rules.runbook_base_url": "alerts.runbook_url_template, an absolute URL containing {alertname}"}


@dataclass(frozen=True)
class Levels:
    """Where a value turns orange (warning) and red (critical)."""

    warning: float
    critical: float


@dataclass(frozen=True)
class Thresholds:
    ttft_p99_seconds: Levels = Levels(2.0, 5.0)
    itl_p99_seconds: Levels = Levels(0.1, 0.25)
    kv_usage: Levels = Levels(0.9, 0.98)
    preemptions_per_second: Levels = Levels(0.01, 0.1)
    waiting_requests: Levels = Levels(10.0, 50.0)


@dataclass(frozen=True)
class Objective:
    """One service-level objective: `objective` of the `sli`'s events good over `window` (the error budget is the
    rest), for the `engines` and `models` listed (none: every engine built, every model). A latency SLI counts a
    good event from the histogram bucket whose bound is `target_seconds`, so the target must be a bound every
    covered version exports (checked at build). `name` is the `slo` label of its series and alerts; `sli` defaults
    to the name. A burn-rate alert fires only with at least `min_bad_events` bad events in its long window, so a
    model with a handful of requests cannot page on one slow request."""

    name: str
    sli: str | None = None
    target_seconds: float | None = None
    objective: float = 0.99
    window: str = "30d"
    engines: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    min_bad_events: float = 5

    @property
    def kind(self) -> str:
        return self.sli or self.name

    @property
    def budget(self) -> float:
        """The share of events allowed to be bad."""
        return 1 - self.objective


@dataclass(frozen=True)
class Slo:
    """Latency targets of the attainment panels for every engine built; unset means each catalog's
    `slo_defaults`. A target must be a bucket bound of each engine's histogram (checked at build).
    `objectives`: error-budget SLOs with burn-rate alerts (none by default)."""

    ttft_seconds: float | None = None
    itl_seconds: float | None = None
    objectives: tuple[Objective, ...] = ()


@dataclass(frozen=True)
class Divergence:
    """Latency p99 over `window` at least `latency_factor` x its baseline (the median of that p99
    over `baseline_window`), while output tok/s over `window`
    stays within `throughput_band` of its `baseline_window` rate. The baseline window ends
    `baseline_offset` ago, so an incident shorter than offset + half the window never becomes its own
    baseline. Where an engine has no latency histogram, its mean time per token takes the place of the
    p99 with `mean_latency_factor`: a mean averages a stall over every token, so it rises less.

    `baseline_resolution` is how often a baseline computed from raw series (raw dashboards) samples its
    window; recorded series (rules, recorded dashboards) are read at every sample the rules wrote. Its
    default is the window itself: 5m windows tile the hour, and a finer step mostly re-reads overlapping
    windows at 5x the cost of the dashboard's heaviest panel."""

    latency_factor: float = 2.0
    mean_latency_factor: float = 1.5
    throughput_band: float = 0.2
    window: str = "5m"
    baseline_window: str = "1h"
    baseline_resolution: str = "5m"
    baseline_offset: str = "1h"
    annotation_step: str = "60s"
    min_tokens_per_second: float = 1.0
    alert_for: str = "3m"


@dataclass(frozen=True)
class Preemption:
    """`window`: the preemption panels' annotation and the per-model recorded rate. The page is per KV-cache
    unit (instance, and data-parallel rank where the engine has one) and needs a burst: preemptions per
    finished request at least `page_share` over `short_window` (and at least `min_events` of them) and
    `confirm_share` over `long_window`, held for `alert_for` (at least `short_window`, so one moment's
    evictions never page). The finished requests are clamped to at least `min_finished` per window, so a
    unit that keeps preempting while nothing completes pages, and a few completions cannot make a large
    share. A sustained low share (`chronic_share` over `chronic_window`, for `chronic_for`) is a capacity
    warning, not a page. On engines with only a paused-requests gauge, the share of the last
    `short_window` in which requests were paused at least `paused_share` (and `paused_confirm_share` of
    `long_window`)."""

    window: str = "5m"
    page_share: float = 0.03
    confirm_share: float = 0.02
    min_events: float = 6
    min_finished: float = 20
    paused_share: float = 0.5
    paused_confirm_share: float = 0.1
    short_window: str = "2m"
    long_window: str = "3m"
    alert_for: str = "2m"
    keep_firing_for: str = "5m"
    chronic_share: float = 0.005
    chronic_window: str = "30m"
    chronic_for: str = "15m"


@dataclass(frozen=True)
class Straggler:
    """The per-instance latency warning: one replica whose token-latency p99 (ITL, else per-request TPOT) over
    `divergence.window` (the window every recorded latency has) is at least `factor` x its model's p99 across the
    fleet (and at least `min_seconds`), with at least `min_tokens_per_second` of its own output, for `alert_for`."""

    factor: float = 3.0
    min_seconds: float = 0.1
    min_tokens_per_second: float = 1.0
    alert_for: str = "10m"


@dataclass(frozen=True)
class Fleet:
    """How series aggregate across a fleet: every aggregation keeps `group_by` and the model label
    (so two clusters serving one model stay two routable alerts), and `instance_label` names a
    replica wherever a page or a drill-down is per instance."""

    group_by: tuple[str, ...] = ("cluster", "namespace")
    instance_label: str = "instance"


@dataclass(frozen=True)
class Logs:
    """Preemption counted from engine logs by mtail (`generated/mtail/<engine>.mtail`). `enabled` adds the
    log counter's annotation, panel and page to engines whose catalog lists preemption log lines.
    mtail is its own scrape target: `selectors` replaces, label by label, the top-level selectors for
    its series (e.g. `{job: mtail}`); `replica_labels` are labels an engine's series and its mtail's
    series share per replica (e.g. `pod` on Kubernetes), so the log page stays silent exactly where
    the engine exports a preemption metric itself (without them, wherever one replica of the fleet
    group does). The log page fires at `min_events` preemptions logged over `preemption.short_window`."""

    enabled: bool = False
    selectors: dict[str, str] = field(default_factory=dict)
    replica_labels: tuple[str, ...] = ()
    min_events: float = 2   # preemptions logged over preemption.short_window that page (a log has no request count)


@dataclass(frozen=True)
class Rules:
    """Prometheus rule files: evaluation interval, how long latency must stay high.

    `interval` unset leaves the groups to the server's `evaluation_interval` (a group's own interval
    overrides it, so pinning one would delay pages where the server evaluates more often)."""

    interval: str | None = None
    latency_alert_for: str = "10m"
    target: str = "prometheus"      # the ruler that loads the files: prometheus | vmalert | mimir | thanos

    @property
    def evaluation_interval(self) -> str:
        """How often the groups are evaluated where llmdash runs them itself: the configured interval, else
        Prometheus' default `evaluation_interval`."""
        return self.interval or PROMETHEUS_EVALUATION_INTERVAL
    # how long the latency, divergence and straggler warnings stay firing once their condition stops holding:
    # a scrape gap fades the sick replica's buckets out of the rate and must not resolve and re-arm them
    warning_keep_firing_for: str = "5m"


@dataclass(frozen=True)
class Histograms:
    """Which forms of a histogram the queries read. Unset `native`: per replica the classic `_bucket`/`_count`/`_sum`
    series where it has them, else the native histogram of the base name (a Prometheus scraping with
    `convert_classic_histograms_to_nhcb`, or a native exposition), so a fleet mid-migration is counted once per
    replica; classic only where `rules.target` is a ruler without PromQL's native-histogram functions (vmalert).
    false: classic only, for dashboards on VictoriaMetrics (which stores native histograms as `vmrange` buckets and
    refuses `histogram_count`)."""

    native: bool | None = None


@dataclass(frozen=True)
class Alerts:
    """Where each alert's runbook can be opened: `{alertname}` is replaced by the alert's name. Unset,
    rules carry no runbook_url (a relative path opens nowhere) and name the runbook file instead."""

    runbook_url_template: str | None = None


@dataclass(frozen=True)
class DashboardSettings:
    refresh: str = "30s"
    time_from: str = "now-3h"
    tags: tuple[str, ...] = ()
    use_recording_rules: bool = False


@dataclass(frozen=True)
class GrafanaSettings:
    url: str | None = None
    folder_uid: str = "llm-serving"
    folder_title: str = "LLM serving"
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    deadline: float = 60.0          # seconds for one whole request (connect, headers, body)
    verify_tls: bool = True
    ca_cert: str | None = None
    api: str = "auto"                 # auto, legacy (/api) or resource (/apis/dashboard.grafana.app)
    namespace: str | None = None      # resource API namespace; default from the org (Grafana Cloud: stacks-<id>)


@dataclass(frozen=True)
class KubernetesSettings:
    """`llmdash provision --format kubernetes`: where the manifests go and which selectors pick them up.

    kube-prometheus-stack's Grafana sidecar loads ConfigMaps labelled `grafana_dashboard: "1"` and
    files them in the folder named by the `grafana_folder` annotation (when the chart sets
    `sidecar.dashboards.folderAnnotation`); its Prometheus picks PrometheusRules labelled
    `release: <helm release name>`; grafana-operator imports GrafanaDashboards into the Grafana
    instances whose labels match `instance_selector`.
    """

    namespace: str = "monitoring"
    dashboard_labels: dict[str, str] = field(default_factory=lambda: {"grafana_dashboard": "1"})
    folder_annotation: str = "grafana_folder"
    folder: str = "LLM serving"
    instance_selector: dict[str, str] = field(default_factory=lambda: {"dashboards": "grafana"})
    rule_labels: dict[str, str] = field(default_factory=lambda: {"release": "kube-prometheus-stack"})


@dataclass(frozen=True)
class Config:
    engines: tuple[str, ...] = ()
    selectors: dict[str, str] = field(default_factory=dict)
    label_variables: tuple[str, ...] = ()
    thresholds: Thresholds = Thresholds()
    slo: Slo = Slo()
    divergence: Divergence = Divergence()
    preemption: Preemption = Preemption()
    straggler: Straggler = Straggler()
    fleet: Fleet = Fleet()
    logs: Logs = Logs()
    rules: Rules = Rules()
    histograms: Histograms = Histograms()
    alerts: Alerts = Alerts()
    dashboard: DashboardSettings = DashboardSettings()
    grafana: GrafanaSettings = GrafanaSettings()
    kubernetes: KubernetesSettings = KubernetesSettings()
    source: str = "defaults"

    @property
    def native_histograms(self) -> bool:
        """Whether queries also read native histograms (`histograms.native`, by default the ruler's ability)."""
        native = self.histograms.native
        return RULERS[self.rules.target].native_histograms if native is None else native

    @property
    def engine_ids(self) -> tuple[str, ...]:
        return self.engines or tuple(available_engines())


def load_config(path: str | Path | None = None) -> Config:
    """Load `path`; with None, `./llmdash.yaml` when present, else the defaults."""
    if path is None:
        if not Path(DEFAULT_CONFIG_FILE).is_file():
            return Config()
        path = DEFAULT_CONFIG_FILE
    path = Path(path)
    data = read_yaml(path, "config")
    config = _build(Config, {} if data is None else data, "", path)
    _check(config, path)
    return dataclasses.replace(config, source=str(path))


def _build(cls, data, prefix: str, path: Path):
    if not isinstance(data, dict):
        raise LlmdashError(f"{path}: {prefix.removesuffix('.') or 'top level'}: expected a mapping")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.name != "source"}
    values = {}
    for key, value in data.items():
        where = f"{prefix}{shorten(key) if not isinstance(key, str) else key[:80]}"
        if where in REPLACED_KEYS:
            raise LlmdashError(f"{path}: {where}: no longer supported; use {REPLACED_KEYS[where]}")
        if key not in names:
            raise LlmdashError(f"{path}: {where}: unknown key (expected one of {', '.join(sorted(names))})")
        values[key] = _value(hints[key], value, where, path)
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name not in values:
            raise LlmdashError(f"{path}: {prefix}{f.name}: missing")
    return cls(**values)


def _value(hint, value, where: str, path: Path):
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, f"{where}.", path)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        hint = next(a for a in args if a is not type(None))
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and dataclasses.is_dataclass(args[0]):
        if not isinstance(value, list):
            raise LlmdashError(f"{path}: {where}: expected a list of mappings")
        return tuple(_build(args[0], item, f"{where}[{i}].", path) for i, item in enumerate(value))
    if origin is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise LlmdashError(f"{path}: {where}: expected a list of strings")
        return tuple(value)
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise LlmdashError(f"{path}: {where}: expected a mapping of label name to string value")
        return dict(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise LlmdashError(f"{path}: {where}: expected a number, got {shorten(value)}")
        try:
            number = float(value)
        except OverflowError:  # an integer beyond float range
            number = math.inf
        if not math.isfinite(number):
            raise LlmdashError(f"{path}: {where}: expected a finite number, got {shorten(value)}")
        return number
    if hint is bool:
        if not isinstance(value, bool):
            raise LlmdashError(f"{path}: {where}: expected true or false, got {shorten(value)}")
        return value
    if hint is str:
        if where == "dashboard.refresh" and value is False:
            return ""  # `refresh: false`, as Grafana writes it: no auto-refresh
        if not isinstance(value, str):
            raise LlmdashError(f"{path}: {where}: expected a string, got {shorten(value)}")
        return value
    raise AssertionError(f"unsupported config type {hint}")  # a programming error, not user input


def _check(config: Config, path: Path) -> None:
    def bad(key: str, problem: str):
        raise LlmdashError(f"{path}: {key}: {problem}")

    if config.rules.target not in TARGETS:
        bad("rules.target", f"unknown ruler {shorten(config.rules.target)} (known: {', '.join(TARGETS)})")
    if config.histograms.native and not RULERS[config.rules.target].native_histograms:
        bad("histograms.native", f"rules.target {config.rules.target} has no histogram_count (MetricsQL): "
                                 "its rules can read classic histograms only; set false or leave it unset")
    known = available_engines()
    for engine in config.engines:
        if engine not in known:
            bad("engines", f"unknown engine {shorten(engine)} (known: {', '.join(known)})")
    for label in list(config.selectors) + list(config.label_variables):
        if not LABEL_NAME.fullmatch(label) or label.startswith("__"):
            bad("selectors" if label in config.selectors else "label_variables",
                f"{shorten(label)} is not a label name")
    for label in config.label_variables:
        if label in ("model_name", "instance", "datasource"):
            bad("label_variables", f"{shorten(label)} is already a dashboard variable")
    for name in ("ttft_p99_seconds", "itl_p99_seconds", "kv_usage", "preemptions_per_second", "waiting_requests"):
        levels = getattr(config.thresholds, name)
        if levels.warning < 0 or levels.critical < 0:
            bad(f"thresholds.{name}", "must not be negative")
        if levels.warning > levels.critical:
            bad(f"thresholds.{name}", f"warning {levels.warning:g} is above critical {levels.critical:g}")
    if config.thresholds.kv_usage.critical > 1:
        bad("thresholds.kv_usage", "KV usage is a fraction 0-1")
    for name in ("ttft_seconds", "itl_seconds"):
        if getattr(config.slo, name) is not None and getattr(config.slo, name) <= 0:
            bad(f"slo.{name}", "must be a positive number of seconds")
    _check_objectives(config, known, bad)
    div = config.divergence
    for name in ("latency_factor", "mean_latency_factor"):
        if getattr(div, name) <= 1:
            bad(f"divergence.{name}", f"must be above 1, got {getattr(div, name):g}")
    if not 0 < div.throughput_band < 1:
        bad("divergence.throughput_band", f"must be between 0 and 1, got {div.throughput_band:g}")
    # Windows, steps and intervals must be positive; a `for` of 0s (fire at once) is valid Prometheus.
    durations = {"divergence.window": div.window, "divergence.baseline_window": div.baseline_window,
                 "divergence.annotation_step": div.annotation_step,
                 "divergence.baseline_resolution": div.baseline_resolution,
                 "preemption.window": config.preemption.window,
                 "preemption.alert_for": config.preemption.alert_for, "divergence.alert_for": div.alert_for,
                 "preemption.short_window": config.preemption.short_window,
                 "preemption.long_window": config.preemption.long_window,
                 "preemption.keep_firing_for": config.preemption.keep_firing_for,
                 "preemption.chronic_window": config.preemption.chronic_window,
                 "preemption.chronic_for": config.preemption.chronic_for,
                 "straggler.alert_for": config.straggler.alert_for,
                 "rules.warning_keep_firing_for": config.rules.warning_keep_firing_for,
                 "divergence.baseline_offset": div.baseline_offset,
                 "rules.latency_alert_for": config.rules.latency_alert_for}
    if config.rules.interval is not None:
        durations["rules.interval"] = config.rules.interval
    for key, value in durations.items():
        try:
            value_s = seconds(value)
        except ValueError:
            bad(key, f"expected a Prometheus duration like 5m or 1h30m, got {shorten(value)}")
        if value_s > MAX_DURATION_SECONDS:
            bad(key, f"{shorten(value)} is longer than Prometheus accepts ({MAX_DURATION_SECONDS}s, about 292 years)")
        if value_s == 0 and not key.endswith("_for"):
            bad(key, "must be longer than 0s")
    refresh = config.dashboard.refresh
    if refresh and not (GRAFANA_REFRESH.fullmatch(refresh) and MIN_REFRESH_SECONDS <= seconds(refresh) <= 86400):
        bad("dashboard.refresh", f"expected a Grafana refresh interval from 5s to 1d like 30s, 1m, 1h "
                                 f"(or false for none), got {shorten(refresh)}")
    if not GRAFANA_RELATIVE_TIME.fullmatch(config.dashboard.time_from):
        bad("dashboard.time_from", f"expected a Grafana relative time like now-3h, now-7d or now/d, "
                                   f"got {shorten(config.dashboard.time_from)}")
    if seconds(div.baseline_window) < 4 * seconds(div.window):
        bad("divergence.baseline_window", "must be at least 4x divergence.window to be a baseline")
    if div.min_tokens_per_second < 0:
        bad("divergence.min_tokens_per_second", "must not be negative")
    # A subquery needs more than one step in its range: Prometheus 3's range selectors are left-open, so a
    # `[1m:1m]` holds one point there (two on Prometheus 2) and a median or share over it changes meaning.
    if seconds(div.baseline_resolution) >= seconds(div.baseline_window):
        bad("divergence.baseline_resolution", f"must be shorter than divergence.baseline_window "
                                              f"({shorten(div.baseline_window)}) to sample it more than once")
    p = config.preemption
    for name in ("short_window", "long_window"):
        if seconds(getattr(p, name)) <= seconds(PAUSED_RESOLUTION):
            bad(f"preemption.{name}", f"must be longer than {PAUSED_RESOLUTION}, the resolution a paused-requests "
                                      "gauge is sampled at over it")
    for name in ("page_share", "confirm_share", "min_events", "paused_share", "paused_confirm_share",
                 "chronic_share"):
        if getattr(p, name) < 0:
            bad(f"preemption.{name}", "must not be negative")
    if p.min_finished <= 0:
        bad("preemption.min_finished", "must be above 0 (the finished requests a share is taken over at least)")
    if config.straggler.factor <= 1:
        bad("straggler.factor", f"must be above 1, got {config.straggler.factor:g}")
    for name in ("paused_share", "paused_confirm_share"):
        if getattr(p, name) > 1:
            bad(f"preemption.{name}", "is a share of time, 0-1")
    if config.logs.min_events < 0:
        bad("logs.min_events", "must not be negative")
    for label in list(config.logs.selectors) + list(config.logs.replica_labels):
        if not LABEL_NAME.fullmatch(label) or label.startswith("__"):
            bad("logs", f"{shorten(label)} is not a label name")
    if config.fleet.instance_label in config.logs.replica_labels:
        bad("logs.replica_labels", f"{config.fleet.instance_label!r} differs between an engine and its mtail "
                                   "(each is its own scrape target)")
    for label in config.fleet.group_by + (config.fleet.instance_label,):
        if not LABEL_NAME.fullmatch(label) or label.startswith("__") or label == "le":
            bad("fleet", f"{label!r} is not a label name to group by")
    if config.fleet.instance_label in config.fleet.group_by:
        bad("fleet.group_by", f"{config.fleet.instance_label!r} is the instance label; grouping by it is per instance")
    # Alertmanager refuses a route whose group_by names a label twice; every route already groups by these.
    for label in dict.fromkeys(config.fleet.group_by):
        if label in ROUTE_GROUP_LABELS:
            bad("fleet.group_by", f"{label!r} is already grouped by: every alert groups by "
                                  f"{', '.join(ROUTE_GROUP_LABELS)}")
        elif config.fleet.group_by.count(label) > 1:
            bad("fleet.group_by", f"{label!r} is listed more than once")
    for name in ("connect_timeout", "read_timeout"):
        if not 0 < getattr(config.grafana, name) <= MAX_TIMEOUT_SECONDS:
            bad(f"grafana.{name}", f"must be above 0 and at most {MAX_TIMEOUT_SECONDS} seconds")
    if config.grafana.api not in ("auto", "legacy", "resource"):
        bad("grafana.api", f"expected auto, legacy or resource, got {config.grafana.api!r}")
    namespace = config.grafana.namespace
    if namespace is not None and (len(namespace) > 63 or not DNS1123_LABEL.fullmatch(namespace)):
        bad("grafana.namespace", f"{namespace!r} is not a namespace like default, org-2 or stacks-12345")
    template = config.alerts.runbook_url_template
    if template is not None:
        parts = urlsplit(template.replace(RUNBOOK_PLACEHOLDER, "alert"))
        if RUNBOOK_PLACEHOLDER not in template:
            bad("alerts.runbook_url_template", f"must contain {RUNBOOK_PLACEHOLDER}, got {shorten(template)}")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            bad("alerts.runbook_url_template", f"must be an absolute http(s) URL, got {shorten(template)}")
    _check_kubernetes(config.kubernetes, bad)


# A build takes about 0.05 s per objective: 100 build in seconds, where 10,000 would take many minutes.
MAX_OBJECTIVES = 100
SLO_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
SLIS = ("ttft", "token_latency", "availability")
# the longest window a burn-rate pair reads (the slow pair's 3d): an SLO window must hold it
LONGEST_ALERT_WINDOW = max((p.long for pairs in BURN_PAIRS.values() for p in pairs), key=seconds)
# The largest burn rate an alert compares with (the fast page's): at or above 100 % errors it could never fire.
FASTEST_BURN = max(p.burn for pairs in BURN_PAIRS.values() for p in pairs)
# The longest SLO window: its budget sums one recorded hourly count per hour of the window at every evaluation
# (8,760 for a year), so a longer one costs more than it tells.
MAX_SLO_WINDOW = "1y"


def _check_objectives(config: Config, known: list[str], bad) -> None:
    """Every key of every objective; what depends on an engine's catalog (bucket bounds, error counters) is
    checked when its rules are built."""
    if len(config.slo.objectives) > MAX_OBJECTIVES:
        bad("slo.objectives", f"{len(config.slo.objectives)} objectives; at most {MAX_OBJECTIVES} are built "
                              "(each adds recording rules, two alert pairs and dashboard panels)")
    covered: dict[tuple[str, str], int] = {}
    for i, o in enumerate(config.slo.objectives):
        key = f"slo.objectives[{i}]"
        if not SLO_NAME.fullmatch(o.name):
            bad(f"{key}.name", f"{shorten(o.name)} is not a name of lower-case letters, digits and _ (at most 40)")
        if o.kind not in SLIS:
            bad(f"{key}.sli", f"expected one of {', '.join(SLIS)}, got {shorten(o.kind)}"
                + ("" if o.sli else " (from the name; set sli:)"))
        if o.kind == "availability" and o.target_seconds is not None:
            bad(f"{key}.target_seconds", "an availability SLO counts failed requests and has no latency target")
        if o.kind != "availability" and (o.target_seconds is None or o.target_seconds <= 0):
            bad(f"{key}.target_seconds", "a latency SLO needs a positive target in seconds (a histogram bucket bound)")
        if not 0 < o.objective < 1:
            bad(f"{key}.objective", f"expected a share between 0 and 1 such as 0.99, got {o.objective:g}")
        if FASTEST_BURN * o.budget >= 1:
            bad(f"{key}.objective", f"{o.objective:g} leaves a budget of {o.budget:.1%}: a {FASTEST_BURN:g}x burn "
                                    f"would need more than 100 % bad events, so nothing could page; use at least "
                                    f"{1 - 1 / FASTEST_BURN:.3f}")
        try:
            window_s = seconds(o.window)
        except ValueError:
            bad(f"{key}.window", f"expected a Prometheus duration like 30d or 4w, got {shorten(o.window)}")
        if window_s < seconds(LONGEST_ALERT_WINDOW) or window_s % 3600 or window_s > seconds(MAX_SLO_WINDOW):
            bad(f"{key}.window", f"{shorten(o.window)} must be whole hours, at least the slow alert's "
                                 f"{LONGEST_ALERT_WINDOW} and at most {MAX_SLO_WINDOW} (365d)")
        if o.min_bad_events < 0:
            bad(f"{key}.min_bad_events", "must not be negative")
        for engine in o.engines:
            if engine not in known:
                bad(f"{key}.engines", f"unknown engine {shorten(engine)} (known: {', '.join(known)})")
            if config.engines and engine not in config.engines:
                bad(f"{key}.engines", f"{engine} is not among the engines built ({', '.join(config.engines)})")
        if any(not m for m in o.models):
            bad(f"{key}.models", "a model name must not be empty")
        for engine in o.engines or config.engine_ids:
            if (engine, o.name) in covered:
                bad(f"{key}.name", f"{o.name!r} is also objective {covered[(engine, o.name)]}'s name for {engine}: "
                                   "names tell the series and alerts apart")
            covered[(engine, o.name)] = i
    if config.slo.objectives:
        shortest = min((w for pairs in BURN_PAIRS.values() for p in pairs for w in (p.long, p.short)), key=seconds)
        try:
            step_ms = milliseconds(config.rules.evaluation_interval)
        except ValueError:
            return   # refused as a duration already
        if not 0 < step_ms < milliseconds(shortest) or milliseconds(shortest) % step_ms:
            bad("rules.interval", f"{shorten(config.rules.evaluation_interval)} must divide the SLO alerts' shortest "
                                  f"window ({shortest}) and be shorter: each evaluation records what the counters "
                                  "gained since the previous one, and a window adds whole evaluations")


def _check_kubernetes(k8s: KubernetesSettings, bad) -> None:
    """The rules the API server applies to namespaces, label keys and values, annotation keys."""
    if len(k8s.namespace) > 63 or not DNS1123_LABEL.fullmatch(k8s.namespace):
        bad("kubernetes.namespace", f"{k8s.namespace!r} is not a DNS-1123 label (lower-case a-z, 0-9, '-', max 63)")
    for key, labels in (("dashboard_labels", k8s.dashboard_labels), ("instance_selector", k8s.instance_selector),
                        ("rule_labels", k8s.rule_labels)):
        for name, value in labels.items():
            if problem := kubernetes_key_problem(name):
                bad(f"kubernetes.{key}", f"label name {name!r} {problem}")
            if len(value) > 63 or (value and not QUALIFIED_NAME.fullmatch(value)):
                bad(f"kubernetes.{key}", f"label value {value!r} must be at most 63 characters of [A-Za-z0-9-_.], "
                                         "starting and ending alphanumeric")
    if k8s.folder_annotation and (problem := kubernetes_key_problem(k8s.folder_annotation)):
        bad("kubernetes.folder_annotation", f"{k8s.folder_annotation!r} {problem}")
    if not k8s.folder.strip():
        bad("kubernetes.folder", "must not be empty")


def kubernetes_key_problem(key: str) -> str | None:
    """Why `key` is not a valid label/annotation key ([prefix/]name), or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return "has a prefix that is not a DNS-1123 subdomain"
    if not name or len(name) > 63 or not QUALIFIED_NAME.fullmatch(name):
        return "must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric"
    return None

