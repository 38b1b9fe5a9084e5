"""LMDeploy: gauges latched every 10 s, no preemption metric."""

from __future__ import annotations

from llmdash.lab.emitters.base import EngineMetrics, finish_reason

FINISH_REASONS = ("stop", "length", "abort", "error", "cancel")


class LmdeployMetrics(EngineMetrics):
    engine = "lmdeploy"
    gauge_refresh_s = 10.0        # the scheduler gauges are refreshed every 10 s, not at scrape

    def constant_labels(self):
        return {"model_name": self.model, "engine": "0"}

    def build(self):
        r = self.reg
        self.generation = r.cell("lmdeploy:generation_tokens_total")
        self.success = {reason: r.cell("lmdeploy:request_success_total", finished_reason=reason)
                        for reason in FINISH_REASONS}
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
        self.success[finish_reason(req)].value += 1

    def gauges(self, s):
        self.kv.value = s.kv_used_blocks / s.kv_blocks
        self.waiting.value = s.waiting
        self.running.value = s.running
