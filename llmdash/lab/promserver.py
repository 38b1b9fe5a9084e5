"""A throw-away local Prometheus: backfill, serve on 127.0.0.1, query, shut down.

Why: panel queries and annotations are only proven on a real PromQL engine. This runs
the distribution's `prometheus` binary (Debian package `prometheus`) on a free loopback
port with a temporary data directory, so tests, `llmdash demo` and rule benchmarks can
load scenario data and query it over the HTTP API exactly as Grafana would.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import requests
import yaml

from llmdash.errors import LlmdashError
from llmdash.redact import safe_line

INSTALL_HINT = ("install it with `apt-get install prometheus` (Debian/Ubuntu; it brings promtool), "
                "or put the prometheus and promtool binaries on PATH")
RETENTION = "36500d"   # backfilled data is hours old; never let retention delete it


class PromQLError(LlmdashError):
    """Prometheus rejected a query (bad PromQL or a server-side failure)."""


def find_binary(name: str, hint: str = INSTALL_HINT) -> str:
    """Absolute path of `prometheus`/`promtool` (or another tool), or a usage error that says how to install it."""
    path = shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None)
    if not path:
        raise LlmdashError(f"{name} not found: {hint}")
    return path


@dataclass(frozen=True)
class Stack:
    """Which build of the servers to run. `binaries` None: the commands on PATH (Debian's packages, what
    `llmdash demo` and the benchmarks use); else the path of each binary this stack has, and no other (a
    binary it lacks is an error, never silently the one on PATH). The test suite runs the oldest supported
    stack (Debian's) and the current one (built from the Go module proxy, tests/support/stacks.py)."""

    name: str = "Debian's packages"
    binaries: Mapping[str, str] | None = None
    hint: str = ""          # how to get this stack's binaries, instead of the per-binary install hint

    def binary(self, name: str, hint: str = INSTALL_HINT) -> str:
        if self.binaries is None:
            return find_binary(name, hint)
        path = self.binaries.get(name)
        if path is None:
            raise LlmdashError(f"{name} is not part of {self.name}")
        if not os.access(path, os.X_OK):
            raise LlmdashError(f"{name} of {self.name} not found at {path}: {self.hint or hint}")
        return path


ON_PATH = Stack()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process(proc: subprocess.Popen | None, timeout_s: float) -> None:
    """Terminate a server we started, killing it if it has not exited within `timeout_s`."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class QueryAPI:
    """The Prometheus HTTP query API as Grafana's Prometheus data source uses it; VictoriaMetrics serves
    the same, so a dashboard or rule check written against this runs on either backend."""

    name = "prometheus"
    url: str
    session: requests.Session

    def _api(self, path: str, params: dict) -> dict:
        try:
            response = self.session.post(f"{self.url}/api/v1/{path}", data=params, timeout=60)
        except requests.RequestException as exc:
            raise PromQLError(f"{self.name} at {self.url} unreachable: {exc.__class__.__name__}") from None
        body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        if response.status_code != 200 or body.get("status") != "success":
            raise PromQLError(f"{body.get('errorType', response.status_code)}: {body.get('error', response.text[:200])}"
                              f" in {params.get('query', '')!r}")
        return body["data"]

    def query(self, expr: str, at: float) -> list[dict]:
        """Instant query: [{"metric": {...}, "value": [ts, "v"]}]."""
        return self._api("query", {"query": expr, "time": f"{at:.3f}"})["result"]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict]:
        """Range query: [{"metric": {...}, "values": [[ts, "v"], ...]}] (matrix)."""
        return self._api("query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                         "step": f"{step:g}"})["result"]


class LocalServer(QueryAPI):
    """A server of ours on 127.0.0.1 with a temporary directory: started, waited for, stopped by PID, removed.
    Subclasses set `dir`, `session`, `port` and `proc`, and name their log file and readiness path."""

    log_name: str
    ready_path: str
    dir: Path
    port: int
    proc: subprocess.Popen | None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _launch(self, argv: list[str], timeout_s: float) -> None:
        """Start `argv` logging to `log_name`, and wait until `ready_path` answers 200 (or fail in one line)."""
        self.log = open(self.dir / self.log_name, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code, tail = self.proc.returncode, self._log_tail()
                self.stop()
                raise LlmdashError(f"{self.name} exited with code {code}: {tail}")
            try:
                if self.session.get(f"{self.url}{self.ready_path}", timeout=1).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.1)
        tail = self._log_tail()
        self.stop()
        raise LlmdashError(f"{self.name} on 127.0.0.1:{self.port} not ready after {timeout_s:g}s: {tail}")

    def _log_tail(self) -> str:
        try:
            lines = (self.dir / self.log_name).read_text().strip().splitlines()
        except OSError:
            return "no log"
        return safe_line(lines[-1]) if lines else "no log"

    def stop(self) -> None:
        stop_process(self.proc, 15)
        if getattr(self, "log", None):
            self.log.close()
        self.session.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class PrometheusServer(LocalServer):
    """One local Prometheus. Backfill before `start()`; use as a context manager.

    `rule_files` and `evaluation_interval` are passed into its configuration so alert and
    recording rules can be evaluated against backfilled data; `stack` says whose prometheus and promtool.
    """

    log_name = "prometheus.log"
    ready_path = "/-/ready"

    def __init__(self, rule_files: tuple[str | Path, ...] = (), evaluation_interval: str = "15s",
                 scrape_interval: str = "15s", scrape_configs: list[dict] | None = None, stack: Stack = ON_PATH):
        self.stack = stack
        self.prometheus = stack.binary("prometheus")
        self.promtool = stack.binary("promtool")
        self.dir = Path(tempfile.mkdtemp(prefix="llmdash-prom-"))
        self.data = self.dir / "data"
        self.data.mkdir()
        self.config = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": evaluation_interval},
            "rule_files": [str(Path(f).resolve()) for f in rule_files],
            "scrape_configs": scrape_configs or [],
        }
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.session = requests.Session()

    def backfill(self, openmetrics_file: str | Path, then_restart: bool = False,
                 max_block_duration: str | None = None) -> None:
        """Turn an OpenMetrics file (timestamps in seconds, `# EOF` last) into TSDB blocks. A running server
        loads new blocks only when it starts: `then_restart` says the caller will `restart()` it.
        `max_block_duration`: promtool parses the whole file once per block (2 h by default), so a day of data
        backfills in one or two passes with blocks of up to 54 h instead of a dozen."""
        if self.proc is not None and not then_restart:
            raise RuntimeError("backfill before start(): a running server does not load new blocks")
        blocks = [f"--max-block-duration={max_block_duration}"] if max_block_duration else []
        result = subprocess.run(
            [self.promtool, "tsdb", "create-blocks-from", "openmetrics", *blocks, str(openmetrics_file),
             str(self.data)], capture_output=True, text=True)
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            raise LlmdashError(f"promtool could not backfill {openmetrics_file}: {tail[0]}")

    def start(self, timeout_s: float = 60.0) -> "PrometheusServer":
        config_path = self.dir / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))
        self.port = free_port()
        self._launch([self.prometheus, f"--config.file={config_path}", f"--storage.tsdb.path={self.data}",
                      f"--storage.tsdb.retention.time={RETENTION}", f"--web.listen-address=127.0.0.1:{self.port}",
                      "--web.enable-lifecycle"], timeout_s)
        return self

    def restart(self) -> None:
        """Stop and start again on the same data, so blocks written meanwhile (a backfill) are loaded."""
        stop_process(self.proc, 15)
        self.log.close()
        self.proc = None
        self.start()

    def rules(self) -> list[dict]:
        """Loaded rule groups with their current alert states (GET /api/v1/rules)."""
        return self.session.get(f"{self.url}/api/v1/rules", timeout=30).json()["data"]["groups"]


# ---- scenario data ----------------------------------------------------------------------------

SLOT_GAP_S = 2 * 3600      # between scenarios: more than the longest (1 h) window any query uses


class ScenarioWindow:
    """Where one backfilled scenario sits in absolute time (seconds since the epoch)."""

    def __init__(self, name: str, start: float, onset: float, end: float):
        self.name, self.start, self.onset, self.end = name, start, onset, end

    def __repr__(self) -> str:
        return f"ScenarioWindow({self.name!r}, start={self.start:.0f}, onset={self.onset:.0f}, end={self.end:.0f})"


def _write_scenario(job: tuple[str, int, float, str, tuple[str, ...]]) -> tuple[str, int]:
    """Worker: one scenario to one OpenMetrics file (runs in a child process)."""
    from llmdash.engines.catalog import load_engine
    from llmdash.lab.scenarios import build, write_openmetrics

    name, seed, start, path, engines = job
    specs = {engine: load_engine(engine) for engine in engines}
    with open(path, "w") as out:
        samples = write_openmetrics(build(name), specs, seed, start, out)
        out.write("# EOF\n")
    return path, samples


def plan_windows(names: list[str], now: float | None = None) -> dict[str, ScenarioWindow]:
    """Disjoint, hour-aligned windows ending at least an hour before `now`."""
    from llmdash.lab.scenarios import build

    now = time.time() if now is None else now
    scenarios = [build(name) for name in names]
    span = sum(s.duration_s + SLOT_GAP_S for s in scenarios)
    start = (now // 3600) * 3600 - 3600 - span
    windows = {}
    for s in scenarios:
        windows[s.name] = ScenarioWindow(s.name, start, start + s.onset_s, start + s.duration_s)
        start += s.duration_s + SLOT_GAP_S
    return windows


def load_scenarios(server: PrometheusServer, names: list[str], engines: list[str], seed: int = 1,
                   workers: int | None = None, progress=None) -> dict[str, ScenarioWindow]:
    """Simulate each scenario for every engine, backfill it into `server`, return its windows."""
    from concurrent.futures import ProcessPoolExecutor

    windows = plan_windows(names)
    jobs = [(name, seed, w.start, str(server.dir / f"{name}.om"), tuple(engines)) for name, w in windows.items()]
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for path, samples in pool.map(_write_scenario, jobs):
            if progress:
                progress(f"simulated {Path(path).stem}: {samples} samples")
            server.backfill(path)
            os.unlink(path)
            if progress:
                progress(f"backfilled {Path(path).stem} into the local Prometheus")
    return windows
