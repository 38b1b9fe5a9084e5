"""The base emitter every engine's emitter derives from, and the fan-out that feeds several of them.

An emitter receives the simulator's engine-neutral events (`llmdash.lab.simulator.Recorder`) and turns
them into its engine's series, with the engine's own update semantics; an engine that exports no model
label gets it from the scrape target labels, as the user's relabeling would add it.
"""

from __future__ import annotations

from typing import Callable

from llmdash.engines.model import EngineSpec
from llmdash.lab.eras import NEW
from llmdash.lab.exposition import Registry
from llmdash.lab.simulator import RECOMPUTE, EngineState, Request

ADDED_LABEL_VALUE = "sim-0"   # the value of a variant's added labels


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


def finish_reason(req: Request) -> str:
    """One request in five runs into max_tokens; the rest stop on their own."""
    return "length" if req.rid % 5 == 0 else "stop"


def tpot(req: Request) -> float:
    """(last token - first token) / (output tokens - 1); 0 for one-token outputs (vLLM, TRT-LLM)."""
    return (req.last_token - req.first_token) / (req.out - 1) if req.out > 1 else 0.0


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
