"""A throw-away local mtail: the generated programs over a log file, served on 127.0.0.1.

Why: the mtail programs llmdash generates are only proven by the real mtail (Debian package
`mtail`) reading real log lines, with its /metrics scraped by a real Prometheus. Server mode reads
only lines appended after it starts, as beside a running engine; `one_shot` reads files whole.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

import requests

from llmdash.errors import LlmdashError
from llmdash.lab.promserver import find_binary, free_port, stop_process

INSTALL_HINT = "install it with `apt-get install mtail` (Debian/Ubuntu), or put the mtail binary on PATH"


def _args(progs: Path, logs: list[Path], port: int) -> list[str]:
    return [find_binary("mtail", INSTALL_HINT), "--progs", str(progs), *(f"--logs={log}" for log in logs),
            "--address", "127.0.0.1", "--port", str(port), "--emit_prog_label=false", "--logtostderr"]


def compile_programs(progs: Path) -> None:
    """Raise with mtail's own message unless every program in `progs` compiles."""
    result = subprocess.run(_args(progs, [], 0) + ["--compile_only"], capture_output=True, text=True, timeout=60)
    errors = [line for line in result.stderr.splitlines() if line.startswith(("E", "F"))]
    if result.returncode != 0 or errors:
        raise LlmdashError(f"mtail could not compile {progs}: {(errors or [result.stderr.strip()])[-1]}")


def one_shot(progs: Path, logs: list[Path]) -> str:
    """The Prometheus text mtail exports after reading `logs` from their start."""
    result = subprocess.run(_args(progs, logs, 0) + ["--one_shot", "--one_shot_format=prometheus"],
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise LlmdashError(f"mtail --one_shot failed: {result.stderr.strip().splitlines()[-1:]}")
    return result.stdout


class MtailServer:
    """mtail tailing `logs` with the programs in `progs`, on a free loopback port."""

    def __init__(self, progs: Path, logs: list[Path]):
        self.progs, self.logs = progs, logs
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.stderr = tempfile.TemporaryFile()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20.0) -> "MtailServer":
        self.proc = subprocess.Popen(_args(self.progs, self.logs, self.port), stdout=subprocess.DEVNULL,
                                     stderr=self.stderr)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LlmdashError(f"mtail exited with code {self.proc.returncode}")
            try:
                if requests.get(f"http://{self.address}/metrics", timeout=1).status_code == 200:
                    return self
            except requests.ConnectionError:
                pass
            time.sleep(0.05)
        self.stop()
        raise LlmdashError(f"mtail on {self.address} not ready after {timeout_s:g}s")

    def metrics(self) -> str:
        return requests.get(f"http://{self.address}/metrics", timeout=5).text

    def stop(self) -> None:
        stop_process(self.proc, 10)
        self.stderr.close()

    def __enter__(self) -> "MtailServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
