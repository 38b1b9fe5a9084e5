"""The recording-rule layer: one declarative registry of recorded series, and the signals read from it.

`RECORDINGS` declares every series the recording rules write, once: the question it answers (its
key: signal, role, window, quantile, level), its name, and how its expression is built. From it come
the record names, the rules themselves (`RecordingLayer.series`, in evaluation order) and every
recorded read (`RecordedSignals`), so a read of a series that no rule records cannot be written: it
raises, naming what was asked for.

Names follow the mixin convention `level:metric:operations`, the level being the labels kept, e.g.
`cluster_namespace_model_name:llm_output_tokens:rate5m`; a recorded quantile is named by its value
(`…:llm_ttft_seconds:p99_rate5m`), so changing the headline quantile renames its series. (Not a
`quantile` label: the alerts combine quantiles with throughput series with `and`, which matches on every
label, so a label only some operands carry would make them match nothing.) Every recorded series carries
`llm_engine`, and its
model as `model_name` whatever the engine calls it, so one name serves all engines and the fleet
dashboard reads them all at once. Fallbacks for renamed series are applied per replica in the leaves,
which read raw series through `Signals`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Callable

from llmdash.durations import duration, seconds
from llmdash.engines.model import EngineSpec, bucket_for
from llmdash.errors import LlmdashError
from llmdash.panels import promql
from llmdash.panels.promql import Matcher
from llmdash.panels.signals import Signals, SignalsBase, fixed_selectors
from llmdash.panels.slo import Leaves, indicator, objectives_for
from llmdash.vocabulary import (BUCKET_LABEL, ENGINE_LABEL, HEADLINE_QUANTILE, MODEL_LABEL, RECORDED_QUANTILES,
                                SLO_LABEL, BURN_PAIRS, Alert, Role, quantile_name)


class Level(StrEnum):
    MODEL = "model"         # the fleet's grouping labels and the model
    INSTANCE = "instance"   # the same plus the instance: what per-replica pages read


@dataclass(frozen=True)
class Key:
    """What a recorded series answers. `window` is a duration, None for gauges (an instant value)."""

    signal: str
    role: str | None = None
    window: str | None = None
    quantile: float | None = None
    level: Level = Level.MODEL

    def __str__(self) -> str:
        parts = [self.signal] + [f"{name}={value}" for name, value in
                                 (("role", self.role), ("window", self.window), ("quantile", self.quantile))
                                 if value is not None]
        return " ".join(parts) + ("" if self.level is Level.MODEL else " per instance")


@dataclass(frozen=True)
class Series:
    """One recorded series of one engine under one config: its rule and how it is selected."""

    key: Key
    name: str
    expr: str
    labels: tuple[tuple[str, str], ...] = ()   # set by the rule, besides the engine: what tells same-named rules apart


class _Build:
    """What an expression builder is handed: raw signals under the rules' scope (the leaves), recorded
    signals over the series declared so far (the layers above), and the spec and config."""

    def __init__(self, layer: "RecordingLayer"):
        self.spec, self.config = layer.spec, layer.config
        scope = fixed_selectors(layer.spec, layer.config)
        self.raw = Signals(layer.spec, layer.config, scope, layer.config.divergence.window)
        self.rec = RecordedSignals(layer.spec, layer.config, scope, layer.config.divergence.window, layer)

    def leaf(self, expr: str) -> str:
        """A raw-series expression carrying the model as `model_name` only (an empty replacement deletes a
        label), so every engine's recorded series have the same labels."""
        return promql.as_model_name(expr, self.spec.model_label, keep=False)


def _one(_raw) -> tuple:
    return (None,)


@dataclass(frozen=True)
class Recording:
    """A declared recorded series (or a family of them, over roles, windows and quantiles).

    `metric` may hold `{role}`, `operation` `{window}` and `{quantile}` (`p99`); `windows(config)` and
    `roles(raw)` give the
    family's members (a single None when the series has no role or window); `applies(raw)` whether the
    engine has it at all; `expr(build, key)` its expression.
    """

    signal: str
    metric: str
    operation: str
    expr: Callable[[_Build, Key], str]
    windows: Callable[[object], tuple] = lambda config: (config.divergence.window,)
    roles: Callable[[Signals], tuple] = _one
    quantiles: tuple = (None,)
    level: Level = Level.MODEL
    applies: Callable[[Signals], bool] = lambda raw: True
    labels: Callable[[Key], tuple] = lambda key: ()


