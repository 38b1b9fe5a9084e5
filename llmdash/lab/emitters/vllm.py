"""vLLM: tokens counted every step, ITL observed once per request per step, preemptions per event."""

from __future__ import annotations

from llmdash.lab.emitters.base import EngineMetrics, finish_reason, tpot

FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")


class VllmMetrics(EngineMetrics):
    engine = "vllm"

    def constant_labels(self):
        return {"model_name": self.model, "engine": "0"}

    def build(self):
        r = self.reg
        self.generation = r.cell("vllm:generation_tokens_total")
        self.success = {reason: r.cell("vllm:request_success_total", finished_reason=reason)
                        for reason in FINISH_REASONS}
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
        self.success[finish_reason(req)].value += 1
        self.tpot.observe(tpot(req))
        self.per_request.observe(req.num_preemptions)

    def gauges(self, s):
        self.kv.value = s.kv_used_blocks / s.kv_blocks
        self.waiting.value = s.waiting
        self.running.value = s.running
