"""trtllm-serve: per-request series recorded at finish; paused requests of the latest iteration only."""

from __future__ import annotations

from llmdash.lab.emitters.base import EngineMetrics, finish_reason, tpot

FINISH_REASONS = ("stop", "length", "cancelled", "error")


class TrtllmServeMetrics(EngineMetrics):
    """trtllm-serve 1.3+ with MAX_UTILIZATION (the only capacity policy that pauses)."""

    engine = "tensorrt-llm-serve"

    def constant_labels(self):
        return {"model_name": self.model, "engine_type": "pytorch"}

    def build(self):
        r = self.reg
        self.generation = r.cell("trtllm_generation_tokens_total")
        self.success = {reason: r.cell("trtllm_request_success_total", finished_reason=reason)
                        for reason in FINISH_REASONS}
        self.ttft = r.histogram("trtllm_time_to_first_token_seconds")
        self.tpot = r.histogram("trtllm_time_per_output_token_seconds")
        self.paused = r.cell("trtllm_num_paused_requests")
        self.kv = r.cell("trtllm_kv_cache_utilization")
        self.waiting = r.cell("trtllm_num_requests_waiting")
        self.running = r.cell("trtllm_num_requests_running")

    def on_finish(self, req, now):
        """Every per-request series is recorded when the request finishes."""
        self.generation.value += req.out
        self.success[finish_reason(req)].value += 1
        self.ttft.observe(req.first_token - req.arrival)
        self.tpot.observe(tpot(req))

    def gauges(self, s):
        self.paused.value = s.paused_last_step           # the latest iteration only
        self.kv.value = s.kv_used_blocks / s.kv_blocks
        self.waiting.value = s.waiting
        self.running.value = s.running
