"""The recording-rule layer's series, by name, and the signals read from them.

`RecordedNames` names every series the recording rules write, mixin style
(`level:metric:operations`, the level being the labels kept, e.g.
`cluster_namespace_model_name:llm_output_tokens:rate5m`); `RecordedSignals` answers the
same questions as `Signals` from those series, so alerts, recorded dashboards and the fleet
dashboard read a handful of pre-aggregated series instead of every bucket of every replica.
Every recorded series carries `llm_engine`, and its model as `model_name` whatever the engine
calls it, so one name serves all engines and the fleet dashboard reads them all at once.

Questions without a recorded equivalent (preemptions per finished request, the per-instance
drill-down) fall through to the raw `Signals` methods.
"""

from __future__ import annotations

from llmdash.engines.model import bucket_for
from llmdash.panels import promql
from llmdash.panels.promql import Matcher
from llmdash.panels.signals import ENGINE_LABEL, MODEL_LABEL, Signals


class RecordedNames:
    """Series names the recording rules write for one config (their level depends on `fleet`)."""

    def __init__(self, config):
        self.config = config
        model = tuple(config.fleet.group_by) + (MODEL_LABEL,)
        self.model_level = "_".join(model)
        self.instance_level = "_".join(model + (config.fleet.instance_label,))

    def _model(self, metric: str, operation: str) -> str:
        return f"{self.model_level}:{metric}:{operation}"

    def _instance(self, metric: str, operation: str) -> str:
        return f"{self.instance_level}:{metric}:{operation}"

    # model level
    def throughput(self, window: str) -> str:
        return self._model("llm_output_tokens", f"rate{window}")

    def throughput_baseline(self) -> str:
        return self._model("llm_output_tokens", f"rate{self.config.divergence.window}_baseline")

    def requests(self) -> str:
        return self._model("llm_requests", f"rate{self.config.preemption.window}")

    def retracted_tokens(self, side: str) -> str:
        return self._model(f"llm_retracted_{'prompt' if side == 'input' else 'generated'}_tokens",
                           f"rate{self.config.preemption.window}")

    def buckets(self, role: str) -> str:
        return self._model(f"llm_{role}_seconds_bucket", f"rate{self.config.divergence.window}")

    def quantile(self, role: str, q: float) -> str:
        return self._model(f"llm_{role}_seconds", f"p{round(q * 100)}_rate{self.config.divergence.window}")

    def token_latency_p99(self) -> str:
        """ITL p99, else per-request TPOT p99: one name for the fleet view across engines."""
        return self._model("llm_token_latency_seconds", f"p99_rate{self.config.divergence.window}")

    def latency(self, role: str) -> str:
        """A latency role's headline record: its p99, or the mean time per token."""
        return self.token_latency_mean() if Signals.is_mean(role) else self.quantile(role, 0.99)

    def latency_baseline(self, role: str) -> str:
        if Signals.is_mean(role):
            return self._model("llm_token_latency_seconds", "mean_baseline")
        return self._model(f"llm_{role}_seconds", "p99_baseline")

    def token_latency_mean_parts(self) -> tuple[str, str]:
        """Decode seconds/s and tokens/s of the mean, like a histogram's _sum and _count rates."""
        window = f"rate{self.config.divergence.window}"
        return (self._model("llm_token_latency_seconds_sum", window),
                self._model("llm_token_latency_seconds_count", window))

    def token_latency_mean(self) -> str:
        """Mean time per token where the engine has no latency histogram (never mixed with a p99)."""
        return self._model("llm_token_latency_seconds", f"mean_rate{self.config.divergence.window}")

    def preemptions(self) -> str:
        return self._model("llm_preemptions", f"rate{self.config.preemption.window}")

    def paused(self) -> str:
        return self._model("llm_paused_requests", f"max{self.config.preemption.window}")

    def preemptions_per_request(self) -> str:
        return self._model("llm_preemptions_per_request", f"ratio_rate{self.config.preemption.window}")

    def gauge(self, role: str) -> str:
        return {"kv_usage": self._model("llm_kv_usage", "max"),
                "waiting": self._model("llm_waiting_requests", "sum"),
                "running": self._model("llm_running_requests", "sum")}[role]

    # instance level
    def instance_preemption_share(self, window: str) -> str:
        return self._instance("llm_preemption_share", f"ratio_rate{window}")

    def instance_preemptions(self, window: str) -> str:
        return self._instance("llm_preemptions", f"rate{window}")


