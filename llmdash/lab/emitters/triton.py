"""TensorRT-LLM behind Triton: prometheus-cpp names, the batcher and KV block metrics as labelled gauges."""

from __future__ import annotations

from llmdash.lab.emitters.base import EngineMetrics


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
