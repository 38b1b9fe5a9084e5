"""The one config object (`llmdash.yaml`) shared by dashboards, annotations and rules.

Every field has a default, so no file is needed. A file may set any subset; unknown keys,
wrong types and out-of-range values are one-line `LlmdashError`s naming the key.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from llmdash.engines.catalog import available_engines
from llmdash.errors import LlmdashError
from llmdash.panels.promql import seconds

DURATION = re.compile(r"^[0-9]+[smhd]$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
DEFAULT_CONFIG_FILE = "llmdash.yaml"


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
    waiting_requests: Levels = Levels(10, 50)


@dataclass(frozen=True)
class Slo:
    """Latency targets for every engine built; unset means each catalog's `slo_defaults`.
    A target must be a bucket bound of each engine's histogram (checked at build)."""

    ttft_seconds: float | None = None
    itl_seconds: float | None = None


@dataclass(frozen=True)
class Divergence:
    """Latency p99 over `window` at least `latency_factor` x its baseline (the median of that p99
    over `baseline_window`, sampled every `baseline_resolution`), while output tok/s over `window`
    stays within `throughput_band` of its `baseline_window` rate. The baseline window ends
    `baseline_offset` ago, so an incident shorter than offset + half the window never becomes its own
    baseline."""

    latency_factor: float = 2.0
    throughput_band: float = 0.2
    window: str = "5m"
    baseline_window: str = "1h"
    baseline_resolution: str = "1m"
    baseline_offset: str = "1h"
    annotation_step: str = "60s"
    min_tokens_per_second: float = 1.0
    alert_for: str = "5m"


@dataclass(frozen=True)
class Preemption:
    """`window`: the preemption panels' annotation and the per-model recorded rate. The page is per
    instance and normalised by its work: preemptions per finished request at least `page_share` over
    `short_window` (and at least `min_events` of them) and `confirm_share` over `long_window`; on
    engines with only a paused-requests gauge, the share of the last `short_window` in which requests
    were paused at least `paused_share` (and `paused_confirm_share` of `long_window`)."""

    window: str = "5m"
    page_share: float = 0.02
    confirm_share: float = 0.005
    min_events: float = 3
    paused_share: float = 0.5
    paused_confirm_share: float = 0.1
    short_window: str = "2m"
    long_window: str = "30m"
    alert_for: str = "1m"
    keep_firing_for: str = "10m"


@dataclass(frozen=True)
class Fleet:
    """How series aggregate across a fleet: every aggregation keeps `group_by` and the model label
    (so two clusters serving one model stay two routable alerts), and `instance_label` names a
    replica wherever a page or a drill-down is per instance."""

    group_by: tuple[str, ...] = ("cluster", "namespace")
    instance_label: str = "instance"


@dataclass(frozen=True)
class Rules:
    """Prometheus rule files: evaluation interval, how long latency must stay high, runbook location."""

    interval: str = "1m"
    latency_alert_for: str = "10m"
    runbook_base_url: str = "docs/runbooks"


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
    verify_tls: bool = True
    ca_cert: str | None = None


