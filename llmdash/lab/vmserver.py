"""A throw-away local VictoriaMetrics and vmalert: the second backend panels and rules are proven on.

Why: fleets that outgrow one Prometheus run VictoriaMetrics with vmalert, whose MetricsQL differs
from PromQL where it matters here (`rate()` without extrapolation, the previous sample before a
window, a lookback derived from the data) and whose ruler writes recorded series asynchronously.
This runs Debian's `victoria-metrics` on a free loopback port with a temporary data directory
(beside `promserver.PrometheusServer`), imports the simulator's OpenMetrics with their timestamps,
serves the same query API, and runs `vmalert` (check a rule file, or replay rules over past data).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import requests

from llmdash.errors import LlmdashError
from llmdash.lab.promserver import ON_PATH, LocalServer, QueryAPI, Stack, free_port
from llmdash.redact import safe_line

INSTALL_HINT = ("install it with `apt-get install victoria-metrics` (Debian/Ubuntu; it brings vmalert), "
                "or put the victoria-metrics and vmalert binaries on PATH")
SAMPLE = re.compile(r"^(?P<series>[^#\s][^\s{]*(?:\{.*\})?) (?P<value>\S+) (?P<ts>\S+)$")
IMPORT_CHUNK = 4 << 20          # bytes per import request: well under -import.maxLineLen and request limits


def rfc3339(ts: float) -> str:
    """RFC 3339 to the millisecond (Go's time.RFC3339 parser takes the fraction): a replay starts at a phase."""
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class VictoriaMetricsServer(LocalServer):
    """One local single-node VictoriaMetrics; use as a context manager.

    `latency_offset` is `-search.latencyOffset`, how long after ingestion a sample becomes visible to
    queries at the current time (VictoriaMetrics' default 30s); the response cache is off, since rules
    replayed into it write series that an earlier cached query saw as absent."""

    name = "victoria-metrics"
    log_name = "victoria-metrics.log"
    ready_path = "/health"

    def __init__(self, latency_offset: str = "30s", stack: Stack = ON_PATH):
        self.stack = stack
        self.binary = stack.binary("victoria-metrics", INSTALL_HINT)
        self.dir = Path(tempfile.mkdtemp(prefix="llmdash-vm-"))
        self.latency_offset = latency_offset
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.session = requests.Session()

    def start(self, timeout_s: float = 60.0) -> "VictoriaMetricsServer":
        self.port = free_port()
        self._launch([self.binary, f"-storageDataPath={self.dir / 'data'}", f"-httpListenAddr=127.0.0.1:{self.port}",
                      "-retentionPeriod=100y", f"-search.latencyOffset={self.latency_offset}", "-search.disableCache",
                      "-loggerLevel=ERROR"], timeout_s)
        return self

    def backfill(self, openmetrics_file: str | Path) -> None:
        """Import an OpenMetrics file (timestamps in seconds) through /api/v1/import/prometheus, which takes
        the Prometheus text format with millisecond timestamps; then make it visible to queries."""
        chunk: list[str] = []
        size = 0
        with open(openmetrics_file) as lines:
            for line in lines:
                match = SAMPLE.match(line.rstrip("\n"))
                if not match:
                    continue
                chunk.append(f"{match['series']} {match['value']} {round(float(match['ts']) * 1000)}\n")
                size += len(chunk[-1])
                if size >= IMPORT_CHUNK:
                    self.ingest("".join(chunk))
                    chunk, size = [], 0
        if chunk:
            self.ingest("".join(chunk))
        self.flush()

    def ingest(self, text: str) -> None:
        """Import Prometheus text format (millisecond timestamps): searchable within about a second, and to
        queries at the current time only once older than `latency_offset`."""
        response = self.session.post(f"{self.url}/api/v1/import/prometheus", data=text.encode(), timeout=120)
        if response.status_code not in (200, 204):
            raise LlmdashError(f"victoria-metrics refused an import: {safe_line(response.text, limit=200)}")

    def flush(self) -> None:
        """Make everything ingested so far searchable (/internal/force_flush)."""
        self.session.get(f"{self.url}/internal/force_flush", timeout=60)


def vmalert_check(rule_file: str | Path, stack: Stack = ON_PATH) -> str | None:
    """vmalert's check of a rule file (`-dryRun`) by `stack`'s vmalert: None when it loads, else its reason."""
    vmalert = stack.binary("vmalert", INSTALL_HINT)
    result = subprocess.run([vmalert, "-dryRun", f"-rule={rule_file}", "-loggerLevel=ERROR"],
                            capture_output=True, text=True, timeout=60)
    if result.returncode == 0:
        return None
    lines = (result.stderr or result.stdout).strip().splitlines() or ["no output"]
    return safe_line(lines[-1], limit=400)


def vmalert_replay(rule_files: list[str | Path], datasource: QueryAPI, write_to: VictoriaMetricsServer,
                   start: float, end: float, external_labels: dict[str, str] | None = None,
                   interval: str = "1m") -> None:
    """Evaluate `rule_files` over [start, end] the way vmalert's replay mode does (a range query per rule
    and `interval` step: vmalert 1.79's replay steps by -datasource.queryStep, not by the group's
    interval, so both are set), reading from `datasource` and writing recorded series and `ALERTS` into
    `write_to`. A group's rules read one another only if they were replayed in an earlier call: pass
    one dependency level at a time."""
    vmalert = write_to.stack.binary("vmalert", INSTALL_HINT)
    args = [vmalert, *(f"-rule={f}" for f in rule_files), f"-datasource.url={datasource.url}",
            f"-remoteWrite.url={write_to.url}", f"-replay.timeFrom={rfc3339(start)}", f"-replay.timeTo={rfc3339(end)}",
            f"-datasource.queryStep={interval}", f"-evaluationInterval={interval}", "-replay.disableProgressBar",
            "-replay.rulesDelay=0s", "-remoteWrite.flushInterval=100ms",
            "-loggerLevel=ERROR", *(f"-external.label={k}={v}" for k, v in (external_labels or {}).items())]
    result = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines() or ["no output"]
        raise LlmdashError(f"vmalert replay failed: {safe_line(lines[-1], limit=400)}")
    write_to.flush()


class VmalertServer(LocalServer):
    """One live vmalert evaluating `rule_files` at the wall clock against `datasource`, writing recorded series
    and `ALERTS` back into it by remote write (asynchronously, every -remoteWrite.flushInterval, its default 5s,
    as a deployed vmalert does); its alerts are read from `/api/v1/alerts`. `notifier_url` receives the
    alerts (vmalert 1.79 requires one). `query_time_alignment` is `-datasource.queryTimeAlignment` (vmalert's
    default true: every query asks for the interval's start, whatever second the group is evaluated at)."""

    name = "vmalert"
    log_name = "vmalert.log"
    ready_path = "/health"

    def __init__(self, rule_files: list[str | Path], datasource: VictoriaMetricsServer, notifier_url: str,
                 interval: str = "1m", query_time_alignment: bool = True):
        self.binary = datasource.stack.binary("vmalert", INSTALL_HINT)
        self.dir = Path(tempfile.mkdtemp(prefix="llmdash-vmalert-"))
        self.rule_files, self.datasource = rule_files, datasource
        self.notifier_url, self.interval = notifier_url, interval
        self.query_time_alignment = query_time_alignment
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.session = requests.Session()

    def start(self, timeout_s: float = 60.0) -> "VmalertServer":
        self.port = free_port()
        self._launch([self.binary, *(f"-rule={f}" for f in self.rule_files), f"-datasource.url={self.datasource.url}",
                      f"-remoteWrite.url={self.datasource.url}", f"-notifier.url={self.notifier_url}",
                      f"-evaluationInterval={self.interval}", f"-httpListenAddr=127.0.0.1:{self.port}",
                      f"-datasource.queryTimeAlignment={str(self.query_time_alignment).lower()}",
                      "-loggerLevel=ERROR"], timeout_s)
        return self
