"""A real Prometheus 3 that scrapes simulated replicas, some stored as native histograms with custom buckets.

Why: Prometheus 3 turns a classic histogram into a native histogram with custom buckets (NHCB) at scrape time
(`convert_classic_histograms_to_nhcb`, per target through the `__convert_classic_histograms_to_nhcb__` label),
from the text exposition too (its NHCB parser wraps the text and OpenMetrics parsers). No backfill converts, so
the native copy is made by scraping: `Replay` serves each replica's simulated scrapes, one per request, with
their own timestamps (honoured by the scrape), and moves on to the next only once Prometheus holds the last one, so
a failed scrape is served again and the copy has every sample. Scraping is live, so the copy sits within the
head's appendable window (the last hour before the newest sample); `persist` turns the head into a block, so
recording rules can then be backfilled over it (a restart drops WAL samples older than the newest block).

The binaries are the current stack's (tests/support/stacks.py, built by .ci/build-stack into the per-user cache).
"""

from __future__ import annotations

import shutil
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from llmdash.lab.promserver import PrometheusServer, stop_process
from tests.support.stacks import require

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


class Prometheus3(PrometheusServer):
    """A PrometheusServer of the current stack (Prometheus 3.16, tests/support/stacks.py: a stack not built fails
    under CI=true, skips elsewhere), with the admin API (for `persist`)."""

    def __init__(self, **kwargs):
        super().__init__(stack=require("current"), **kwargs)

    def _launch(self, argv: list[str], timeout_s: float) -> None:
        super()._launch(argv + ["--web.enable-admin-api"], timeout_s)

    def persist(self) -> None:
        """Restart on a snapshot of everything stored (the head written as a block), scraping nothing more."""
        name = self.session.post(f"{self.url}/api/v1/admin/tsdb/snapshot", timeout=120).json()["data"]["name"]
        snapshot = self.dir / "snapshot"
        shutil.move(self.data / "snapshots" / name, snapshot)
        self.config["scrape_configs"] = []
        stop_process(self.proc, 15)
        self.log.close()
        self.proc = None
        shutil.rmtree(self.data)
        shutil.move(snapshot, self.data)
        self.start()


class Replay:
    """Serves /metrics/<i>: target i's scrapes (OpenMetrics text with timestamps) one per request, the next one
    only once `held(i, k)` says Prometheus stores scrape k. `done` is set when every target's last one is stored."""

    def __init__(self, scrapes: list[list[str]], held):
        self.scrapes, self.held = scrapes, held
        self.serving = [-1] * len(scrapes)       # per target: the scrape it hands out now
        self.finished = [False] * len(scrapes)
        self.done = threading.Event()
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = replay.serve(int(self.path.rsplit("/", 1)[-1])).encode()
                self.send_response(200)
                self.send_header("Content-Type", OPENMETRICS)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)
                # else a scrape Prometheus gave up on (its timeout): served again, as `held` says nothing yet

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def serve(self, i: int) -> str:
        """Target i's scrape for this request (a target is scraped one request at a time)."""
        k = self.serving[i]
        if k < 0 or (k < len(self.scrapes[i]) - 1 and self.held(i, k)):
            self.serving[i] = k = k + 1
        elif k == len(self.scrapes[i]) - 1 and not self.finished[i] and self.held(i, k):
            self.finished[i] = True
            if all(self.finished):
                self.done.set()
        return self.scrapes[i][k]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
