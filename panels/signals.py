"""Named signals: the only place where PromQL is written.

A `Signals` object binds an engine spec to a scope (label matchers: config selectors, plus
dashboard variables when the query goes into a dashboard) and a rate window
(the recorded window, `divergence.window`, in panels; fixed windows in annotations and rules). Panels, annotations,
recording rules and the demo all ask it for the same expressions, so a signal is computed
one way everywhere. `RecordedSignals` answers the same questions from the series the
recording rules write (`llmdash.panels.recorded` names them), for alerts and for dashboards
with `dashboard.use_recording_rules`.

Fleet rules, once, here:
- every aggregation keeps the config's `fleet.group_by` labels and the model label, so two
  clusters serving one model stay apart;
- a renamed series falls back per series, before any aggregation: each source is first
  reduced to the replica's identity (group labels, model, instance), then `new or old`, so
  replicas still on the old name are never hidden by one that exports the new name, and
  sources with different label sets cannot double count;
- unprefixed names other exporters share (`generic` in the catalog) are read only under a
  `job` selector.

`config` is the `llmdash.config.Config` object the caller passes in.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from llmdash.durations import seconds
from llmdash.engines.model import UNIT_TO_SECONDS, EngineSpec, Source, bound_problem, bucket_for
from llmdash.errors import LlmdashError
from llmdash.panels import promql
from llmdash.panels.promql import Matcher
from llmdash.vocabulary import (BUCKET_LABEL, ENGINE_LABEL, HEADLINE, HEADLINE_QUANTILE, LATENCY_HISTOGRAM_ROLES,
                                LATENCY_ROLES, LOG_PREEMPTIONS, PANEL_TITLES, TOKEN_LATENCY_ROLES, Panel, Role)

PAUSED_RESOLUTION = "30s"  # how finely the paused-requests gauge is sampled when its paused share is taken


@dataclass(frozen=True)
class SignalInfo:
    """What a signal is called and how it is shown, wherever it appears."""

    title: str
    unit: str  # Grafana unit id
    meaning: str


INFO = {
    Role.THROUGHPUT: SignalInfo(PANEL_TITLES[Panel.THROUGHPUT], "suffix: tok/s", "generated tokens per second"),
    Role.TTFT: SignalInfo(f"TTFT {HEADLINE}", "s", "time to first token"),
    Role.ITL: SignalInfo(f"ITL {HEADLINE}", "s", "inter-token latency"),
    Role.TPOT: SignalInfo(f"TPOT {HEADLINE}", "s", "time per output token of a whole request"),
    Role.TOKEN_LATENCY_MEAN: SignalInfo("Mean time per token", "s", "decode time per generated token"),
}
MEAN_WHY = ("It is a mean over the requests that finished in the window (the engine adds a request's decode time and "
            "tokens when it finishes, and has no latency histogram), so it moves late and less than a p99: a stall "
            "that hits a few requests is averaged over every token of every request, and a stalled request counts "
            "only once it finishes.")


def fixed_selectors(spec: EngineSpec, config) -> tuple[Matcher, ...]:
    """Exact matchers every query of the engine carries: the catalog's defaults (where names alone
    are ambiguous, such as unprefixed series), overridden label by label by the config's selectors."""
    labels = {**dict(spec.selectors), **config.selectors}
    return tuple(Matcher(label, "=", value) for label, value in sorted(labels.items()))


def source_matchers(source: Source) -> tuple[Matcher, ...]:
    """A source's own label matchers; alternatives become one regex ("" also matches an absent label)."""
    return tuple(Matcher(label, "=~", "|".join(re.escape(v) for v in value)) if isinstance(value, tuple)
                 else Matcher(label, "=", value) for label, value in source.match)


def model_group(spec: EngineSpec, config) -> tuple[str, ...]:
    """The labels a per-model result keeps: the fleet's grouping labels and the engine's model label."""
    return tuple(config.fleet.group_by) + (spec.model_label,)


