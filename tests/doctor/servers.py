"""What the doctor tests run against: its command in a subprocess (measured), real loopback HTTP servers
(well-behaved and hostile), and engine pages as the simulator serves them."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from llmdash.engines.catalog import load_engine
from llmdash.lab.exposition import live_text
from llmdash.lab.scenarios import advance, build, instances

ROOT = Path(__file__).resolve().parents[2]
PEAK_MB = 500

# Runs the doctor as its only child, so RUSAGE_CHILDREN is the doctor's own peak and CPU time.
MEASURE = """
import json, resource, subprocess, sys, time
started = time.monotonic()
run = subprocess.run([sys.executable, "-m", "llmdash.cli.main", "doctor", *sys.argv[1:]],
                     capture_output=True, text=True, errors="surrogateescape")
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"returncode": run.returncode, "stdout": run.stdout[-20000:], "stderr": run.stderr,
                  "seconds": time.monotonic() - started, "cpu_seconds": used.ru_utime + used.ru_stime,
                  "peak_mb": used.ru_maxrss / 1024}))
"""


def doctor(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmdash.cli.main", "doctor", *args], cwd=ROOT,
                          capture_output=True, text=True, errors="surrogateescape", timeout=timeout)


def measured(*args: str, timeout: float = 180) -> dict:
    """returncode, stdout, stderr, seconds, cpu_seconds and peak_mb of one doctor run."""
    run = subprocess.run([sys.executable, "-c", MEASURE, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout, check=True)
    return json.loads(run.stdout)


def assert_one_line(result, code: int, *fragments: str) -> None:
    """`result` (a CompletedProcess or a `measured` dict) failed with `code` and one `error: ` line."""
    got = result if isinstance(result, dict) else vars(result)
    assert got["returncode"] == code, got["stdout"][-2000:] + got["stderr"][-2000:]
    assert got["stdout"] == "" and got["stderr"].startswith("error: ") and got["stderr"].count("\n") == 1, \
        got["stderr"][-2000:]
    for fragment in fragments:
        assert fragment in got["stderr"], got["stderr"]


def page(engine: str, scenario: str = "steady", at_s: float = 900.0, era: str | None = None) -> str:
    """`engine`'s /metrics page `at_s` seconds into `scenario`, as `llmdash simulate --serve` serves it;
    `era`: a release version every replica exports instead."""
    chosen = build(scenario)
    if era:
        chosen = replace(chosen, models=tuple(
            replace(m, replicas=tuple(replace(r, era=era) for r in m.replicas)) for m in chosen.models))
    insts = instances(chosen, {engine: load_engine(engine)}, seed=1)
    advance(insts, chosen, at_s, chosen.restart_at_s is None)
    for inst in insts:
        inst.emitters[engine].scrape(at_s)
    return live_text([inst.emitters[engine] for inst in insts],
                     [inst.replica.target_labels(engine, inst.model.name, live=True) for inst in insts])


class Routes:
    """An HTTP server on 127.0.0.1 answering each path from `answer(path, query, headers)` ->
    (status, body[, headers]); the requests it saw are in `.seen`."""

    def __init__(self, answer):
        self.seen: list[tuple[str, dict]] = []
        routes = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                parts = urlsplit(self.path)
                routes.seen.append((parts.path, dict(self.headers)))
                status, body, *headers = answer(parts.path, parts.query, self.headers)
                body = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for name, value in (headers[0] if headers else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # polled every 20 ms, not 0.5 s: shutting down does not hold each test half a second
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
