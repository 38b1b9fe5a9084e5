"""Per-engine metric emitters: the simulator's events, exposed as each engine exposes them.

Every series an engine's catalog lists for its newest supported version is emitted with
that catalog's name, labels and buckets (the `new` name era; the `old` era exports, for every
signal with renamed sources, its oldest source instead: see `era_names`; an era that is a release
version, such as "0.4.3", exports exactly the series, labels and bucket bounds the catalog gives that
release: see `version_names`), and with the engine's own update semantics
(engines.md): vLLM counts tokens every step and observes ITL once per request per step;
SGLang's realtime counter moves per log tick, its generation counter at request finish,
its ITL observer divides an interval by the tokens it carried, and its retraction
counters repeat on every TP rank; TensorRT-LLM records per-request series at finish and
shows paused requests of the latest iteration; Triton keeps prometheus-cpp names; LMDeploy
latches its gauges every 10 s and has no preemption metric; the Dynamo frontend sees only the
stream (tokens per chunk, per-token ITL, requests counted when they end) and no KV or preemption;
TGI records every per-request series when a request succeeds; llama-server adds a request's generated tokens and
decode time when it finishes. An engine that exports no model
label gets it from the scrape target labels, as the user's relabeling would add it.

Two text forms: OpenMetrics with timestamps in seconds (for `promtool tsdb
create-blocks-from openmetrics`) and the Prometheus text format of a live /metrics.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Callable

from packaging.version import InvalidVersion, Version

from llmdash.engines.catalog import load_catalog
from llmdash.engines.model import EngineSpec, Metric
from llmdash.lab.simulator import RECOMPUTE, RETRACT, EngineState, Request

NEW, OLD = "new", "old"   # metric-name eras: the catalog's newest names, or each signal's oldest source
ERAS = (NEW, OLD)         # ... or a release version ("0.4.3"): what the catalog says that release exports
SGLANG_TP_SIZE = 2        # retraction counters appear once per TP rank
ADDED_LABEL_VALUE = "sim-0"   # the value of a variant's added labels
FINISH_REASONS = {
    "vllm": ("stop", "length", "abort", "error", "repetition"),
    "lmdeploy": ("stop", "length", "abort", "error", "cancel"),
    "tensorrt-llm-serve": ("stop", "length", "cancelled", "error"),
}


class Histogram:
    """Cumulative histogram with the engine's bounds; counts are kept per bucket."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float, n: int = 1) -> None:
        """n observations of the same value (le semantics: value <= bound)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += n
        self.total += value * n

    def observe_per_token(self, interval: float, new_tokens: int) -> None:
        """SGLang's ITL observer: interval/new_tokens, observed new_tokens times, sum += interval."""
        if new_tokens <= 0:
            return
        self.counts[bisect.bisect_left(self.bounds, interval / new_tokens)] += new_tokens
        self.total += interval

    def cumulative(self) -> list[int]:
        out, acc = [], 0
        for c in self.counts:
            acc += c
            out.append(acc)
        return out