class SignalsBase:
    """What raw and recorded signals share: the engine's facts (which roles, which latency is the headline)
    and the questions composed from primitive reads (latency vs baseline, divergence, preemption active).
    `Signals` answers the primitive reads from scraped series, `RecordedSignals` from recorded ones.

    `group` (every method's argument) is the labels a result keeps; None means per model
    (`model_group`), () one fleet-wide value, `instance_group` one value per replica.
    """

    def __init__(self, spec: EngineSpec, config, scope: tuple[Matcher, ...], window: str):
        self.spec = spec
        self.config = config
        self.scope = scope
        self.window = window
        self.model = model_group(spec, config)
        self.instance_group = self.model + (config.fleet.instance_label,)
        # one KV cache: the instance and its data-parallel rank, where the engine has one
        self.unit_group = self.instance_group + spec.ranks.unit

    @property
    def legend_labels(self) -> tuple[str, ...]:
        """Labels a per-model series is told apart by in a legend: the model first, then the fleet's groups."""
        return (self.spec.model_label,) + tuple(self.config.fleet.group_by)

    @property
    def raw(self) -> "Signals":
        """Signals over the raw series (for questions only raw series answer, such as per-instance ones)."""
        return Signals(self.spec, self.config, self.scope, self.window)

    def has_job_selector(self) -> bool:
        return any(m.label == "job" for m in self.scope)

    def sources(self, role: str) -> tuple[Source, ...]:
        """The role's sources, newest first; generic (unprefixed) names only under a job selector."""
        if not self.spec.has(role):
            raise LlmdashError(f"engine {self.spec.id} has no {role} signal")
        sources = tuple(s for s in self.spec.signal(role).sources if not s.metric.generic or self.has_job_selector())
        return sources

    def kv_usage(self, group=None) -> str:
        """The fullest instance counts: KV pressure is per engine, so take the max, never a sum."""
        return self.gauge(Role.KV_USAGE, group, "max")

    def waiting(self, group=None) -> str:
        return self.gauge(Role.WAITING, group)

    def running(self, group=None) -> str:
        return self.gauge(Role.RUNNING, group)

    def bucket(self, bound: float) -> Matcher:
        """The `le` matcher of one bucket bound (in the histogram's unit), as exported or as Prometheus 3 stores it."""
        return promql.bucket_matcher(self.spec.le(bound), bound)

    @property
    def preemption_is_counter(self) -> bool:
        return self.sources(Role.PREEMPTIONS)[0].kind == "counter"

    @property
    def finished_group(self) -> tuple[str, ...]:
        """The labels a KV-cache unit's finished requests are counted by: the unit's where every request counter
        carries its rank labels (vLLM's has `engine`), else the server's (SGLang's, counted by the tokenizer)."""
        if not self.spec.ranks.unit or self.raw.carries_units(Role.REQUESTS):
            return self.unit_group
        return self.instance_group

    def unit_share(self, preempted: str, finished: str, window: str) -> str:
        """Per KV-cache unit: `preempted` (per unit) per `finished` request (per `finished_group`), both rates over
        `window`, the finished requests clamped to at least `preemption.min_finished` over it, so a unit that keeps
        preempting while nothing completes reads a large share (and stays paged) instead of none, and a handful of
        finished requests cannot turn one preemption into a large share. Where requests are counted per server,
        a rank's are the server's over its number of ranks (requests spread evenly)."""
        floor = self.config.preemption.min_finished / seconds(window)
        if self.finished_group == self.unit_group:
            return f"({preempted}) / {promql.clamp_min(f'({finished}) or ({preempted}) * 0', floor)}"
        server = ", ".join(self._labels(self.instance_group))
        ranks = f"count by ({server}) ({preempted})"
        finished = f"({finished}) / on ({server}) ({ranks})"
        floored = promql.clamp_min(f"({finished}) or ({ranks}) * 0", floor)
        return f"({preempted}) / on ({server}) group_left () {floored}"

    def _labels(self, group: tuple[str, ...]) -> tuple[str, ...]:
        """`group` as the series read carry it (raw series: as scraped)."""
        return group

    @property
    def has_retracted_sides(self) -> bool:
        return self.spec.has(Role.RETRACTED_INPUT_TOKENS) and self.spec.has(Role.RETRACTED_OUTPUT_TOKENS)

    def scale(self, role: str) -> float:
        return UNIT_TO_SECONDS[self.sources(role)[0].metric.unit]

    def top_bound(self, role: str) -> float:
        """The highest finite bound a quantile reads, in seconds (the top common bound where releases disagree):
        no quantile can read above it."""
        common = self.common_bounds(role)
        if common is not None:
            return common[-1] * self.scale(role)
        return max(s.metric.buckets[-1] * self.scale(role) for s in self.sources(role))

    def common_bounds(self, role: str) -> tuple[float, ...] | None:
        """The bounds every covered release of every source of `role` exports, where their layouts differ (None
        where they agree). Summed per `le` over replicas with other bound sets, bucket counts are not monotonic and
        `histogram_quantile` pushes the tail to a bound only one layout has (vLLM's TTFT read 2560 s for 30 s)."""
        layouts = set()
        for source in self.sources(role):
            metric = source.metric
            layouts.add(metric.buckets)
            first = max(metric.since, self.spec.supported_from)
            layouts.update(bounds for until, bounds in metric.buckets_before if until > first)
        if len(layouts) < 2:
            return None
        return tuple(sorted(set.intersection(*(set(bounds) for bounds in layouts))))

    def layout_matchers(self, role: str) -> tuple[Matcher, ...]:
        """The `le` matcher of the common layout, where releases disagree; none where they agree."""
        common = self.common_bounds(role)
        if common is None:
            return ()
        return (promql.bucket_set_matcher([self.bucket(bound) for bound in common]),)

    @property
    def token_latency_role(self) -> str | None:
        """ITL where the engine has it, else per-request TPOT, else the mean time per token: the per-token
        latency it can show."""
        return next((role for role in TOKEN_LATENCY_ROLES if self.spec.has(role)), None)

    @property
    def latency_role(self) -> str:
        """The finest latency histogram the engine has (ITL, else per-request TPOT, else TTFT), else its mean
        time per token."""
        return next(role for role in LATENCY_ROLES if self.spec.has(role))

    @property
    def latency_roles(self) -> tuple[str, ...]:
        """The latency histograms the engine has."""
        return tuple(role for role in LATENCY_HISTOGRAM_ROLES if self.spec.has(role))

    @staticmethod
    def is_mean(role: str) -> bool:
        return role == Role.TOKEN_LATENCY_MEAN

    def latency(self, role: str, group=None, window=None) -> str:
        """A latency role's headline value in seconds: the headline quantile of a histogram, the mean of a mean role."""
        if self.is_mean(role):
            return self.mean_latency(group, window)
        return self.quantile(role, HEADLINE_QUANTILE, group, window)

    def slo_target(self, name: str) -> float | None:
        """SLO target in seconds: the config's, else the catalog default; None when neither applies."""
        configured = getattr(self.config.slo, name)
        target = configured if configured is not None else self.spec.slo_defaults.get(name)
        if target is None:
            return None
        role = Role.TTFT if name == "ttft_seconds" else self.token_latency_role
        for source in self.sources(role):
            problem = bound_problem(source.metric, target)
            if problem:
                raise LlmdashError(f"{self.config.source}: slo.{name}: {problem} ({self.spec.id}); "
                                   "pick a bound that every engine built has, or limit `engines:`")
        return target

    def latency_vs_baseline(self, group=None) -> str:
        d = self.config.divergence
        return promql.divide(self.latency(self.latency_role, group, d.window), self.latency_baseline(group))

    def throughput_vs_baseline(self, group=None) -> str:
        d = self.config.divergence
        return promql.divide(self.throughput(group, d.window), self.throughput_baseline(group))

    @property
    def latency_factor(self) -> float:
        """How far above its baseline the headline latency must rise: a mean rises less than a p99."""
        d = self.config.divergence
        return d.mean_latency_factor if self.is_mean(self.latency_role) else d.latency_factor

    def divergence_condition(self, group=None) -> str:
        """Headline latency (p99; the mean where the engine has no histogram) / baseline, per model, while it is
        >= its factor and output tok/s stays within the band of its own baseline and above the traffic floor (too
        few tokens make p99 noise)."""
        d = self.config.divergence
        latency_up = f"{self.latency_vs_baseline(group)} >= {self.latency_factor:g}"
        throughput_holds = f"abs({self.throughput_vs_baseline(group)} - 1) <= {d.throughput_band:g}"
        enough_traffic = f"{self.throughput(group, d.window)} >= {d.min_tokens_per_second:g}"
        return f"({latency_up}) and ({throughput_holds}) and ({enough_traffic})"

    def divergence(self, group=None) -> str:
        """1 per model while the divergence condition holds: the annotation's form."""
        return promql.as_flag(self.divergence_condition(group))

    def preemption_active(self, group=None) -> str:
        """1 per model while preemptions happen (rate over the preemption window, or paused > 0)."""
        return promql.as_flag(f"{self.preemption_rate(group, self.config.preemption.window)} > 0")

    @property
    def logs(self) -> "LogSignals":
        """The log-derived preemption count under this scope. mtail is its own scrape target: its series carry
        neither the model nor the engine's instance, so those matchers are dropped, and `logs.selectors`
        replace the top-level selectors (and variables) of the labels they name."""
        own = self.config.logs.selectors
        dropped = {self.spec.model_label, self.config.fleet.instance_label, *own}
        scope = tuple(Matcher(label, "=", value) for label, value in sorted(own.items()))
        return LogSignals(self.spec, self.config, scope + tuple(m for m in self.scope if m.label not in dropped),
                          self.window)