@dataclass(frozen=True)
class PerRole:
    """Recordings taken role by role (each role's buckets, then its quantiles), so that a rule file lists a
    histogram's series together."""

    roles: Callable[[Signals], tuple]
    recordings: tuple[Recording, ...]


def _preemption_window(config) -> tuple:
    return (config.preemption.window,)


def _no_window(config) -> tuple:
    return (None,)


def _counter(raw: Signals) -> bool:
    return raw.spec.has(Role.PREEMPTIONS) and raw.preemption_is_counter


def _gauge(raw: Signals) -> bool:
    return raw.spec.has(Role.PREEMPTIONS) and not raw.preemption_is_counter


def _token_mean(raw: Signals) -> bool:
    return raw.token_latency_role is not None and raw.is_mean(raw.token_latency_role)


def _token_histogram(raw: Signals) -> bool:
    return raw.token_latency_role is not None and not raw.is_mean(raw.token_latency_role)


def _gauge_recording(role: Role, metric: str, reduce: str) -> Recording:
    return Recording(role.value, metric, reduce, lambda b, k: b.leaf(b.raw.gauge(role, reduce=reduce)),
                     windows=_no_window, applies=lambda raw: raw.spec.has(role))


def _model_bucket_rates(b: _Build, key: Key) -> str:
    """A model's bucket rates: the sum of its units' recorded ones where the layer records them (the straggler
    warning's), so each raw bucket is read once per evaluation; else from the raw buckets. Not for a ruler whose
    recorded series come back an evaluation late (`RecordingLayer.fresh`, vmalert): there a recording read of a
    recording would put the model's quantiles, and the pages over them, one interval behind."""
    unit = Key("bucket_rates", key.role, key.window, level=Level.INSTANCE)
    if unit in b.rec.layer and b.rec.layer.fresh:
        return f"sum{promql.by((BUCKET_LABEL,) + b.rec.recorded_model)} ({b.rec.selector(b.rec.layer.get(unit))})"
    return b.leaf(b.raw.bucket_rates(key.role, window=key.window))


def _unit_preemption_share(b: _Build, key: Key) -> str:
    """A unit's preemption share over the window: from its recorded preemption and finished-request rates where
    the layer records both over that window (the short one, recorded just above), so no raw counter is read twice
    in an evaluation; else from the raw counters. Raw too for a ruler whose recorded series come back an
    evaluation late (`RecordingLayer.fresh`), for the same reason as `_model_bucket_rates`."""
    rates = [Key(signal, None, key.window, level=Level.INSTANCE) for signal in ("preemption_rate", "requests")]
    if b.rec.layer.fresh and all(rate in b.rec.layer for rate in rates):
        preempted, finished = (b.rec.selector(b.rec.layer.get(rate)) for rate in rates)
        return b.rec.unit_share(preempted, finished, key.window)
    return b.leaf(b.raw.unit_preemption_share(key.window))


def _latency_baseline(b: _Build, key: Key) -> str:
    return promql.baseline(b.rec.latency(key.role), b.config.divergence)


# ---- service-level objectives: `role` is the objective's name, also the series' `slo` label -----------------
# Every window derives from the burn-rate pairs (`vocabulary.BURN_PAIRS`). A window's events are a count: the sum
# of what the counters gained at each evaluation (`Leaves`, recorded at the window `step`, the rule interval).
# The windows the page reads are summed from those at every evaluation; the windows only the ticket and the
# budget read are summed from the page's shortest long window (the hourly count), one per hour.
def _windows_of(alerts) -> tuple[str, ...]:
    windows = {w for alert in alerts for pair in BURN_PAIRS[alert] for w in (pair.long, pair.short)}
    return tuple(sorted(windows, key=seconds))