class Cell:
    """One counter or gauge series."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0


def _labels(pairs: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in pairs.items())


@dataclass
class _Series:
    metric: Metric
    labels: str
    cell: Cell | Histogram


def era_names(spec: EngineSpec, era: str) -> dict[str, str | None]:
    """Emitted name -> the name it is exported under in `era`, None when that era does not export it.

    `old` mimics a replica before the renames: for every signal whose sources (newest first) have
    fallbacks, the newer sources give way to the oldest one. A newer source with the oldest one's type
    and labels is the same series renamed (vLLM's ITL, KV usage); any other (SGLang's realtime
    counter) is simply absent, since the emitter already exports the oldest source itself.
    """
    if era not in ERAS:
        raise ValueError(f"unknown metric-name era {era!r} (known: {', '.join(ERAS)})")
    names: dict[str, str | None] = {}
    if era == OLD:
        for signal in spec.signals.values():
            oldest = signal.sources[-1].metric if signal.sources else None
            for source in signal.sources[:-1]:
                same = (source.metric.type, source.metric.labels) == (oldest.type, oldest.labels)
                names[source.metric.name] = oldest.name if same else None
    return names


def version_names(spec: EngineSpec, version: Version) -> dict[str, str | None]:
    """Emitted name -> the name `version` exports it under, None when that release does not export it.

    A source the release does not export gives way to the next fallback of its signal that the release
    does export, when that one has the same type and labels (the same series under an older name);
    otherwise it is absent, as in the `old` era.
    """
    names: dict[str, str | None] = {}
    for signal in spec.signals.values():
        for i, source in enumerate(signal.sources):
            if source.metric.exposed_in(version, version):
                continue
            fallback = next((s.metric for s in signal.sources[i + 1:] if s.metric.exposed_in(version, version)), None)
            same = fallback is not None and (source.metric.type, source.metric.labels) == (fallback.type, fallback.labels)
            names[source.metric.name] = fallback.name if same else None
    return names


def era_version(spec: EngineSpec, era: str) -> Version:
    """The release whose labels and bucket bounds an era exports: the newest for the name eras."""
    if era in ERAS:
        return spec.supported_to
    try:
        return Version(era)
    except InvalidVersion:
        raise ValueError(f"unknown metric-name era {era!r} (known: {', '.join(ERAS)}, or a release version)") from None


def stand_ins(spec: EngineSpec) -> dict[str, str]:
    """For a variant: each base series it does not export -> its own series standing in for it, the
    newest later source of the same base signal with the same type and labels (NIM, re-exporting
    vLLM releases before `inter_token_latency_seconds`, carries those samples as the older
    `time_per_output_token_seconds`, as vLLM itself did)."""
    if spec.base is None:
        return {}
    base = load_catalog(spec.path.parent / f"{spec.base}.yaml")
    out = {}
    for signal in base.signals.values():
        for i, source in enumerate(signal.sources):
            missing = source.metric
            if spec.exported_name(missing.name) is not None:
                continue
            for later in signal.sources[i + 1:]:
                standing = spec.exported_name(later.metric.name)
                if standing and (later.metric.type, later.metric.labels) == (missing.type, missing.labels):
                    out[missing.name] = standing
                    break
    return out


class Registry:
    """The series of one engine process; labels are checked against the catalog."""

    def __init__(self, spec: EngineSpec, constant: dict[str, str], era: str = NEW):
        self.spec = spec
        self.constant = constant
        self.series: list[_Series] = []
        self._head_cache: dict[tuple[int, str], tuple[str, ...]] = {}
        self.version = era_version(spec, era)
        self.metrics = {m.name: m for m in spec.metrics.values() if m.exposed_in(self.version, self.version)}
        self.renamed = era_names(spec, era) if era in ERAS else version_names(spec, self.version)
        self.stand_ins = stand_ins(spec)

    def _exported(self, name: str) -> Metric | None:
        """The catalog metric `name` is exported as in this registry's era (None: not exported).

        A variant's emitter is its base engine's, so `name` is the base's name, translated here.
        """
        if self.spec.base is not None:
            name = self.spec.exported_name(name) or self.stand_ins.get(name)
            if name is None or name not in self.metrics:
                return None
        if name in self.renamed:
            target = self.renamed[name]
            return self.spec.metrics[target] if target else None
        return self.metrics.get(name)

    def _add(self, name: str, labels: dict[str, str], cell):
        metric = self._exported(name)
        if metric is None:
            return cell             # still counted by the emitter, never rendered
        values = {**self.constant, **labels}
        exported = metric.labels_at(self.version)
        missing = [label for label in exported if label not in values]
        if missing:
            raise ValueError(f"{name}: no value for labels {missing}")
        self.series.append(_Series(metric, _labels({k: values[k] for k in exported}), cell))
        return cell

    def cell(self, name: str, **labels: str) -> Cell:
        return self._add(name, labels, Cell())

    def histogram(self, name: str, bounds: tuple[float, ...] | None = None, **labels: str) -> Histogram:
        """`bounds` for a histogram whose buckets the deployment sets (the catalog then lists none)."""
        metric = self._exported(name) or self.spec.metrics.get(name)
        buckets = metric.buckets_at(self.version) if metric else None
        return self._add(name, labels, Histogram(bounds or buckets or ()))

    def render(self, extra: str, timestamp: float | None, declared: set[str] | None = None) -> list[str]:
        """Sample lines; `extra` holds scrape labels (job, instance) for backfill.

        With a timestamp the lines are OpenMetrics (TYPE names without _total); without one
        they are the Prometheus text format a live /metrics serves. `declared` remembers
        which families already had their TYPE line in a long backfill file.
        """
        ts = "" if timestamp is None else f" {timestamp:.3f}"
        out: list[str] = []
        seen = set() if declared is None else declared
        for s in self.series:
            m = s.metric
            if m.name not in seen:
                seen.add(m.name)
                family = m.name
                if timestamp is not None and m.type == "counter" and family.endswith("_total"):
                    family = family[: -len("_total")]
                out.append(f"# HELP {family} {m.help}")
                out.append(f"# TYPE {family} {m.type}")
            heads = self._heads(s, extra)
            if m.type == "histogram":
                cum = s.cell.cumulative()
                for head, count in zip(heads, cum):
                    out.append(f"{head} {count}{ts}")
                out.append(f"{heads[-2]} {cum[-1]}{ts}")
                out.append(f"{heads[-1]} {s.cell.total:.6f}{ts}")
            else:
                out.append(f"{heads[0]} {_num(s.cell.value)}{ts}")
        return out

    def _heads(self, s: _Series, extra: str) -> tuple[str, ...]:
        """A series' sample names with their labels (for a histogram: each bucket, +Inf, _count, _sum),
        written once per scrape-label set: a long backfill renders them at every scrape."""
        key = (id(s), extra)
        if key not in self._head_cache:
            m, labels = s.metric, ",".join(x for x in (s.labels, extra) if x)
            if m.type == "histogram":
                sep = "," if labels else ""
                les = [self.spec.le(bound) for bound in s.cell.bounds] + ["+Inf"]
                self._head_cache[key] = (*(f'{m.name}_bucket{{{labels}{sep}le="{le}"}}' for le in les),
                                         f"{m.name}_count{{{labels}}}", f"{m.name}_sum{{{labels}}}")
            else:
                self._head_cache[key] = (f"{m.name}{{{labels}}}",)
        return self._head_cache[key]


def live_text(emitters: list["EngineMetrics"], extras: list[str] | None = None) -> str:
    """Prometheus text format for one /metrics holding several processes' series; `extras[i]`
    are labels emitter i's series carry to tell its replica apart.

    Each family appears once, with one HELP/TYPE header and all its samples together,
    as the text parser expects.
    """
    families: dict[str, list[str]] = {}
    for emitter, extra in zip(emitters, extras or [""] * len(emitters)):
        current: list[str] = []
        for line in emitter.render(extra):
            if line.startswith("# HELP "):
                name = line.split(" ", 3)[2]
                current = families.setdefault(name, [])
                if not current:
                    current.append(line)
                    continue
                current = families[name]
            elif line.startswith("# TYPE "):
                if len(current) == 1:
                    current.append(line)
            else:
                current.append(line)
    return "".join(line + "\n" for lines in families.values() for line in lines)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


class EngineMetrics:
    """Base emitter: receives simulator events; subclasses map them to their engine's series."""

    engine = ""
    preemption = RECOMPUTE

    def __init__(self, spec: EngineSpec, model: str, state: Callable[[], EngineState], era: str = NEW,
                 target: str = ""):
        self.spec = spec
        self.model = model
        self.state = state
        self.target = target        # the scrape target's labels (job, instance, ...) for backfill
        # a variant's exporter adds labels of its own (Ray's WorkerId, ...): one fixed value per process
        added = {label: ADDED_LABEL_VALUE for label in spec.added_labels}
        self.reg = Registry(spec, {**added, **self.constant_labels()}, era)
        self.build()

    def constant_labels(self) -> dict[str, str]:
        return {self.spec.model_label: self.model}

    def build(self) -> None:
        raise NotImplementedError

    # Recorder interface: default no-ops, subclasses override what their engine records.
    def on_step(self, now, dt, decode_tokens, prefill_tokens, preempted) -> None: ...
    def on_token_gap(self, gap_s, count, tokens) -> None: ...
    def on_prefill_done(self, req: Request, now) -> None: ...
    def on_first_token(self, req: Request, now) -> None: ...
    def on_preempt(self, req: Request, now) -> None: ...
    def on_finish(self, req: Request, now) -> None: ...
    def on_log_tick(self, now) -> None: ...

    def gauges(self, state: EngineState) -> None:
        """Copy engine state into gauge cells."""

    def scrape(self, now: float) -> None:
        """Refresh gauges at scrape time (engines that latch them override this)."""
        self.gauges(self.state())

    def render(self, extra: str = "", timestamp: float | None = None,
               declared: set[str] | None = None) -> list[str]:
        if self.spec.model_label_from_scrape:
            # the engine exports no model label: the user's scrape relabeling adds it, as done here
            extra = ",".join(x for x in (f'{self.spec.model_label}="{self.model}"', extra) if x)
        return self.reg.render(extra, timestamp, declared)