class Signals(SignalsBase):
    """PromQL for one engine under one scope over raw scraped series."""

    def _select(self, source: Source, series: str | None = None, extra: tuple[Matcher, ...] = ()) -> str:
        """The source's series under the scope, without a router's series of the same name (`EngineSpec.routers`)."""
        foreign = tuple(Matcher(label, "=", "") for label in self.spec.foreign_labels(source.metric.name))
        return promql.selector(series or source.series, source_matchers(source) + foreign + extra + self.scope)

    def _once_per_unit(self, source: Source, expr: str) -> str:
        """One value per KV-cache unit: the max over the rank labels whose series repeat a unit's numbers (SGLang's
        TP, PP and EP ranks), so a TP=8 server is not counted eight times and no unit is filtered out."""
        copies = [label for label in self.spec.ranks.copies if label in source.metric.labels]
        return f"max without ({', '.join(copies)}) ({expr})" if copies else expr

    def _per_series(self, role: str, per_source, reduce: str, group, extra: tuple[str, ...] = (),
                    once: bool = True, native=None, marks=None) -> str:
        """`reduce by (group)` of the role's sources, deduplicated per unit (unless `once` is False: presence
        needs no dedup), with fallbacks applied per replica (and rank): each replica read from the first source
        it exports, and from that source's classic series where it has them, else (`native(s)`, where native
        histograms are read, `Config.native_histograms`) from its native histogram (`promql.first_per_replica`).
        `marks(s)`: (classic, native) expressions with a series exactly for the replicas whose classic and native
        reads have one, narrower than the reads (a histogram's +Inf bucket instead of all of them); by default
        the reads themselves."""
        group = self.model if group is None else tuple(group)
        sources = self.sources(role)

        def leaf(s: Source, read) -> str:
            return self._once_per_unit(s, read(s)) if once else read(s)
        natives = [native if native is not None and self.reads_native(s) else None for s in sources]
        if len(sources) == 1 and natives[0] is None:
            return f"{reduce}{promql.by(extra + group)} ({leaf(sources[0], per_source)})"
        replica = tuple(dict.fromkeys(self.instance_group + tuple(
            label for label in group if label in self.spec.ranks.unit)))
        reads = []
        for s, alt in zip(sources, natives):
            forms = [(leaf(s, per_source), 0)] + ([(leaf(s, alt), 1)] if alt is not None else [])
            reads += [(expr, marks(s)[form] if marks else expr) for expr, form in forms]
        return promql.first_per_replica(reads, reduce, extra + group, replica)

    def reads_native(self, source: Source) -> bool:
        """Whether `source` is also read from its native histogram: a histogram (or a part of one) where the
        config reads native histograms."""
        return source.metric.type == "histogram" and self.config.native_histograms

    def _native_rate(self, source: Source, window: str) -> str:
        """The rate of the source's native histogram (its base name, without `_bucket`)."""
        return promql.rate(self._select(source, source.metric.name), window)

    def counter_rate(self, role: str, group=None, window: str | None = None, offset: str | None = None) -> str:
        """Per-second rate of a counter signal, summed per group (over the window ending `offset` ago)."""
        window = window or self.window
        return self._per_series(role, lambda s: promql.rate(self._select(s), window, offset), "sum", group,
                                native=lambda s: promql.native_part(s.part, promql.rate(
                                    self._select(s, s.metric.name), window, offset)))

    def throughput(self, group=None, window=None) -> str:
        return self.counter_rate(Role.THROUGHPUT, group, window)

    def requests(self, group=None, window=None) -> str:
        return self.counter_rate(Role.REQUESTS, group, window)

    def retracted_tokens(self, side: str, group=None, window=None) -> str:
        return self.counter_rate(f"retracted_{side}_tokens", group, window)

    def gauge(self, role: str, group=None, reduce: str = "sum") -> str:
        return self._per_series(role, self._select, reduce, group)

    def preemption_rate(self, group=None, window=None) -> str:
        """Preemptions/s from a counter; where the engine only has the paused-requests gauge, the most
        requests it showed in the window (it holds the latest iteration only, so an instant sample
        misses most pauses)."""
        if self.preemption_is_counter:
            return self.counter_rate(Role.PREEMPTIONS, group, window)
        window = window or self.window
        return self._per_series(Role.PREEMPTIONS, lambda s: f"max_over_time({self._select(s)}[{window}])", "sum", group)

    def preemption_share(self, group=None, window=None) -> str:
        """How much of its work an instance (or group) loses to preemption: preemptions per finished
        request from a counter; on a paused-requests gauge, the share of the window in which any
        request was paused (a blip is one sample, a collapse nearly all of them)."""
        window = window or self.window
        if self.preemption_is_counter:
            return promql.divide(self.preemption_rate(group, window), self.requests(group, window))
        return self._per_series(
            Role.PREEMPTIONS, lambda s: f"avg_over_time(({self._select(s)} > bool 0)[{window}:{PAUSED_RESOLUTION}])",
            "max", group)

    def carries_units(self, role: str) -> bool:
        """Whether every source of `role` carries the rank-unit labels (vLLM's request counter has `engine`;
        SGLang's, counted by the tokenizer, is per server)."""
        return all(set(self.spec.ranks.unit) <= set(s.metric.labels) for s in self.sources(role))

    def unit_preemption_share(self, window: str) -> str:
        """Per KV-cache unit (instance and data-parallel rank): preemptions per finished request over `window`
        (`unit_share`)."""
        return self.unit_share(self.preemption_rate(self.unit_group, window),
                               self.requests(self.finished_group, window), window)

    def preemptions_per_request(self, group=None) -> str:
        """Mean preemptions per finished request (the histogram's le="1" bucket mixes 0 and 1)."""
        total, count = (self._per_series(Role.PREEMPTIONS_PER_REQUEST, lambda s, part=part: promql.rate(
            self._select(s, f"{s.metric.name}_{part}"), self.window), "sum", group,
            native=lambda s, part=part: promql.native_part(part, self._native_rate(s, self.window)))
            for part in ("sum", "count"))
        return promql.divide(total, count)

    def bucket_rates(self, role: str, group=None, window=None) -> str:
        """`sum by (le, group)` of the role's bucket rates: what every quantile of it is computed from. Which
        replicas each form covers is told by one series per replica, the classic +Inf bucket and the native
        histogram's count, not by the 14-20 buckets again."""
        window = window or self.window
        layout = self.layout_matchers(role)
        bounds = self.common_bounds(role)

        def marks(s: Source) -> tuple[str, str]:
            every = promql.rate(self._select(s, f"{s.metric.name}_bucket", (promql.bucket_matcher("+Inf", math.inf),)),
                                window)
            return every, f"{promql.native_part('count', self._native_rate(s, window))} > 0"
        return self._per_series(role, lambda s: promql.rate(self._select(s, f"{s.metric.name}_bucket", layout), window),
                                "sum", group, extra=(BUCKET_LABEL,), native=lambda s: promql.native_buckets(
                                    self._native_rate(s, window), bounds or s.metric.buckets), marks=marks)

    def quantile(self, role: str, q: float = HEADLINE_QUANTILE, group=None, window=None) -> str:
        return promql.quantile(q, self.bucket_rates(role, group, window), self.scale(role))

    def share_above_top_bucket(self, role: str, group=None, window=None) -> str:
        """Share of observations above the highest finite bound, where a quantile would read the bound itself."""
        window = window or self.window
        bound = self.top_bound(role) / self.scale(role)
        within = self._at_or_under(role, lambda s: bound, window, group)
        return f"1 - {promql.divide(within, self._count_rate(role, group, window))}"

    def _at_or_under(self, role: str, bound_of, window: str, group) -> str:
        """Observations/s at or under each source's `bound_of(s)` (in its unit): the bucket of that bound, under
        either `le` text, or the native histogram's share up to it."""
        return self._per_series(
            role, lambda s: promql.rate(self._select(s, f"{s.metric.name}_bucket", (self.bucket(bound_of(s)),)),
                                        window), "sum", group,
            native=lambda s: promql.native_at_or_under(self._native_rate(s, window), bound_of(s)))

    def _count_rate(self, role: str, group=None, window=None) -> str:
        window = window or self.window
        return self._per_series(role, lambda s: promql.rate(self._select(s, f"{s.metric.name}_count"), window),
                                "sum", group,
                                native=lambda s: promql.native_part("count", self._native_rate(s, window)))

    def mean_latency_parts(self, group=None, window=None) -> tuple[str, str]:
        """(seconds/s, tokens/s) of the mean role, summed per group with fallbacks per replica."""
        window = window or self.window
        role = Role.TOKEN_LATENCY_MEAN
        seconds = self._per_series(role, lambda s: promql.rate(self._select(s), window), "sum", group)
        tokens = self._per_series(role, lambda s: promql.rate(self._select(s, s.per.name), window), "sum", group)
        scale = self.scale(role)
        return (seconds if scale == 1.0 else f"{seconds} * {scale:g}"), tokens

    def mean_latency(self, group=None, window=None) -> str:
        """Seconds per token over the requests that finished in the window: rate(seconds) / rate(tokens)."""
        return promql.divide(*self.mean_latency_parts(group, window))

    def slo_share(self, role: str, target_seconds: float, group=None) -> str:
        """Share of observations at or under the target, read from the target's own bucket."""
        bound = bucket_for(self.sources(role)[0].metric, target_seconds)
        good = self._at_or_under(role, lambda s: bound, self.window, group)
        return promql.divide(good, self._count_rate(role, group))

    def observation_rate(self, role: str, window: str, target_seconds: float | None = None, group=None) -> str:
        """Observations/s of a latency histogram per group (fallbacks per replica): all of them (`_count`), or,
        given a target, those at or under it, read from the bucket whose bound it is under either `le` text."""
        if target_seconds is None:
            return self._count_rate(role, group, window)
        return self._at_or_under(role, lambda s: bucket_for(s.metric, target_seconds), window, group)

    def target_bucket(self, source: Source, target_seconds: float) -> str:
        """The source's bucket whose bound is the target, under either `le` text."""
        le = self.bucket(bucket_for(source.metric, target_seconds))
        return self._select(source, f"{source.metric.name}_bucket", (le,))

    def increments(self, role: str, step: str, group=None, of=None, native=None) -> str:
        """What the role's counters (or `of(source)`'s series) gained since the previous evaluation `step` ago
        (`promql.increments`), summed per group with fallbacks per replica; `native(s)(h)`: the same number read from
        a replica's native histogram `h` of source `s` where it has no classic series."""
        def series(s: Source) -> str:
            return promql.increments(of(s) if of else self._select(s), step)
        return self._per_series(role, series, "sum", group, native=native and (
            lambda s: promql.increments(self._select(s, s.metric.name), step, native(s))))

    def measured_increments(self, role: str, step: str, target_seconds: float, group=None) -> tuple[str, str]:
        """(observations, those at or under the target) a latency histogram gained since the previous evaluation,
        per group, on the replicas that export the target's bucket only: a replica without it can say neither
        how many of its events were good nor, so, how many were bad, and is left out of both."""
        def count(s: Source) -> str:
            events = promql.increments(self._select(s, f"{s.metric.name}_count"), step)
            return f"{events} and ignoring ({BUCKET_LABEL}) {self.target_bucket(s, target_seconds)}"
        good = self.increments(role, step, group, lambda s: self.target_bucket(s, target_seconds),
                               native=lambda s: lambda h: promql.native_at_or_under(
                                   h, bucket_for(s.metric, target_seconds)))
        events = self._per_series(role, count, "sum", group, native=lambda s: promql.increments(
            self._select(s, s.metric.name), step, lambda h: promql.native_part("count", h)))
        return events, good

    def exporting(self, role: str, of=None) -> str:
        """1 per replica that exports some source of the role (`of(source)`'s series, given `of`, or else, for a
        histogram, its native histogram): what an SLO's coverage counts."""
        return self._per_series(role, of or self._select, "group", self.instance_group, once=False,
                                native=(lambda s: self._select(s, s.metric.name)) if of else None)

    def _baseline(self, expr: str) -> str:
        return promql.baseline(expr, self.config.divergence)

    def latency_baseline(self, group=None) -> str:
        return self._baseline(self.latency(self.latency_role, group, self.config.divergence.window))

    def throughput_baseline(self, group=None) -> str:
        """Output tok/s over the same offset window as the latency baseline: a load increase stays outside
        the band until both baselines have absorbed it."""
        return self._baseline(self.throughput(group, self.config.divergence.window))

    def exported(self, role: str, labels: tuple[str, ...]) -> str:
        """1 per value set of `labels` under which some source of `role` is exported."""
        return f"group{promql.by(labels)} ({promql.first_of([self._select(s) for s in self.sources(role)])})"

    def present(self, role: str, group=None) -> str:
        """1 per replica (or `group`, e.g. `unit_group`) that exports any source of `role` now (a histogram by its
        _count). An instant selector: a target that leaves service discovery (a pod autoscaling deleted) ends it
        at once with its staleness markers, where a rate over a window would still read its last samples."""
        def series(s: Source) -> str:
            return self._select(s, f"{s.metric.name}_count" if s.metric.type == "histogram" and not s.part else None)
        return self._per_series(role, series, "group", self.instance_group if group is None else group, once=False,
                                native=lambda s: self._select(s, s.metric.name))


