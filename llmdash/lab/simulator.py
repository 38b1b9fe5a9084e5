"""A small, deterministic model of one LLM serving engine instance.

Why it exists: dashboards and annotations are only trustworthy if their queries
catch a KV-cache collapse on data that behaves like an engine. This model keeps
the mechanics that matter for that and nothing else:

- continuous batching: every step runs all decoding sequences plus chunked
  prefill under a token budget, with a cap on running sequences;
- a paged KV cache: a fixed number of blocks of ``block_size`` tokens, one more
  block whenever a sequence's last block is full;
- a step time that grows with the new tokens in the step (compute) and with the
  context tokens the step attends to (KV reads);
- preemption when blocks run out. ``recompute`` (vLLM V1, TensorRT-LLM
  MAX_UTILIZATION, LMDeploy): the victim is the last scheduled sequence, its
  computed tokens reset to 0, it goes to the *front* of the waiting queue and
  its prompt and generated tokens are prefilled again. ``retract`` (SGLang):
  victims are the sequences with most output and shortest input, they keep
  their generated tokens, are *appended* to the queue, and their KV is not
  offered back as a reusable prefix (this model has no prefix cache at all).

Engine-specific metric semantics live in :mod:`llmdash.lab.emitters`; the model
reports engine-neutral events to a :class:`Recorder`.

Cost is O(1) per step plus O(1) per request event: decoding sequences are kept
as offsets from a global decode-step counter, grouped by block residue.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass
from typing import Callable, Protocol

RECOMPUTE = "recompute"
RETRACT = "retract"


@dataclass(frozen=True)
class ServingConfig:
    """Capacity and speed of one engine instance (defaults: a mid-size model on one GPU)."""

    kv_blocks: int = 4000             # paged KV budget: 64k tokens in blocks of 16
    block_size: int = 16
    max_running: int = 64             # max_num_seqs / max_running_requests
    max_batched_tokens: int = 2048    # chunked-prefill token budget per step
    step_base_s: float = 0.02         # weights read + launch overhead per step
    step_per_new_token_s: float = 0.00004   # compute per token processed in the step
    step_per_context_token_s: float = 1.2e-7  # KV read per context token attended
    preemption: str = RECOMPUTE       # RECOMPUTE or RETRACT
    log_interval_steps: int = 40      # SGLang decode log tick


@dataclass(frozen=True)
class Load:
    """Offered traffic at one instant: arrival rate and mean lengths."""

    rate_rps: float
    prompt_tokens: int
    output_tokens: int


class Recorder(Protocol):
    """Receives engine-neutral events; an engine's exposition decides what each one means."""

    def on_step(self, now: float, dt: float, decode_tokens: int, prefill_tokens: int,
                preempted: int) -> None: ...

    def on_token_gap(self, gap_s: float, count: int, tokens: int) -> None: ...

    def on_prefill_done(self, req: "Request", now: float) -> None: ...

    def on_first_token(self, req: "Request", now: float) -> None: ...

    def on_preempt(self, req: "Request", now: float) -> None: ...

    def on_finish(self, req: "Request", now: float) -> None: ...

    def on_log_tick(self, now: float) -> None: ...


@dataclass(eq=False)
class Request:
    rid: int
    arrival: float
    prompt: int
    target: int                  # output tokens this request will generate
    out: int = 0                 # generated tokens (kept across retraction only)
    computed: int = 0            # tokens with KV in cache (prefill progress)
    blocks: int = 0
    first_scheduled: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    num_preemptions: int = 0
    prompt_counted: bool = False
    # decoding bookkeeping (valid while decoding): ctx = off + D, out = out_off + D
    decoding: bool = False
    off: int = 0
    out_off: int = 0
    epoch: int = 0               # invalidates stale finish-heap entries

    def prefill_target(self) -> int:
        """Tokens to prefill: the prompt, plus generated tokens after a preemption."""
        return self.prompt + self.out


@dataclass
class EngineState:
    """What the engine's gauges read: the state after the latest step."""

    running: int = 0
    waiting: int = 0
    kv_used_blocks: int = 0
    kv_blocks: int = 1
    paused_last_step: int = 0
    block_size: int = 16
    max_running: int = 64