def _finish_reason(req: Request) -> str:
    """One request in five runs into max_tokens; the rest stop on their own."""
    return "length" if req.rid % 5 == 0 else "stop"


def _tpot(req: Request) -> float:
    """(last token - first token) / (output tokens - 1); 0 for one-token outputs (vLLM, TRT-LLM)."""
    return (req.last_token - req.first_token) / (req.out - 1) if req.out > 1 else 0.0


class VllmMetrics(EngineMetrics):
    engine = "vllm"

    def constant_labels(self):
        return {"model_name": self.model, "engine": "0"}

    def build(self):
        r = self.reg
        self.generation = r.cell("vllm:generation_tokens_total")
        self.success = {reason: r.cell("vllm:request_success_total", finished_reason=reason)
                        for reason in FINISH_REASONS["vllm"]}
        self.ttft = r.histogram("vllm:time_to_first_token_seconds")
        self.itl = r.histogram("vllm:inter_token_latency_seconds")
        self.tpot = r.histogram("vllm:request_time_per_output_token_seconds")
        self.preemptions = r.cell("vllm:num_preemptions_total")
        self.per_request = r.histogram("vllm:request_num_preemptions")
        self.kv = r.cell("vllm:kv_cache_usage_perc")
        self.waiting = r.cell("vllm:num_requests_waiting")
        self.running = r.cell("vllm:num_requests_running")

    def on_step(self, now, dt, decode_tokens, prefill_tokens, preempted):
        self.generation.value += decode_tokens          # per step, first tokens included

    def on_token_gap(self, gap_s, count, tokens):
        self.itl.observe(gap_s, count)                   # one per request per step, undivided

    def on_first_token(self, req, now):
        self.ttft.observe(now - req.arrival)

    def on_preempt(self, req, now):
        self.preemptions.value += 1                      # per event

    def on_finish(self, req, now):
        self.success[_finish_reason(req)].value += 1
        self.tpot.observe(_tpot(req))
        self.per_request.observe(req.num_preemptions)

    def gauges(self, s):
        self.kv.value = s.kv_used_blocks / s.kv_blocks
        self.waiting.value = s.waiting
        self.running.value = s.running