SLO_WINDOWS = _windows_of(BURN_PAIRS)                   # 5m, 30m, 1h, 2h, 6h, 1d, 3d
_PAGE_WINDOWS = _windows_of((Alert.SLO_BURN_FAST,))      # 5m, 30m, 1h, 6h: counted at every evaluation
SLO_BLOCK = min((p.long for p in BURN_PAIRS[Alert.SLO_BURN_FAST]), key=seconds)   # 1h
FINE_UNTIL_S = seconds(_PAGE_WINDOWS[-1])                # 6h


_TICKET_WINDOWS = tuple(w for w in _windows_of((Alert.SLO_BURN_SLOW,)) if w not in _PAGE_WINDOWS)   # 2h, 1d, 3d


def can_wait(key: Key) -> bool:
    """Whether a recorded series may be evaluated once a minute (the rule file's second group): only the SLO
    ticket, the budget and the dashboards read it, so no page waits for it. The SLO counts over the ticket's
    windows, their error ratios, and the budget consumed; not the per-step counts, which must be written at
    every step (`slo_step`), nor anything a page reads."""
    return key.signal == "slo_budget_consumed" or (
        key.signal in ("slo_events", "slo_errors", "slo_error_ratio") and key.window in _TICKET_WINDOWS)


def slo_step(config) -> str:
    """The interval the SLO counts are recorded at: the group's (pinned where objectives exist)."""
    return config.rules.evaluation_interval


def inside(window: str, step: str) -> str:
    """A range that holds exactly window/step samples written `step` apart, on Prometheus 2's closed ranges
    ([t - range, t]) and Prometheus 3's left-open ones alike: half a step shorter than the window, so the sample
    written exactly a window ago, which a closed range would add, is never in it."""
    return duration(seconds(window) - seconds(step) / 2)


def _objective_names(raw: Signals) -> tuple:
    return tuple(o.name for o in objectives_for(raw.config, raw.spec.id))


def _objective(b: _Build, name: str):
    return next(o for o in objectives_for(b.config, b.spec.id) if o.name == name)


def _slo_read(b: _Build, signal: str, name: str, window: str | None) -> str:
    return b.rec.selector(b.rec.series(signal, name, window), (Matcher(SLO_LABEL, "=", name),))


def _leaves(b: _Build, name: str) -> Leaves:
    return Leaves(b.spec, b.config, b.raw.scope, indicator(b.spec, b.config, _objective(b, name)))


def _hourly_sum(b: _Build, signal: str, name: str, window: str) -> str:
    """The window's count as the sum of one hourly count per hour: exact over the whole hours it covers, which
    end at most an hour (and a step) ago."""
    step = slo_step(b.config)
    return f"sum_over_time({_slo_read(b, signal, name, SLO_BLOCK)}[{inside(window, step)}:{SLO_BLOCK}])"


def _slo_count(signal: str):
    """Events (or bad events) over the key's window: at the step, what the raw counters gained since the previous
    evaluation (`Leaves`); up to 6h, the sum of those; beyond, the sum of the hourly counts (`_hourly_sum`), so no
    rule reads days of raw per-replica series. Counting the bad and the valid events apart weights every
    interval by its traffic, as one count over the whole window would."""
    def expr(b: _Build, k: Key) -> str:
        step = slo_step(b.config)
        if k.window == step:
            leaves = _leaves(b, k.role)
            return b.leaf(leaves.events(step) if signal == "slo_events" else leaves.errors(step))
        if seconds(k.window) <= FINE_UNTIL_S:
            return f"sum_over_time({_slo_read(b, signal, k.role, step)}[{inside(k.window, step)}])"
        return _hourly_sum(b, signal, k.role, k.window)
    return expr


def _slo_budget_consumed(b: _Build, k: Key) -> str:
    """The share of the error budget spent over the objective's window (1 = all of it): bad over valid events
    over the window, from the hourly counts, divided by the budget."""
    objective = _objective(b, k.role)
    over = {signal: _hourly_sum(b, signal, k.role, objective.window) for signal in ("slo_errors", "slo_events")}
    return f"({promql.divide(over['slo_errors'], over['slo_events'])}) / {objective.budget:.6g}"


