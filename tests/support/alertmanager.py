"""A real Alertmanager and a webhook receiver on 127.0.0.1, for tests that follow an alert to the pager.

Why: inhibition, grouping and routing are Alertmanager's; only the real one (Debian's
`prometheus-alertmanager`) shows what a receiver gets and when. It runs on a free loopback port with
its clustering off, a temporary storage directory, and is stopped by its PID. The receiver records
every notification with the time it arrived.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests
import yaml

from llmdash.lab.promserver import ON_PATH, Stack, free_port, stop_process

INSTALL_HINT = "install Debian's prometheus-alertmanager (apt-get install prometheus-alertmanager; .ci/install-deps)"


@dataclass(frozen=True)
class Notification:
    """One webhook call: which receiver (the URL path), when it arrived, and its alerts' labels and status."""

    receiver: str
    at: float
    alerts: tuple[tuple[str, dict], ...]    # (status, labels)


class WebhookReceiver:
    """Records Alertmanager's webhook notifications, one receiver per URL path (`url(name)`)."""

    def __init__(self):
        self.notifications: list[Notification] = []
        received = self.notifications

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                received.append(Notification(self.path.strip("/"), time.time(), tuple(
                    (a.get("status", ""), a.get("labels", {})) for a in body.get("alerts", []))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, receiver: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{receiver}"

    def __enter__(self) -> "WebhookReceiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class AlertmanagerServer:
    """One local Alertmanager running `config` (a configuration model); use as a context manager. Debian's
    (0.25) on every stack: the current stack has no alertmanager server (.ci/current-stack says why)."""

    def __init__(self, config: dict, stack: Stack = ON_PATH):
        self.binary = stack.binary("prometheus-alertmanager", INSTALL_HINT)
        self.dir = Path(tempfile.mkdtemp(prefix="llmdash-am-"))
        self.config_path = self.dir / "alertmanager.yml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> "AlertmanagerServer":
        self.log = open(self.dir / "alertmanager.log", "w")
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={self.config_path}", f"--storage.path={self.dir / 'data'}",
             f"--web.listen-address={self.address}", "--cluster.listen-address="],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"alertmanager exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                if requests.get(f"http://{self.address}/-/ready", timeout=1).status_code == 200:
                    return self
            except requests.ConnectionError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"alertmanager on {self.address} not ready after {timeout_s:g}s: {self.log_tail()}")

    def alerts(self) -> list[dict]:
        """Alertmanager's current alerts with their status (state active/suppressed, inhibitedBy)."""
        return requests.get(f"http://{self.address}/api/v2/alerts", timeout=10).json()

    def log_tail(self) -> str:
        lines = (self.dir / "alertmanager.log").read_text().strip().splitlines()
        return lines[-1] if lines else "no log"

    def stop(self) -> None:
        stop_process(self.proc, 15)
        if getattr(self, "log", None):
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "AlertmanagerServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
