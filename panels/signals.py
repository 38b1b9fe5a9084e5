"""Named signals: the only place where PromQL is written.

A `Signals` object binds an engine spec to a scope (label matchers: config selectors,
plus dashboard variables when the query goes into a dashboard) and a rate window
(`$__rate_interval` in panels, fixed windows in annotations and rules). Panels,
annotations, alert rules and the demo all ask it for the same expressions, so a
signal is computed one way everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmdash.engines.catalog import UNIT_TO_SECONDS, EngineSpec, Source, bound_problem, bucket_for
from llmdash.errors import LlmdashError
from llmdash.panels import promql
from llmdash.panels.promql import Matcher

LATENCY_ROLES = ("itl", "tpot", "ttft")
ENGINE_LABEL = "llm_engine"  # not `engine`: vLLM and LMDeploy already use it for the data-parallel rank


@dataclass(frozen=True)
class SignalInfo:
    """What a signal is called and how it is shown, wherever it appears."""

    title: str
    unit: str  # Grafana unit id
    meaning: str


INFO = {
    "throughput": SignalInfo("Output tokens/s", "suffix: tok/s", "generated tokens per second"),
    "ttft": SignalInfo("TTFT p99", "s", "time to first token"),
    "itl": SignalInfo("ITL p99", "s", "inter-token latency"),
    "tpot": SignalInfo("TPOT p99", "s", "time per output token of a whole request"),
}


class Signals:
    """PromQL for one engine under one scope; `group` labels every result keeps (model by default)."""

    def __init__(self, spec: EngineSpec, config, scope: tuple[Matcher, ...], window: str,
                 recorded: dict[str, str] | None = None):
        self.spec = spec
        self.config = config
        self.scope = scope
        self.window = window
        self.model = (spec.model_label,)
        # raw leaf expression -> recording rule name: rules compose alerts from recorded leaves
        self.recorded = recorded or {}

    def _is_recorded(self, expr: str) -> bool:
        return expr.split("{", 1)[0] in self.recorded.values()

    def _leaf(self, expr: str) -> str:
        name = self.recorded.get(expr)
        return promql.selector(name, (Matcher(ENGINE_LABEL, "=", self.spec.id),)) if name else expr

    # ---- series selection -------------------------------------------------
    def _select(self, source: Source, series: str | None = None, extra: tuple[Matcher, ...] = ()) -> str:
        own = tuple(Matcher(label, "=", value) for label, value in source.match)
        return promql.selector(series or source.series, own + extra + self.scope)

    def _sources(self, role: str) -> tuple[Source, ...]:
        if not self.spec.has(role):
            raise LlmdashError(f"engine {self.spec.id} has no {role} signal")
        return self.spec.signal(role).sources

    # ---- counters ---------------------------------------------------------
    def counter_rate(self, role: str, group: tuple[str, ...] | None = None, window: str | None = None) -> str:
        """Per-second rate of a counter signal, summed per group; fallbacks or-ed after the sum."""
        group = self.model if group is None else group
        window = window or self.window
        return self._leaf(promql.first_of([promql.sum_by(group, promql.rate(self._select(s), window))
                                           for s in self._sources(role)]))

    def throughput(self, group=None, window=None) -> str:
        return self.counter_rate("throughput", group, window)

    def requests(self, group=None, window=None) -> str:
        return self.counter_rate("requests", group, window)

    def retracted_tokens(self, side: str, group=None) -> str:
        return self.counter_rate(f"retracted_{side}_tokens", group)

    # ---- gauges -----------------------------------------------------------
    def gauge(self, role: str, group=None, aggregate=promql.sum_by) -> str:
        group = self.model if group is None else group
        return promql.first_of([aggregate(group, self._select(s)) for s in self._sources(role)])

    def kv_usage(self, group=None) -> str:
        """The fullest instance counts: KV pressure is per engine, so take the max, never a sum."""
        return self.gauge("kv_usage", group, promql.max_by)

    def waiting(self, group=None) -> str:
        return self.gauge("waiting", group)

    def running(self, group=None) -> str:
        return self.gauge("running", group)

    # ---- preemption -------------------------------------------------------
    @property
    def preemption_is_counter(self) -> bool:
        return self._sources("preemptions")[0].kind == "counter"

    def preemption_rate(self, group=None, window=None) -> str:
        """Preemptions/s from a counter; where the engine only has the paused-requests gauge, the most
        requests it showed in the window (it holds the latest iteration only, so an instant sample
        misses most pauses)."""
        if self.preemption_is_counter:
            return self.counter_rate("preemptions", group, window)
        group = self.model if group is None else group
        window = window or self.window
        return promql.first_of([promql.sum_by(group, f"max_over_time({self._select(s)}[{window}])")
                                for s in self._sources("preemptions")])

    def recompute_side(self, group=None) -> str | None:
        """1 per model, labelled recompute_side="prompt" or "decode": which retracted tokens dominate."""
        if not (self.spec.has("retracted_input_tokens") and self.spec.has("retracted_output_tokens")):
            return None
        window = self.config.preemption.window
        prompt = self.counter_rate("retracted_input_tokens", group, window)
        decode = self.counter_rate("retracted_output_tokens", group, window)
        return (f'label_replace(({prompt}) >= ({decode}), "recompute_side", "prompt", "", "") * 0 + 1 or '
                f'label_replace(({decode}) > ({prompt}), "recompute_side", "decode", "", "") * 0 + 1')

    def preemptions_per_request(self, group=None) -> str:
        """Mean preemptions per finished request (the histogram's le="1" bucket mixes 0 and 1)."""
        group = self.model if group is None else group
        parts = []
        for s in self._sources("preemptions_per_request"):
            total = promql.sum_by(group, promql.rate(self._select(s, f"{s.metric.name}_sum"), self.window))
            count = promql.sum_by(group, promql.rate(self._select(s, f"{s.metric.name}_count"), self.window))
            parts.append(promql.divide(total, count))
        return promql.first_of(parts)

    # ---- histograms -------------------------------------------------------
    def quantile(self, role: str, q: float = 0.99, group=None, window=None) -> str:
        group = self.model if group is None else group
        window = window or self.window
        sources = self._sources(role)
        scale = UNIT_TO_SECONDS[sources[0].metric.unit]
        rates = [promql.sum_by(("le",) + tuple(group),
                               promql.rate(self._select(s, f"{s.metric.name}_bucket"), window)) for s in sources]
        return self._leaf(promql.quantile(q, rates, scale))

    @property
    def token_latency_role(self) -> str | None:
        """ITL where the engine has it, else per-request TPOT: the per-token latency it can show."""
        return next((role for role in ("itl", "tpot") if self.spec.has(role)), None)

    @property
    def latency_role(self) -> str:
        """The finest latency histogram the engine has: ITL, else per-request TPOT, else TTFT."""
        return next(role for role in LATENCY_ROLES if self.spec.has(role))

    def slo_target(self, name: str) -> float | None:
        """SLO target in seconds: the config's, else the catalog default; None when neither applies."""
        configured = getattr(self.config.slo, name)
        target = configured if configured is not None else self.spec.slo_defaults.get(name)
        if target is None:
            return None
        role = "ttft" if name == "ttft_seconds" else self.token_latency_role
        for source in self._sources(role):
            problem = bound_problem(source.metric, target)
            if problem:
                raise LlmdashError(f"{self.config.source}: slo.{name}: {problem} ({self.spec.id}); "
                                   "pick a bound that every engine built has, or limit `engines:`")
        return target

    def slo_share(self, role: str, target_seconds: float, group=None) -> str:
        """Share of observations at or under the target, read from the target's own bucket."""
        group = self.model if group is None else group
        parts = []
        for s in self._sources(role):
            le = Matcher("le", "=", self.spec.le(bucket_for(s.metric, target_seconds)))
            good = promql.sum_by(group, promql.rate(self._select(s, f"{s.metric.name}_bucket", (le,)), self.window))
            total = promql.sum_by(group, promql.rate(self._select(s, f"{s.metric.name}_count"), self.window))
            parts.append(promql.divide(good, total))
        return promql.first_of(parts)

    # ---- divergence: latency rising while throughput holds -------------------
    def latency_vs_baseline(self, group=None) -> str:
        """Latency p99 now divided by its baseline: the median of the same p99 over the trailing window.

        Not the p99 of the whole window's buckets: that needs only 1 % slow samples in the hour,
        so a collapse would become its own baseline within minutes and the ratio fall back under
        the factor while the collapse goes on. The median holds for half the baseline window.
        """
        d = self.config.divergence
        now = self.quantile(self.latency_role, 0.99, group, d.window)
        history = f"{now}[{d.baseline_window}]" if self._is_recorded(now) else \
            f"({now})[{d.baseline_window}:{d.baseline_resolution}]"
        return promql.divide(now, f"quantile_over_time(0.5, {history})")

    def throughput_vs_baseline(self, group=None) -> str:
        d = self.config.divergence
        return promql.divide(self.throughput(group, d.window), self.throughput(group, d.baseline_window))

    def divergence_condition(self, group=None) -> str:
        """Latency p99 / baseline p99, per model, while it is >= factor and output tok/s stays within
        the band of its own baseline and above the traffic floor (too few tokens make p99 noise)."""
        d = self.config.divergence
        latency_up = f"{self.latency_vs_baseline(group)} >= {d.latency_factor:g}"
        throughput_holds = f"abs({self.throughput_vs_baseline(group)} - 1) <= {d.throughput_band:g}"
        enough_traffic = f"{self.throughput(group, d.window)} >= {d.min_tokens_per_second:g}"
        return f"({latency_up}) and ({throughput_holds}) and ({enough_traffic})"

    def divergence(self, group=None) -> str:
        """1 per model while the divergence condition holds: the annotation's form."""
        return promql.as_flag(self.divergence_condition(group))

    def preemption_active(self, group=None) -> str:
        """1 per model while preemptions happen (rate over the preemption window, or paused > 0)."""
        return promql.as_flag(f"{self.preemption_rate(group, self.config.preemption.window)} > 0")