@dataclass(frozen=True)
class Config:
    engines: tuple[str, ...] = ()
    selectors: dict[str, str] = field(default_factory=dict)
    label_variables: tuple[str, ...] = ()
    thresholds: Thresholds = Thresholds()
    slo: Slo = Slo()
    divergence: Divergence = Divergence()
    preemption: Preemption = Preemption()
    fleet: Fleet = Fleet()
    rules: Rules = Rules()
    dashboard: DashboardSettings = DashboardSettings()
    grafana: GrafanaSettings = GrafanaSettings()
    source: str = "defaults"

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
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise LlmdashError(f"{path}: cannot read config ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}:" if mark else ""
        raise LlmdashError(f"{path}:{where} malformed YAML ({getattr(exc, 'problem', exc)})") from None
    config = _build(Config, data or {}, "", path)
    _check(config, path)
    return dataclasses.replace(config, source=str(path))


def _build(cls, data, prefix: str, path: Path):
    if not isinstance(data, dict):
        raise LlmdashError(f"{path}: {prefix or 'top level'}: expected a mapping")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.name != "source"}
    values = {}
    for key, value in data.items():
        where = f"{prefix}{key}"
        if key not in names:
            raise LlmdashError(f"{path}: {where}: unknown key (expected one of {', '.join(sorted(names))})")
        values[key] = _value(hints[key], value, where, path)
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
            raise LlmdashError(f"{path}: {where}: expected a number, got {value!r}")
        return float(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise LlmdashError(f"{path}: {where}: expected true or false, got {value!r}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise LlmdashError(f"{path}: {where}: expected a string, got {value!r}")
        return value
    raise AssertionError(f"unsupported config type {hint}")  # a programming error, not user input


def _check(config: Config, path: Path) -> None:
    def bad(key: str, problem: str):
        raise LlmdashError(f"{path}: {key}: {problem}")

    known = available_engines()
    for engine in config.engines:
        if engine not in known:
            bad("engines", f"unknown engine {engine!r} (known: {', '.join(known)})")
    for label in list(config.selectors) + list(config.label_variables):
        if not LABEL_NAME.match(label) or label.startswith("__"):
            bad("selectors" if label in config.selectors else "label_variables", f"{label!r} is not a label name")
    for label in config.label_variables:
        if label in ("model_name", "instance", "datasource"):
            bad("label_variables", f"{label!r} is already a dashboard variable")
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
    div = config.divergence
    if div.latency_factor <= 1:
        bad("divergence.latency_factor", f"must be above 1, got {div.latency_factor:g}")
    if not 0 < div.throughput_band < 1:
        bad("divergence.throughput_band", f"must be between 0 and 1, got {div.throughput_band:g}")
    durations = {"divergence.window": div.window, "divergence.baseline_window": div.baseline_window,
                 "divergence.annotation_step": div.annotation_step,
                 "divergence.baseline_resolution": div.baseline_resolution, "preemption.window": config.preemption.window,
                 "preemption.alert_for": config.preemption.alert_for, "divergence.alert_for": div.alert_for,
                 "preemption.short_window": config.preemption.short_window,
                 "preemption.long_window": config.preemption.long_window,
                 "preemption.keep_firing_for": config.preemption.keep_firing_for,
                 "divergence.baseline_offset": div.baseline_offset,
                 "rules.interval": config.rules.interval, "rules.latency_alert_for": config.rules.latency_alert_for}
    for key, value in durations.items():
        if not DURATION.match(value):
            bad(key, f"expected a Prometheus duration like 5m, got {value!r}")
    if seconds(div.baseline_window) < 4 * seconds(div.window):
        bad("divergence.baseline_window", "must be at least 4x divergence.window to be a baseline")
    if div.min_tokens_per_second < 0:
        bad("divergence.min_tokens_per_second", "must not be negative")
    p = config.preemption
    for name in ("page_share", "confirm_share", "min_events", "paused_share", "paused_confirm_share"):
        if getattr(p, name) < 0:
            bad(f"preemption.{name}", "must not be negative")
    for name in ("paused_share", "paused_confirm_share"):
        if getattr(p, name) > 1:
            bad(f"preemption.{name}", "is a share of time, 0-1")
    for label in config.fleet.group_by + (config.fleet.instance_label,):
        if not LABEL_NAME.match(label) or label.startswith("__") or label == "le":
            bad("fleet", f"{label!r} is not a label name to group by")
    if config.fleet.instance_label in config.fleet.group_by:
        bad("fleet.group_by", f"{config.fleet.instance_label!r} is the instance label; grouping by it is per instance")
    if config.grafana.connect_timeout <= 0 or config.grafana.read_timeout <= 0:
        bad("grafana", "timeouts must be positive")