def _slo_count_windows(config) -> tuple:
    return (slo_step(config),) + SLO_WINDOWS


def _slo_windows(config) -> tuple:
    return SLO_WINDOWS


def _slo_label(key: Key) -> tuple:
    """The objective's name as the rule's `slo` label: its rules share names, one per objective."""
    return ((SLO_LABEL, key.role),)


# In evaluation order: a rule reads only series declared above it.
RECORDINGS: tuple[Recording | PerRole, ...] = (
    Recording("throughput", "llm_output_tokens", "rate{window}",
              lambda b, k: b.leaf(b.raw.throughput(window=k.window))),
    Recording("throughput_baseline", "llm_output_tokens", "rate{window}_baseline",
              lambda b, k: promql.baseline(b.rec.throughput(), b.config.divergence)),
    Recording("requests", "llm_requests", "rate{window}", lambda b, k: b.leaf(b.raw.requests(window=k.window)),
              windows=_preemption_window, applies=lambda raw: raw.spec.has(Role.REQUESTS)),
    # the straggler warning's inputs: each KV-cache unit's own token-latency buckets and output (below), recorded
    # first: the model's buckets of that role are their sum
    Recording("bucket_rates", "llm_{role}_seconds_bucket", "rate{window}",
              lambda b, k: b.leaf(b.raw.bucket_rates(k.role, b.raw.unit_group, k.window)),
              roles=lambda raw: (raw.token_latency_role,), level=Level.INSTANCE,
              applies=_token_histogram),
    PerRole(lambda raw: raw.latency_roles, (
        Recording("bucket_rates", "llm_{role}_seconds_bucket", "rate{window}", _model_bucket_rates),
        Recording("quantile", "llm_{role}_seconds", "{quantile}_rate{window}",
                  lambda b, k: promql.quantile(k.quantile, b.rec.bucket_rates(k.role), b.raw.scale(k.role)),
                  quantiles=RECORDED_QUANTILES))),
    Recording("mean_latency_seconds", "llm_token_latency_seconds_sum", "rate{window}",
              lambda b, k: b.leaf(b.raw.mean_latency_parts(window=k.window)[0]), applies=_token_mean),
    Recording("mean_latency_tokens", "llm_token_latency_seconds_count", "rate{window}",
              lambda b, k: b.leaf(b.raw.mean_latency_parts(window=k.window)[1]), applies=_token_mean),
    Recording("mean_latency", "llm_token_latency_seconds", "mean_rate{window}",
              lambda b, k: promql.divide(*b.rec.mean_latency_parts()), applies=_token_mean),
    # ITL where the engine has it, else per-request TPOT: one name for the fleet view across engines
    Recording("token_latency_quantile", "llm_token_latency_seconds", "{quantile}_rate{window}",
              lambda b, k: b.rec.quantile(b.raw.token_latency_role, k.quantile),
              quantiles=(HEADLINE_QUANTILE,), applies=_token_histogram),
    Recording("latency_baseline", "llm_{role}_seconds", "{quantile}_baseline", _latency_baseline,
              roles=lambda raw: (raw.latency_role,), quantiles=(HEADLINE_QUANTILE,),
              applies=lambda raw: not raw.is_mean(raw.latency_role)),
    Recording("latency_baseline", "llm_token_latency_seconds", "mean_baseline", _latency_baseline,
              roles=lambda raw: (raw.latency_role,), applies=lambda raw: raw.is_mean(raw.latency_role)),
    # 1 of latency over baseline while the divergence condition holds: the fleet dashboard's annotation
    Recording("divergence", "llm_latency_throughput_divergence", "ratio_rate{window}",
              lambda b, k: b.rec.divergence_condition()),
    _gauge_recording(Role.KV_USAGE, "llm_kv_usage", "max"),
    _gauge_recording(Role.WAITING, "llm_waiting_requests", "sum"),
    _gauge_recording(Role.RUNNING, "llm_running_requests", "sum"),
    Recording("preemption_rate", "llm_preemptions", "rate{window}",
              lambda b, k: b.leaf(b.raw.preemption_rate(window=k.window)), windows=_preemption_window,
              applies=_counter),
    Recording("preemptions_per_request", "llm_preemptions_per_request", "ratio_rate{window}",
              lambda b, k: promql.divide(b.rec.preemption_rate(), b.rec.requests()), windows=_preemption_window,
              applies=_counter),
    # per KV-cache unit: the instance and its data-parallel rank, where the engine has one
    Recording("preemption_rate", "llm_preemptions", "rate{window}",
              lambda b, k: b.leaf(b.raw.preemption_rate(b.raw.unit_group, k.window)),
              windows=lambda config: (config.preemption.short_window,), level=Level.INSTANCE, applies=_counter),
    Recording("preemption_rate", "llm_paused_requests", "max{window}",
              lambda b, k: b.leaf(b.raw.preemption_rate(window=k.window)), windows=_preemption_window,
              applies=_gauge),
    # each unit's finished requests over the short window: with the preemptions above, what its chronic share is
    # averaged from (`RecordedSignals.preemption_share`), so no rule reads raw counters over the chronic window
    Recording("requests", "llm_requests", "rate{window}",
              lambda b, k: b.leaf(b.raw.requests(b.raw.finished_group, k.window)),
              windows=lambda config: (config.preemption.short_window,), level=Level.INSTANCE, applies=_counter),
    Recording("preemption_share", "llm_preemption_share", "ratio_rate{window}", _unit_preemption_share,
              windows=lambda config: (config.preemption.short_window, config.preemption.long_window),
              level=Level.INSTANCE, applies=_counter),
    Recording("preemption_share", "llm_preemption_share", "ratio_rate{window}",
              lambda b, k: b.leaf(b.raw.preemption_share(b.raw.instance_group, k.window)),
              windows=lambda config: (config.preemption.short_window, config.preemption.long_window),
              level=Level.INSTANCE, applies=_gauge),
    Recording("throughput", "llm_output_tokens", "rate{window}",
              lambda b, k: b.leaf(b.raw.throughput(b.raw.unit_group, k.window)),
              level=Level.INSTANCE, applies=_token_histogram),
    Recording("retracted_tokens", "llm_retracted_{role}_tokens", "rate{window}",
              lambda b, k: b.leaf(b.raw.retracted_tokens(k.role, window=k.window)), windows=_preemption_window,
              roles=lambda raw: ("input", "output"), applies=lambda raw: raw.has_retracted_sides),
    Recording("slo_events", "llm_slo_events", "increase{window}", _slo_count("slo_events"),
              windows=_slo_count_windows, roles=_objective_names, labels=_slo_label),
    Recording("slo_errors", "llm_slo_errors", "increase{window}", _slo_count("slo_errors"),
              windows=_slo_count_windows, roles=_objective_names, labels=_slo_label),
    Recording("slo_error_ratio", "llm_slo_errors", "ratio_rate{window}",
              lambda b, k: promql.divide(_slo_read(b, "slo_errors", k.role, k.window),
                                         _slo_read(b, "slo_events", k.role, k.window)),
              windows=_slo_windows, roles=_objective_names, labels=_slo_label),
    Recording("slo_budget_consumed", "llm_slo_error_budget", "consumed", _slo_budget_consumed, windows=_no_window,
              roles=_objective_names, labels=_slo_label),
    Recording("slo_coverage", "llm_slo_coverage", "ratio",
              lambda b, k: b.leaf(_leaves(b, k.role).coverage()), windows=_no_window, roles=_objective_names,
              labels=_slo_label),
)

