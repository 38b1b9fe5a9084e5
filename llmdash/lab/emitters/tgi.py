"""TGI: every per-request series recorded when a request succeeds."""

from __future__ import annotations

from llmdash.lab.emitters.base import EngineMetrics


class TgiMetrics(EngineMetrics):
    """TGI's router: every per-request series is recorded when a request succeeds, nothing while it runs.

    The simulation underneath evicts under KV pressure (recompute), which TGI's reserve-at-admission
    queue never does; the series here follow TGI's update rules, not its scheduler. It fails no request:
    the failure counter is shown at 0 for a server-side reason, as a TGI shows it once that reason has
    occurred (TGI creates it at the first failure), so availability SLIs have their series.
    """

    engine = "tgi"
    max_total_tokens = 2048       # --max-total-tokens: sets the generated-tokens buckets

    def constant_labels(self):
        return {}

    def build(self):
        r = self.reg
        step = self.max_total_tokens / 100
        self.success = r.cell("tgi_request_success")
        r.cell("tgi_request_failure", err="generation")     # never incremented: nothing fails here
        self.generated = r.histogram("tgi_request_generated_tokens", tuple(step * (i + 1) for i in range(100)))
        self.time_per_token = r.histogram("tgi_request_mean_time_per_token_duration")
        self.duration = r.histogram("tgi_request_duration")
        self.queue_time = r.histogram("tgi_request_queue_duration")
        self.queue = r.cell("tgi_queue_size")
        self.batch = r.cell("tgi_batch_current_size")

    def on_finish(self, req, now):
        inference = now - req.first_scheduled              # batch start to the response
        self.success.value += 1
        self.generated.observe(req.out)
        self.time_per_token.observe(inference / req.out if req.out else 0.0)
        self.duration.observe(now - req.arrival)
        self.queue_time.observe(req.first_scheduled - req.arrival)

    def gauges(self, s):
        self.queue.value = s.waiting
        self.batch.value = s.running