class LogSignals:
    """Preemptions counted from the engine's log by the generated mtail program (`LOG_PREEMPTIONS`,
    labelled `llm_engine`). Per fleet group, or per mtail instance (one per engine replica)."""

    def __init__(self, spec: EngineSpec, config, scope: tuple[Matcher, ...], window: str):
        self.spec = spec
        self.config = config
        self.window = window
        self.scope = (Matcher(ENGINE_LABEL, "=", spec.id),) + scope
        self.group = tuple(config.fleet.group_by)
        self.instance_group = self.group + (config.fleet.instance_label,)

    def _select(self) -> str:
        return promql.selector(LOG_PREEMPTIONS, self.scope)

    def preemption_rate(self, group=None, window: str | None = None) -> str:
        """Preemptions/s from the log, summed per fleet group (or `group`)."""
        group = self.group if group is None else tuple(group)
        return f"sum{promql.by(group)} ({promql.rate(self._select(), window or self.window)})"

    def preemptions(self, group: tuple[str, ...], window: str) -> str:
        """Preemptions logged over `window`, summed per `group`."""
        return f"sum{promql.by(group)} (increase({self._select()}[{window}]))"

    def preemption_active(self) -> str:
        """1 per fleet group while the log reports preemptions (rate over the preemption window)."""
        return promql.as_flag(f"{self.preemption_rate(window=self.config.preemption.window)} > 0")