# How a role is spelled inside a recorded name, where it differs from the role itself.
_NAME_OF_ROLE = {"input": "prompt", "output": "generated"}


class RecordingLayer:
    """The recorded series of one engine under one config, built from `RECORDINGS` in evaluation order. `fresh`:
    whether the ruler's rules read what the rules before them recorded in the same evaluation (Prometheus does;
    vmalert sees it an evaluation late: `llmdash.rules.targets.Ruler.fresh_recordings`). Names do not depend on
    it, only which series an expression reads."""

    def __init__(self, spec: EngineSpec, config, fresh: bool = True):
        self.spec, self.config, self.fresh = spec, config, fresh
        model = tuple(config.fleet.group_by) + (MODEL_LABEL,)
        self.level_prefix = {Level.MODEL: "_".join(model),
                             Level.INSTANCE: "_".join(model + (config.fleet.instance_label,))}
        self._series: dict[Key, Series] = {}
        build = _Build(self)
        for entry in RECORDINGS:
            if isinstance(entry, PerRole):
                for role in entry.roles(build.raw):
                    for recording in entry.recordings:
                        self._declare(build, recording, (role,))
            else:
                self._declare(build, entry, entry.roles(build.raw))

    def _declare(self, build: _Build, recording: Recording, roles: tuple) -> None:
        if not recording.applies(build.raw):
            return
        for role in roles:
            for window in recording.windows(self.config):
                for q in recording.quantiles:
                    key = Key(recording.signal, role, window, q, recording.level)
                    self._series[key] = Series(key, self.name(recording, key), recording.expr(build, key),
                                               recording.labels(key))

    def name(self, recording: Recording, key: Key) -> str:
        metric = recording.metric.format(role=_NAME_OF_ROLE.get(key.role, key.role))
        quantile = quantile_name(key.quantile).replace(".", "_") if key.quantile is not None else None
        operation = recording.operation.format(window=key.window, quantile=quantile)
        return f"{self.level_prefix[key.level]}:{metric}:{operation}"

    @property
    def series(self) -> tuple[Series, ...]:
        """Every recorded series, in evaluation order (later rules read earlier ones)."""
        return tuple(self._series.values())

    def get(self, key: Key) -> Series:
        try:
            return self._series[key]
        except KeyError:
            like = sorted(str(k) for k in self._series if k.signal == key.signal) or ["none"]
            raise LlmdashError(f"{self.spec.id}: no recording rule records {key} "
                               f"(recorded for {key.signal}: {'; '.join(like)})") from None

    def __contains__(self, key: Key) -> bool:
        return key in self._series