class SglangMetrics(EngineMetrics):
    engine = "sglang"
    preemption = RETRACT

    def constant_labels(self):
        return {"model_name": self.model, "engine_type": "unified", "pp_rank": "0", "moe_ep_rank": "0",
                "tp_rank": "0", "is_streaming": "true"}

    def build(self):
        r = self.reg
        self.realtime = {mode: r.cell("sglang:realtime_tokens_total", mode=mode)
                         for mode in ("prefill_compute", "prefill_cache", "decode")}
        self.generation = r.cell("sglang:generation_tokens_total")
        self.finished = r.cell("sglang:num_requests_total")
        self.ttft = r.histogram("sglang:time_to_first_token_seconds")
        self.e2e = r.histogram("sglang:e2e_request_latency_seconds")
        self.itl = r.histogram("sglang:inter_token_latency_seconds")
        self.tpot = r.histogram("sglang:request_time_per_output_token_seconds")
        ranks = [str(rank) for rank in range(SGLANG_TP_SIZE)]
        self.retracted = [r.cell("sglang:num_retracted_requests_total", tp_rank=k) for k in ranks]
        self.retracted_in = [r.cell("sglang:num_retracted_input_tokens_total", tp_rank=k) for k in ranks]
        self.retracted_out = [r.cell("sglang:num_retracted_output_tokens_total", tp_rank=k) for k in ranks]
        self.usage = r.cell("sglang:token_usage")
        self.queue = r.cell("sglang:num_queue_reqs")
        self.running = r.cell("sglang:num_running_reqs")
        self._pending_decode = 0
        self._pending_prefill = 0

    def on_step(self, now, dt, decode_tokens, prefill_tokens, preempted):
        self._pending_decode += decode_tokens
        self._pending_prefill += prefill_tokens

    def on_log_tick(self, now):
        """log_stats writes the realtime counter once per decode log interval."""
        self.realtime["decode"].value += self._pending_decode
        self.realtime["prefill_compute"].value += self._pending_prefill
        self._pending_decode = self._pending_prefill = 0

    def on_token_gap(self, gap_s, count, tokens):
        # `count` requests each received tokens/count new tokens after the same interval: batched,
        # that is interval/(tokens/count) observed `tokens` times, with each interval summed once
        self.itl.observe_per_token(gap_s * count, tokens)

    def on_first_token(self, req, now):
        self.ttft.observe(now - req.arrival)

    def on_preempt(self, req, now):
        for rank in range(SGLANG_TP_SIZE):               # every TP rank increments its own series
            self.retracted[rank].value += 1
            self.retracted_in[rank].value += req.prompt
            self.retracted_out[rank].value += req.out

    def on_finish(self, req, now):
        self.generation.value += req.out                 # at finish: bursty, lags real time
        self.finished.value += 1
        self.e2e.observe(now - req.arrival)              # in the same call as the request counter
        if req.out > 1:
            self.tpot.observe((req.last_token - req.first_token) / (req.out - 1))

    def gauges(self, s):
        self.usage.value = s.kv_used_blocks / s.kv_blocks
        self.queue.value = s.waiting
        self.running.value = s.running