class RecordedSignals(Signals):
    """`Signals` answered from recorded series; `scope` is the raw scope (for fall-through questions),
    of which only matchers on labels the recorded series keep apply to them."""

    def __init__(self, spec, config, scope: tuple[Matcher, ...], window: str):
        super().__init__(spec, config, scope, window)
        self.names = RecordedNames(config)
        # the labels recorded series carry, so a per-model aggregate and a recorded series still match
        self.recorded_model = tuple(config.fleet.group_by) + (MODEL_LABEL, ENGINE_LABEL)
        kept = set(self.instance_group)
        self.recorded_scope = (Matcher(ENGINE_LABEL, "=", spec.id),) + tuple(
            Matcher(self._recorded_label(m.label), m.op, m.value) for m in scope if m.label in kept)

    @property
    def legend_labels(self) -> tuple[str, ...]:
        return (MODEL_LABEL,) + tuple(self.config.fleet.group_by)

    @property
    def raw(self) -> Signals:
        return Signals(self.spec, self.config, self.scope, self.window)

    def _recorded_label(self, label: str) -> str:
        return MODEL_LABEL if label == self.spec.model_label else label

    def _group(self, group) -> tuple[str, ...]:
        """The recorded labels for a group given in the engine's own labels (None: per model)."""
        return self.recorded_model if group is None else tuple(self._recorded_label(label) for label in group)

    def _scoped(self, name: str, matchers: tuple[Matcher, ...] = ()) -> str:
        """A model-level recorded series under the scope (the instance variable does not apply to it)."""
        instance = self.config.fleet.instance_label
        return promql.selector(name, matchers + tuple(m for m in self.recorded_scope if m.label != instance))

    def _read(self, name: str, reduce: str, group, extra: tuple[str, ...] = ()) -> str:
        group = self._group(group)
        if group == self.recorded_model and not extra:
            return self._scoped(name)
        return f"{reduce}{promql.by(extra + group)} ({self._scoped(name)})"

    def throughput(self, group=None, window=None) -> str:
        d = self.config.divergence
        return self._read(self.names.throughput(d.window), "sum", group)

    def throughput_baseline(self, group=None) -> str:
        return self._read(self.names.throughput_baseline(), "sum", group)

    def requests(self, group=None, window=None) -> str:
        return self._read(self.names.requests(), "sum", group)

    def retracted_tokens(self, side: str, group=None, window=None) -> str:
        return self._read(self.names.retracted_tokens(side), "sum", group)

    def gauge(self, role: str, group=None, reduce: str = "sum") -> str:
        return self._read(self.names.gauge(role), reduce, group)

    def preemption_rate(self, group=None, window=None) -> str:
        if self.preemption_is_counter:
            return self._read(self.names.preemptions(), "sum", group)
        return self._read(self.names.paused(), "sum", group)

    def preemption_share(self, group=None, window=None) -> str:
        window = window or self.config.preemption.short_window
        if group is not None and self.config.fleet.instance_label in group:
            return promql.selector(self.names.instance_preemption_share(window), self.recorded_scope)
        if self.preemption_is_counter:
            return self._read(self.names.preemptions_per_request(), "sum", group) if group is None else \
                promql.divide(self.preemption_rate(group), self.requests(group))
        group = self._group(group)
        return f"max{promql.by(group)} ({promql.selector(self.names.instance_preemption_share(window), self.recorded_scope)})"

    def instance_preemptions(self, window: str) -> str:
        return promql.selector(self.names.instance_preemptions(window), self.recorded_scope)

    def bucket_rates(self, role: str, group=None, window=None) -> str:
        return self._read(self.names.buckets(role), "sum", group, extra=("le",))

    def quantile(self, role: str, q: float = 0.99, group=None, window=None) -> str:
        if group is None and q in (0.5, 0.99):
            return self._read(self.names.quantile(role, q), "sum", group)
        return promql.quantile(q, self.bucket_rates(role, group), self.scale(role))

    def _bucket(self, role: str, le: str, group) -> str:
        """One bucket's recorded rate summed over the group (which drops `le`, so buckets divide)."""
        return f"sum{promql.by(group)} ({self._scoped(self.names.buckets(role), (Matcher('le', '=', le),))})"

    def share_above_top_bucket(self, role: str, group=None, window=None) -> str:
        group = self._group(group)
        top = self.spec.le(self.top_bound(role) / self.scale(role))
        return f"1 - {promql.divide(self._bucket(role, top, group), self._bucket(role, '+Inf', group))}"

    def slo_share(self, role: str, target_seconds: float, group=None) -> str:
        group = self._group(group)
        le = self.spec.le(bucket_for(self.sources(role)[0].metric, target_seconds))
        return promql.divide(self._bucket(role, le, group), self._bucket(role, "+Inf", group))

    def mean_latency_parts(self, group=None, window=None) -> tuple[str, str]:
        seconds, tokens = self.names.token_latency_mean_parts()
        return self._read(seconds, "sum", group), self._read(tokens, "sum", group)

    def mean_latency(self, group=None, window=None) -> str:
        if group is None:
            return self._read(self.names.token_latency_mean(), "sum", group)
        return promql.divide(*self.mean_latency_parts(group))

    def latency_baseline(self, group=None) -> str:
        return self._read(self.names.latency_baseline(self.latency_role), "max", group)
