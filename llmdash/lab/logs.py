"""Engine log writers: the simulator's events as the log lines an engine prints.

Why: the mtail programs llmdash generates (`generated/mtail/<engine>.mtail`) must count the lines a
real server writes and nothing else. These recorders receive the same events as the metric emitters
(`llmdash.lab.emitters`) and write SGLang's scheduler log in its 0.4.0–0.4.6 form ("Decode out of
memory happened.", every TP rank prefixed) or its 0.5 form ("KV cache pool is full. Retract
requests.", the WARNING form of 0.5.10+), one retraction line per scheduling step that retracted,
repeated by every TP rank, between the routine "Decode batch" lines, which on a disaggregated decode
server carry `#retracted-req: 0`. Formats are the engine's own (engines/sglang.yaml `logs:` cites them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from llmdash.engines.model import EngineSpec
from llmdash.lab.emitters.base import EngineMetrics, Fanout
from llmdash.lab.emitters.sglang import SGLANG_TP_SIZE
from llmdash.lab.scenarios import SCRAPE_INTERVAL_S, Scenario, _affected_only, advance, instances
from llmdash.lab.simulator import EngineState

SGLANG_FORMS = ("0.4", "0.5")


@dataclass(frozen=True)
class LogLine:
    at: float      # scenario time, seconds
    text: str


class SglangLog(EngineMetrics):
    """One SGLang server's scheduler log (TP ranks 0..tp_size-1), kept as LogLines in `lines`."""

    def __init__(self, form: str, start_ts: float, state, tp_size: int = SGLANG_TP_SIZE):
        if form not in SGLANG_FORMS:
            raise ValueError(f"unknown SGLang log form {form!r} (known: {', '.join(SGLANG_FORMS)})")
        self.form, self.start_ts, self.state, self.tp_size = form, start_ts, state, tp_size
        self.lines: list[LogLine] = []
        self.new_token_ratio = 0.7
        self._retracted = 0
        self._freed_tokens = 0
        self._retracted_at = 0.0

    def _prefix(self, at: float, rank: int) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.start_ts + at))
        # 0.4.0-0.4.6 always print the TP part; 0.4.7+ only when the TP size is above 1
        ranks = f" TP{rank}" if self.form == "0.4" or self.tp_size > 1 else ""
        return f"[{stamp}{ranks}] "

    def _write(self, at: float, message: str, ranks: range) -> None:
        self.lines.extend(LogLine(at, self._prefix(at, rank) + message) for rank in ranks)

    def on_preempt(self, req, now) -> None:
        if not self._retracted:
            self._retracted_at = now
        self._retracted += 1
        self._freed_tokens += req.computed

    def on_step(self, now, dt, decode_tokens, prefill_tokens, preempted) -> None:
        if self._retracted:
            self.flush()

    def flush(self) -> None:
        """Write the pending retraction: one line per step that retracted, on every TP rank."""
        if not self._retracted:
            return
        old, self.new_token_ratio = self.new_token_ratio, min(1.0, self.new_token_ratio + 0.1)
        ratio = f"#new_token_ratio: {old:.4f} -> {self.new_token_ratio:.4f}"
        if self.form == "0.4":
            message = f"Decode out of memory happened. #retracted_reqs: {self._retracted}, {ratio}"
        else:
            message = (f"KV cache pool is full. Retract requests. #retracted_reqs: {self._retracted}, "
                       f"#new_tokens_gained: {self._freed_tokens}, {ratio}")
        self._write(self._retracted_at, message, range(self.tp_size))
        self._retracted = self._freed_tokens = 0

    def on_log_tick(self, now) -> None:
        """The routine decode line (TP0); a disaggregated decode server's 0.5 line has `#retracted-req: 0`."""
        s: EngineState = self.state()
        self.new_token_ratio = max(0.4, self.new_token_ratio - 0.01)
        tokens = s.kv_used_blocks * s.block_size
        usage = s.kv_used_blocks / s.kv_blocks
        if self.form == "0.4":
            message = (f"Decode batch. #running-req: {s.running}, #token: {tokens}, token usage: {usage:.2f}, "
                       f"gen throughput (token/s): 0.00, #queue-req: {s.waiting}")
        else:
            message = (f"Decode batch, #running-req: {s.running}, #token: {tokens}, token usage: {usage:.2f}, "
                       f"pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, "
                       f"cuda graph: True, gen throughput (token/s): 0.00, #queue-req: {s.waiting}, ")
        self._write(now, message, range(1))


def sglang_log(scenario: Scenario, spec: EngineSpec, form: str, seed: int, start_ts: float,
               tp_size: int = SGLANG_TP_SIZE) -> list[LogLine]:
    """The scheduler log of the scenario's affected SGLang server (same traffic and seed as its metrics);
    a restart keeps writing to the same log, as a restarted container does."""
    alone = _affected_only(scenario)
    (inst,) = instances(alone, {spec.id: spec}, seed)   # one model, one replica, one engine
    log = SglangLog(form, start_ts, lambda: inst.sim.state, tp_size)
    inst.sim.rec = Fanout([log])
    restarted = scenario.restart_at_s is None
    t = 0.0
    while t < scenario.duration_s:
        t = min(t + SCRAPE_INTERVAL_S, scenario.duration_s)
        if not restarted and t >= scenario.restart_at_s:
            t = scenario.restart_at_s   # stop exactly at the restart, then listen to the new process
        now_restarted = advance([inst], alone, t, restarted)
        if now_restarted and not restarted:
            log.flush()
            inst.sim.rec = Fanout([log])
        restarted = now_restarted
    log.flush()
    return sorted(log.lines, key=lambda line: line.at)
