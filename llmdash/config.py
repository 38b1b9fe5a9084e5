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
    stays within `throughput_band` of its `baseline_window` rate."""

    latency_factor: float = 2.0
    throughput_band: float = 0.2
    window: str = "5m"
    baseline_window: str = "1h"
    baseline_resolution: str = "1m"
    annotation_step: str = "60s"
    min_tokens_per_second: float = 1.0
    alert_for: str = "5m"


@dataclass(frozen=True)
class Preemption:
    window: str = "5m"
    alert_rate: float = 0.1
    alert_for: str = "5m"


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


@dataclass(frozen=True)
class Config:
    engines: tuple[str, ...] = ()
    selectors: dict[str, str] = field(default_factory=dict)
    label_variables: tuple[str, ...] = ()
    thresholds: Thresholds = Thresholds()
    slo: Slo = Slo()
    divergence: Divergence = Divergence()
    preemption: Preemption = Preemption()
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
                 "rules.interval": config.rules.interval, "rules.latency_alert_for": config.rules.latency_alert_for}
    for key, value in durations.items():
        if not DURATION.match(value):
            bad(key, f"expected a Prometheus duration like 5m, got {value!r}")
    if seconds(div.baseline_window) < 4 * seconds(div.window):
        bad("divergence.baseline_window", "must be at least 4x divergence.window to be a baseline")
    if div.min_tokens_per_second < 0:
        bad("divergence.min_tokens_per_second", "must not be negative")
    if config.preemption.alert_rate < 0:
        bad("preemption.alert_rate", "must not be negative")
    if config.grafana.connect_timeout <= 0 or config.grafana.read_timeout <= 0:
        bad("grafana", "timeouts must be positive")


def seconds(duration: str) -> int:
    return int(duration[:-1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[duration[-1]]
