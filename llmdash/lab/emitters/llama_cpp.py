"""llama-server: a request's generated tokens and decode time added when it finishes; no labels."""

from __future__ import annotations

from llmdash.lab.emitters.base import EngineMetrics


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
