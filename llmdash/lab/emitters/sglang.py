"""SGLang: the realtime token counter moves per log tick, the generation counter at request finish;
the ITL observer divides an interval by the tokens it carried; retraction counters repeat on every TP rank."""

from __future__ import annotations

from llmdash.lab.emitters.base import EngineMetrics
from llmdash.lab.simulator import RETRACT

SGLANG_TP_SIZE = 2        # retraction counters appear once per TP rank


class SglangMetrics(EngineMetrics):
    engine = "sglang"
    preemption = RETRACT

    def constant_labels(self):
        return {"model_name": self.model, "engine_type": "unified", "pp_rank": "0", "moe_ep_rank": "0",
                "tp_rank": "0", "is_streaming": "true",
                "dp_rank": ""}   # one data-parallel rank: an empty value, which Prometheus stores as no label

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