class TrtllmServeMetrics(EngineMetrics):
    """trtllm-serve 1.3+ with MAX_UTILIZATION (the only capacity policy that pauses)."""

    engine = "tensorrt-llm-serve"

    def constant_labels(self):
        return {"model_name": self.model, "engine_type": "pytorch"}

    def build(self):
        r = self.reg
        self.generation = r.cell("trtllm_generation_tokens_total")
        self.success = {reason: r.cell("trtllm_request_success_total", finished_reason=reason)
                        for reason in FINISH_REASONS["tensorrt-llm-serve"]}
        self.ttft = r.histogram("trtllm_time_to_first_token_seconds")
        self.tpot = r.histogram("trtllm_time_per_output_token_seconds")
        self.paused = r.cell("trtllm_num_paused_requests")
        self.kv = r.cell("trtllm_kv_cache_utilization")
        self.waiting = r.cell("trtllm_num_requests_waiting")
        self.running = r.cell("trtllm_num_requests_running")

    def on_finish(self, req, now):
        """Every per-request series is recorded when the request finishes."""
        self.generation.value += req.out
        self.success[_finish_reason(req)].value += 1
        self.ttft.observe(req.first_token - req.arrival)
        self.tpot.observe(_tpot(req))

    def gauges(self, s):
        self.paused.value = s.paused_last_step           # the latest iteration only
        self.kv.value = s.kv_used_blocks / s.kv_blocks
        self.waiting.value = s.waiting
        self.running.value = s.running