class ServingSimulator:
    """One engine instance serving one model; advance it with :meth:`run_until`."""

    def __init__(self, config: ServingConfig, load: Callable[[float], Load], seed: int,
                 recorder: Recorder, start: float = 0.0):
        self.cfg = config
        self.load = load
        self.rng = random.Random(seed)
        self.rec = recorder
        self.now = start
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.prefilling: list[Request] = []
        self.free_blocks = config.kv_blocks
        self.decode_steps = 0          # D: global decode-step counter
        self.n_decode = 0
        self.off_sum = 0               # sum of decoders' offsets (ctx sum = off_sum + n*D)
        self.residue = [0] * config.block_size
        self.finish_heap: list[tuple[int, int, int, Request]] = []
        self.state = EngineState(kv_blocks=config.kv_blocks, block_size=config.block_size,
                                 max_running=config.max_running)
        self._reserved = 0             # blocks promised to decoders in the current step
        self._horizon = start
        self._next_rid = 0
        self._steps_since_tick = 0
        self.first_preemption_at: float | None = None   # a collapse's ground-truth onset, exported or not
        self._next_arrival, self._arrival_is_request = self._draw_arrival(start)

    # -- traffic ---------------------------------------------------------------------------
    def _draw_arrival(self, t: float) -> tuple[float, bool]:
        """Next Poisson arrival after t, drawn one second at a time so the rate may change.

        Returns (time, True) for an arrival, or (t + 1, False) for a re-check when no
        arrival falls in the next second (a zero rate means no traffic for now).
        """
        rate = self.load(t).rate_rps
        if rate > 0:
            gap = self.rng.expovariate(rate)
            if gap <= 1.0:
                return t + gap, True
        return t + 1.0, False

    def _admit_arrivals(self) -> None:
        while self._next_arrival <= self.now:
            t = self._next_arrival
            if self._arrival_is_request:
                ld = self.load(t)
                # a single request never exceeds a quarter of the KV budget, so it can always run alone
                cap = self.cfg.kv_blocks * self.cfg.block_size // 4
                prompt = min(cap, max(1, int(ld.prompt_tokens * self.rng.uniform(0.5, 1.5))))
                target = min(cap, max(1, int(ld.output_tokens * self.rng.uniform(0.5, 1.5))))
                self.waiting.append(Request(self._next_rid, t, prompt, target))
                self._next_rid += 1
            self._next_arrival, self._arrival_is_request = self._draw_arrival(t)

    # -- decode-set bookkeeping ----------------------------------------------------------------
    def _ctx(self, r: Request) -> int:
        return r.off + self.decode_steps if r.decoding else r.computed

    def _start_decoding(self, r: Request) -> None:
        D = self.decode_steps
        r.decoding = True
        r.off = r.computed - D
        r.out_off = r.out - D
        r.epoch += 1
        self.n_decode += 1
        self.off_sum += r.off
        self.residue[r.off % self.cfg.block_size] += 1
        heapq.heappush(self.finish_heap, (r.target - r.out_off, r.rid, r.epoch, r))

    def _stop_decoding(self, r: Request) -> None:
        D = self.decode_steps
        r.computed = r.off + D
        r.out = r.out_off + D
        r.decoding = False
        r.epoch += 1
        self.n_decode -= 1
        self.off_sum -= r.off
        self.residue[r.off % self.cfg.block_size] -= 1
        r.blocks = -(-r.computed // self.cfg.block_size)

    def _release(self, r: Request) -> None:
        if r.decoding:
            if (r.off + self.decode_steps) % self.cfg.block_size == 0:
                self._reserved -= 1      # its block for this step was never handed out
            self._stop_decoding(r)
        else:
            self.prefilling.remove(r)
        self.running.remove(r)
        self.free_blocks += r.blocks
        r.blocks = 0

    # -- preemption ------------------------------------------------------------------------------
    def _pick_victim(self) -> Request:
        if self.cfg.preemption == RECOMPUTE:
            return self.running[-1]
        # SGLang keeps requests with few output tokens and long inputs: retract the others first
        return max(self.running, key=lambda r: (self._out(r), -r.prompt, r.rid))

    def _out(self, r: Request) -> int:
        return r.out_off + self.decode_steps if r.decoding else r.out

    def _preempt(self, victim: Request) -> None:
        if victim.decoding:
            victim.last_token = self.now     # its latest token came out of the previous step
        self._release(victim)
        victim.num_preemptions += 1
        if self.first_preemption_at is None:
            self.first_preemption_at = self.now
        self.rec.on_preempt(victim, self.now)
        if self.cfg.preemption == RECOMPUTE:
            victim.computed = 0
            self.waiting.appendleft(victim)
        else:
            victim.computed = 0          # re-prefills prompt + kept output tokens
            self.waiting.append(victim)

    # -- one engine step -------------------------------------------------------------------------
    def step(self) -> None:
        cfg = self.cfg
        bs = cfg.block_size
        if self._next_arrival <= self.now:
            self._admit_arrivals()
        preempted = 0
        # 1. decoders each need one slot; a new block when their last block is full
        self._reserved = self.residue[(-self.decode_steps) % bs]
        while self._reserved > self.free_blocks and self.running:
            self._preempt(self._pick_victim())
            preempted += 1
        budget = cfg.max_batched_tokens - self.n_decode
        # 2. chunked prefill of running sequences, then admission (none in a step that preempted)
        chunks: list[tuple[Request, int]] = []
        for r in list(self.prefilling) if self.prefilling else ():
            if budget <= 0 or r not in self.prefilling:
                continue
            chunk = min(r.prefill_target() - r.computed, budget)
            extra = math.ceil((r.computed + chunk) / bs) - r.blocks
            while extra > self.free_blocks - self._reserved and r in self.running:
                victim = self._pick_victim()
                self._preempt(victim)
                preempted += 1
                chunks = [(c, n) for c, n in chunks if c is not victim]
            if r not in self.running:
                continue
            self.free_blocks -= extra
            r.blocks += extra
            chunks.append((r, chunk))
            budget -= chunk
        if not preempted and self.waiting:
            while self.waiting and budget > 0 and len(self.running) < cfg.max_running:
                r = self.waiting[0]
                chunk = min(r.prefill_target(), budget)
                extra = math.ceil(chunk / bs)
                if extra > self.free_blocks - self._reserved:
                    break
                self.waiting.popleft()
                self.free_blocks -= extra
                r.blocks = extra
                self.running.append(r)
                self.prefilling.append(r)
                if r.first_scheduled is None:
                    r.first_scheduled = self.now
                chunks.append((r, chunk))
                budget -= chunk
        self.free_blocks -= self._reserved
        # 3. run the step
        prefill_tokens = sum(n for _, n in chunks) if chunks else 0
        ctx_tokens = self.off_sum + self.n_decode * self.decode_steps
        if chunks:
            ctx_tokens += sum(r.computed for r, _ in chunks)
        decode_tokens = self.n_decode
        if not decode_tokens and not chunks:
            self._idle_until_next_arrival(preempted)
            return
        dt = (cfg.step_base_s + cfg.step_per_new_token_s * (decode_tokens + prefill_tokens)
              + cfg.step_per_context_token_s * ctx_tokens)
        self.now += dt
        self.decode_steps += 1
        now = self.now
        if decode_tokens:
            self.rec.on_token_gap(dt, decode_tokens, decode_tokens)
        for r, n in chunks if chunks else ():
            r.computed += n
            if r.computed < r.prefill_target():
                continue
            self.prefilling.remove(r)
            if not r.prompt_counted:
                r.prompt_counted = True
                self.rec.on_prefill_done(r, now)
            r.out += 1
            if r.first_token is None:
                r.first_token = now
                self.rec.on_first_token(r, now)
            else:
                self.rec.on_token_gap(now - r.last_token, 1, 1)
            r.last_token = now
            decode_tokens += 1
            if r.out >= r.target:
                self._finish(r)
            else:
                self._start_decoding(r)
        if self.finish_heap and self.finish_heap[0][0] <= self.decode_steps:
            self._finish_due(now)
        self._update_state(preempted)
        self.rec.on_step(now, dt, decode_tokens, prefill_tokens, preempted)

    def _finish_due(self, now: float) -> None:
        heap = self.finish_heap
        D = self.decode_steps
        while heap and heap[0][0] <= D:
            _, _, epoch, r = heapq.heappop(heap)
            if epoch != r.epoch or not r.decoding:
                continue
            self._finish(r)

    def _finish(self, r: Request) -> None:
        if r.decoding:
            self._stop_decoding(r)
        elif r in self.prefilling:
            self.prefilling.remove(r)
        r.last_token = self.now
        self.running.remove(r)
        self.free_blocks += r.blocks
        r.blocks = 0
        self.rec.on_finish(r, self.now)

    def _idle_until_next_arrival(self, preempted: int) -> None:
        self._update_state(preempted)
        self.now = max(self.now, min(self._next_arrival, self._horizon))

    def _update_state(self, preempted: int) -> None:
        s = self.state
        s.running = len(self.running)
        s.waiting = len(self.waiting)
        s.kv_used_blocks = self.cfg.kv_blocks - self.free_blocks
        s.paused_last_step = preempted
        self._steps_since_tick += 1
        if self._steps_since_tick >= self.cfg.log_interval_steps:
            self._steps_since_tick = 0
            self.rec.on_log_tick(self.now)

    def run_until(self, t: float) -> None:
        """Advance the engine until its clock reaches t."""
        self._horizon = t
        while self.now < t:
            self.step()

    def reconfigure(self, config: ServingConfig) -> None:
        """Run on from now with another capacity or speed (a degraded GPU, a KV budget that shrinks
        under another process). Blocks in use stay in use: a budget below them preempts at the next
        step until the running sequences fit."""
        if config.block_size != self.cfg.block_size or config.preemption != self.cfg.preemption:
            raise ValueError("a running engine keeps its block size and preemption mode")
        self.free_blocks += config.kv_blocks - self.cfg.kv_blocks
        self.cfg = config
        self.state.kv_blocks, self.state.max_running = config.kv_blocks, config.max_running

    def abort_all(self) -> None:
        """Drop every request (process restart): KV and queue emptied, nothing recorded."""
        self._reserved = 0
        for r in list(self.running):
            self._release(r)
        self.waiting.clear()
        self._update_state(0)
