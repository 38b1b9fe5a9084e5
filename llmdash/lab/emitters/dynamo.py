"""The Dynamo frontend: only the response stream (tokens per chunk, per-token ITL, requests counted
when they end), no KV cache or preemption."""

from __future__ import annotations

from llmdash.lab.emitters.base import EngineMetrics


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