class TritonMetrics(EngineMetrics):
    engine = "tensorrt-llm-triton"

    def constant_labels(self):
        return {"model": self.model, "version": "1"}

    def build(self):
        r = self.reg
        self.output_len = r.histogram("nv_llm_output_token_len", response_metric_type="total_output_tokens")
        self.success = r.cell("nv_inference_request_success")
        self.first_response = r.histogram("nv_inference_first_response_histogram_ms")
        self.batcher = {k: r.cell("nv_trt_llm_inflight_batcher_metrics", inflight_batcher_specific_metric=k)
                        for k in ("paused_requests", "generation_requests", "total_context_tokens",
                                  "micro_batch_id")}
        self.blocks = {k: r.cell("nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type=k)
                       for k in ("max", "free", "used", "tokens_per", "fraction")}
        self.requests = {k: r.cell("nv_trt_llm_request_metrics", request_type=k)
                         for k in ("active", "max", "scheduled", "context", "waiting")}

    def on_first_token(self, req, now):
        self.first_response.observe((now - req.arrival) * 1000.0)

    def on_finish(self, req, now):
        self.output_len.observe(req.out)
        self.success.value += 1

    def gauges(self, s):
        self.batcher["paused_requests"].value = s.paused_last_step
        self.batcher["generation_requests"].value = s.running
        self.blocks["max"].value = s.kv_blocks
        self.blocks["used"].value = s.kv_used_blocks
        self.blocks["free"].value = s.kv_blocks - s.kv_used_blocks
        self.blocks["tokens_per"].value = s.block_size
        self.blocks["fraction"].value = s.kv_used_blocks / s.kv_blocks
        self.requests["active"].value = s.running + s.waiting
        self.requests["scheduled"].value = s.running
        self.requests["waiting"].value = s.waiting
        self.requests["max"].value = s.max_running


class LmdeployMetrics(EngineMetrics):
    engine = "lmdeploy"
    gauge_refresh_s = 10.0        # the scheduler gauges are refreshed every 10 s, not at scrape

    def constant_labels(self):
        return {"model_name": self.model, "engine": "0"}

    def build(self):
        r = self.reg
        self.generation = r.cell("lmdeploy:generation_tokens_total")
        self.success = {reason: r.cell("lmdeploy:request_success_total", finished_reason=reason)
                        for reason in FINISH_REASONS["lmdeploy"]}
        self.ttft = r.histogram("lmdeploy:time_to_first_token_seconds")
        self.itl = r.histogram("lmdeploy:iter_token_latency")
        self.tpot = r.histogram("lmdeploy:time_per_output_token_seconds")
        self.kv = r.cell("lmdeploy:gpu_cache_usage_perc")
        self.waiting = r.cell("lmdeploy:num_requests_waiting")
        self.running = r.cell("lmdeploy:num_requests_running")
        self._tick = -1.0

    def on_step(self, now, dt, decode_tokens, prefill_tokens, preempted):
        self.generation.value += decode_tokens           # per output event
        tick = now // self.gauge_refresh_s
        if tick != self._tick:
            self._tick = tick
            self.gauges(self.state())

    def scrape(self, now):
        """A scrape reads the values of the latest 10 s refresh."""

    def on_token_gap(self, gap_s, count, tokens):
        self.itl.observe(gap_s, count)                   # gap between successive outputs
        self.tpot.observe(gap_s * count / tokens, count)  # that gap / tokens in the output

    def on_first_token(self, req, now):
        self.ttft.observe(now - req.arrival)

    def on_finish(self, req, now):
        self.success[_finish_reason(req)].value += 1

    def gauges(self, s):
        self.kv.value = s.kv_used_blocks / s.kv_blocks
        self.waiting.value = s.waiting
        self.running.value = s.running


class DynamoMetrics(EngineMetrics):
    """The Dynamo HTTP frontend in front of a worker: it sees the response stream, not the engine.

    A worker's preemption reaches it only as a long gap between chunks; its gauges count requests
    from handler entry (queued: until the first token, prefill included; in flight: until the end).
    """

    engine = "dynamo"

    def constant_labels(self):
        return {"model": self.model}

    def build(self):
        r = self.reg
        self.output_tokens = r.cell("dynamo_frontend_output_tokens_total")
        self.ended = r.cell("dynamo_frontend_requests_total", endpoint="chat_completions", request_type="stream",
                            status="success", error_type="")
        self.ttft = r.histogram("dynamo_frontend_time_to_first_token_seconds")
        self.itl = r.histogram("dynamo_frontend_inter_token_latency_seconds")
        self.queued = r.cell("dynamo_frontend_queued_requests")
        self.inflight = r.cell("dynamo_frontend_inflight_requests")
        self._streaming = 0       # requests past their first token and not yet ended

    def on_step(self, now, dt, decode_tokens, prefill_tokens, preempted):
        self.output_tokens.value += decode_tokens        # per chunk as it streams, first tokens included

    def on_token_gap(self, gap_s, count, tokens):
        # `count` requests each got a chunk after `gap_s`: gap / chunk tokens, observed once per token
        self.itl.observe_per_token(gap_s * count, tokens)

    def on_first_token(self, req, now):
        self.ttft.observe(now - req.arrival)
        self._streaming += 1

    def on_finish(self, req, now):
        self.ended.value += 1                            # once per request, when its response ends
        self._streaming -= 1

    def gauges(self, s):
        self.inflight.value = s.running + s.waiting
        self.queued.value = s.running + s.waiting - self._streaming


class TgiMetrics(EngineMetrics):
    """TGI's router: every per-request series is recorded when a request succeeds, nothing while it runs.

    The simulation underneath evicts under KV pressure (recompute), which TGI's reserve-at-admission
    queue never does; the series here follow TGI's update rules, not its scheduler.
    """

    engine = "tgi"
    max_total_tokens = 2048       # --max-total-tokens: sets the generated-tokens buckets

    def constant_labels(self):
        return {}

    def build(self):
        r = self.reg
        step = self.max_total_tokens / 100
        self.success = r.cell("tgi_request_success")
        self.generated = r.histogram("tgi_request_generated_tokens", tuple(step * (i + 1) for i in range(100)))
        self.time_per_token = r.histogram("tgi_request_mean_time_per_token_duration")
        self.duration = r.histogram("tgi_request_duration")
        self.queue_time = r.histogram("tgi_request_queue_duration")
        self.queue = r.cell("tgi_queue_size")
        self.batch = r.cell("tgi_batch_current_size")

    def on_finish(self, req, now):
        inference = now - req.first_scheduled              # batch start to the response
        self.success.value += 1
        self.generated.observe(req.out)
        self.time_per_token.observe(inference / req.out if req.out else 0.0)
        self.duration.observe(now - req.arrival)
        self.queue_time.observe(req.first_scheduled - req.arrival)

    def gauges(self, s):
        self.queue.value = s.waiting
        self.batch.value = s.running


class LlamaCppMetrics(EngineMetrics):
    """llama-server: token and time counters move when a slot's prompt is done (prompt) or its request
    finishes (generation); no labels (the model label comes from the scrape); gauges read at /metrics time.

    The simulation underneath evicts under KV pressure (recompute), which llama-server's slots never do; the
    eviction's wait lands between a request's first and last token, as a long stall would.
    """

    engine = "llama-cpp"

    def constant_labels(self):
        return {}

    def build(self):
        r = self.reg
        self.predicted = r.cell("llamacpp:tokens_predicted_total")
        self.predicted_seconds = r.cell("llamacpp:tokens_predicted_seconds_total")
        self.prompt = r.cell("llamacpp:prompt_tokens_total")
        self.prompt_seconds = r.cell("llamacpp:prompt_seconds_total")
        self.deferred = r.cell("llamacpp:requests_deferred")
        self.processing = r.cell("llamacpp:requests_processing")

    def on_prefill_done(self, req, now):
        """on_prompt_eval: the prompt's tokens and its processing time, once the prompt is done."""
        self.prompt.value += req.prompt
        self.prompt_seconds.value += now - req.first_scheduled

    def on_finish(self, req, now):
        """on_prediction: n_decoded and t_token_generation (first to last generated token) at finish."""
        self.predicted.value += req.out
        self.predicted_seconds.value += req.last_token - req.first_token if req.first_token is not None else 0.0

    def gauges(self, s):
        self.deferred.value = s.waiting
        self.processing.value = s.running


EMITTERS: dict[str, type[EngineMetrics]] = {
    cls.engine: cls for cls in (VllmMetrics, SglangMetrics, TrtllmServeMetrics, TritonMetrics, LmdeployMetrics,
                                DynamoMetrics, TgiMetrics, LlamaCppMetrics)
}


def emitter_class(spec: EngineSpec) -> type[EngineMetrics] | None:
    """The emitter of an engine, or of the engine a variant derives from (same events, renamed series)."""
    return EMITTERS.get(spec.id) or EMITTERS.get(spec.base or "")


def simulated_engines(specs: dict[str, EngineSpec]) -> list[str]:
    """The engines among `specs` the simulator can emit, sorted."""
    return sorted(engine for engine, spec in specs.items() if emitter_class(spec))


class Fanout:
    """Passes one simulator's events to several engines' emitters (same serving flavour)."""

    def __init__(self, emitters: list[EngineMetrics]):
        self.emitters = emitters

    def __getattr__(self, event: str):
        # skip emitters that ignore the event: most events happen every engine step
        handlers = [getattr(e, event) for e in self.emitters
                    if getattr(type(e), event) is not getattr(EngineMetrics, event)]
        if len(handlers) == 1:
            setattr(self, event, handlers[0])
            return handlers[0]

        def call(*args):
            for handler in handlers:
                handler(*args)
        setattr(self, event, call)
        return call