def recording_layer(spec: EngineSpec, config, fresh: bool = True) -> RecordingLayer:
    """The engine's recorded series under the config (cheap: names and expression text only)."""
    return RecordingLayer(spec, config, fresh)


INF_BUCKET = Matcher(BUCKET_LABEL, "=", "+Inf")   # the same text in every exporter and in Prometheus 3


class RecordedSignals(SignalsBase):
    """The signals answered from recorded series. `scope` is the raw scope (the matchers a dashboard or
    the rules put on raw series), of which only matchers on labels the recorded series keep apply.
    Questions the layer does not record raise; raw-only questions are asked of `.raw` explicitly. `inline`: each
    recorded series is read as its own expression over raw series instead (see `inlined`)."""

    def __init__(self, spec, config, scope: tuple[Matcher, ...], window: str, layer: RecordingLayer | None = None,
                 inline: bool = False):
        super().__init__(spec, config, scope, window)
        self.layer = layer if layer is not None else recording_layer(spec, config)
        self.inline = inline
        # the labels recorded series carry, so a per-model aggregate and a recorded series still match
        self.recorded_model = tuple(config.fleet.group_by) + (MODEL_LABEL, ENGINE_LABEL)
        kept = set(self.instance_group)
        self.recorded_scope = (Matcher(ENGINE_LABEL, "=", spec.id),) + tuple(
            Matcher(self._recorded_label(m.label), m.op, m.value) for m in scope if m.label in kept)

    @property
    def legend_labels(self) -> tuple[str, ...]:
        return (MODEL_LABEL,) + tuple(self.config.fleet.group_by)

    def _recorded_label(self, label: str) -> str:
        return MODEL_LABEL if label == self.spec.model_label else label

    def _group(self, group) -> tuple[str, ...]:
        """The recorded labels for a group given in the engine's own labels (None: per model)."""
        return self.recorded_model if group is None else tuple(self._recorded_label(label) for label in group)

    def series(self, signal: str, role: str | None = None, window: str | None = None,
               quantile: float | None = None, level: Level = Level.MODEL) -> Series:
        return self.layer.get(Key(signal, role, window, quantile, level))

    def inlined(self) -> "RecordedSignals":
        """The same questions, each recorded series read as its recording rule's own expression: for a ruler whose
        alerts see the recorded series of the previous evaluation only (vmalert writes them back by remote write),
        the same answer without waiting for them."""
        return RecordedSignals(self.spec, self.config, self.scope, self.window, self.layer, inline=True)

    def selector(self, series: Series, matchers: tuple[Matcher, ...] = ()) -> str:
        """The series under the scope; the instance matcher applies to instance-level series only."""
        if self.inline and not matchers:
            return f"({series.expr})"
        instance = self.config.fleet.instance_label
        scope = self.recorded_scope if series.key.level is Level.INSTANCE else tuple(
            m for m in self.recorded_scope if m.label != instance)
        return promql.selector(series.name, matchers + scope)

    def _read(self, series: Series, reduce: str, group, extra: tuple[str, ...] = ()) -> str:
        group = self._group(group)
        if group == self.recorded_model and not extra:
            return self.selector(series)
        return f"{reduce}{promql.by(extra + group)} ({self.selector(series)})"

    # ---- the primitive reads, each from one recorded series --------------------------------------
    def throughput(self, group=None, window=None) -> str:
        return self._read(self.series("throughput", window=window or self.config.divergence.window), "sum", group)

    def throughput_baseline(self, group=None) -> str:
        return self._read(self.series("throughput_baseline", window=self.config.divergence.window), "sum", group)

    def requests(self, group=None, window=None) -> str:
        return self._read(self.series("requests", window=window or self.config.preemption.window), "sum", group)

    def retracted_tokens(self, side: str, group=None, window=None) -> str:
        return self._read(self.series("retracted_tokens", side, window or self.config.preemption.window), "sum",
                          group)

    def gauge(self, role: str, group=None, reduce: str = "sum") -> str:
        return self._read(self.series(role), reduce, group)

    def preemption_rate(self, group=None, window=None) -> str:
        return self._read(self.series("preemption_rate", window=window or self.config.preemption.window), "sum",
                          group)

    def instance_preemptions(self, window: str) -> str:
        return self.selector(self.series("preemption_rate", window=window, level=Level.INSTANCE))

    def preemption_share(self, group=None, window=None) -> str:
        """Per instance: the recorded share (over the chronic window, `_averaged_share`). Per model: preemptions per
        finished request (the worst instance's paused share on a paused-requests gauge)."""
        window = window or self.config.preemption.short_window
        per_unit = group is not None and self.config.fleet.instance_label in group
        if per_unit and self.preemption_is_counter and Key("preemption_share", None, window, None,
                                                             Level.INSTANCE) not in self.layer:
            return self._averaged_share(window)
        share = self.series("preemption_share", window=window, level=Level.INSTANCE)
        if per_unit:
            return self.selector(share)
        if self.preemption_is_counter:
            if group is None:
                return self._read(self.series("preemptions_per_request", window=self.config.preemption.window),
                                  "sum", group)
            return promql.divide(self.preemption_rate(group), self.requests(group))
        return f"max{promql.by(self._group(group))} ({self.selector(share)})"

    def _averaged_share(self, window: str) -> str:
        """Per KV-cache unit, the share over a window no series records (the chronic one): its recorded
        short-window preemption and finished-request rates, each averaged over `window` (one sample each per
        evaluation), then `unit_share`. Both averages weight every evaluation alike, so the share stays weighted
        by traffic; it covers the window and the short window before it, ramping in and out over the short one."""
        short = self.config.preemption.short_window
        preempted, finished = (f"avg_over_time({self.selector(self.series(signal, window=short, level=Level.INSTANCE))}"
                               f"[{window}])" for signal in ("preemption_rate", "requests"))
        return self.unit_share(preempted, finished, window)

    def _labels(self, group: tuple[str, ...]) -> tuple[str, ...]:
        return self._group(group)

    def bucket_rates(self, role: str, group=None, window=None) -> str:
        series = self.series("bucket_rates", role, window or self.config.divergence.window)
        return self._read(series, "sum", group, extra=(BUCKET_LABEL,))

    def quantile(self, role: str, q: float = HEADLINE_QUANTILE, group=None, window=None) -> str:
        """Per model, the recorded quantile; at any other grouping, the quantile of the recorded buckets."""
        window = window or self.config.divergence.window
        if group is None:
            return self._read(self.series("quantile", role, window, q), "sum", group)
        return promql.quantile(q, self.bucket_rates(role, group, window), self.scale(role))

    def instance_quantile(self, role: str, q: float = HEADLINE_QUANTILE) -> str:
        """Per KV-cache unit, the quantile of its own recorded buckets (what the straggler warning compares)."""
        series = self.series("bucket_rates", role, self.config.divergence.window, level=Level.INSTANCE)
        group = (BUCKET_LABEL,) + self.recorded_model + (self.config.fleet.instance_label,) + self.spec.ranks.unit
        return promql.quantile(q, f"sum{promql.by(group)} ({self.selector(series)})", self.scale(role))

    @property
    def recorded_unit(self) -> tuple[str, ...]:
        """The labels of one KV-cache unit in recorded series and in the per-unit alerts' `ALERTS`, `llm_engine` aside
        (raw series do not carry it)."""
        return self._group(self.unit_group)

    def scraped(self, role: str) -> str:
        """1 per KV-cache unit whose `role` series are scraped now, in recorded labels: what a warning about the unit
        is joined with, so it ends when the unit stops being scraped (read from raw series: a recorded rate would
        outlive the target by its window)."""
        return promql.as_model_name(self.raw.present(role, self.unit_group), self.spec.model_label, keep=False)

    def instance_throughput(self) -> str:
        return self.selector(self.series("throughput", window=self.config.divergence.window, level=Level.INSTANCE))

    def divergence_ratio(self) -> str:
        """Latency over its baseline, per model, only while the divergence condition holds (recorded)."""
        return self.selector(self.series("divergence", window=self.config.divergence.window))

    def token_latency_quantile(self, q: float = HEADLINE_QUANTILE) -> str:
        return self.selector(self.series("token_latency_quantile", window=self.config.divergence.window,
                                         quantile=q))

    def _bucket(self, role: str, le: Matcher, group) -> str:
        """One bucket's recorded rate summed over the group (which drops `le`, so buckets divide)."""
        series = self.series("bucket_rates", role, self.config.divergence.window)
        return f"sum{promql.by(group)} ({self.selector(series, (le,))})"

    def share_above_top_bucket(self, role: str, group=None, window=None) -> str:
        group = self._group(group)
        top = self.bucket(self.top_bound(role) / self.scale(role))
        return f"1 - {promql.divide(self._bucket(role, top, group), self._bucket(role, INF_BUCKET, group))}"

    def slo_share(self, role: str, target_seconds: float, group=None) -> str:
        group = self._group(group)
        le = self.bucket(bucket_for(self.sources(role)[0].metric, target_seconds))
        return promql.divide(self._bucket(role, le, group), self._bucket(role, INF_BUCKET, group))

    def slo(self, signal: str, objective: str, window: str | None = None) -> str:
        """One objective's recorded SLO series (`slo_events`, `slo_errors`, `slo_error_ratio` over a window, or
        `slo_budget_consumed`), per model and fleet group, under the scope."""
        return self.selector(self.series(signal, objective, window), (Matcher(SLO_LABEL, "=", objective),))

    def mean_latency_parts(self, group=None, window=None) -> tuple[str, str]:
        window = window or self.config.divergence.window
        return (self._read(self.series("mean_latency_seconds", window=window), "sum", group),
                self._read(self.series("mean_latency_tokens", window=window), "sum", group))

    def mean_latency(self, group=None, window=None) -> str:
        if group is None:
            return self._read(self.series("mean_latency", window=window or self.config.divergence.window), "sum",
                              group)
        return promql.divide(*self.mean_latency_parts(group, window))

    def latency_baseline(self, group=None) -> str:
        role = self.latency_role
        q = None if self.is_mean(role) else HEADLINE_QUANTILE
        return self._read(self.series("latency_baseline", role, self.config.divergence.window, q), "max", group)
