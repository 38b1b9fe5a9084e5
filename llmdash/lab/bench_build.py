"""`make bench-build`: whole-process wall time of `llmdash --help` and `llmdash build`, beside Python's own start.

Each command runs 5 times as a fresh process (what a user or CI step pays); min and median are printed and
written, stamped, to `docs/benchmarks/bench-build.md` (or the path given as the only argument).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from llmdash.lab import bench_report

RUNS = 5


def timed(command: list[str]) -> list[float]:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    llmdash = shutil.which("llmdash", path=str(Path(sys.executable).parent)) or "llmdash"
    with tempfile.TemporaryDirectory(prefix="llmdash-bench-") as out:
        rows = [("python3 -c pass", timed([sys.executable, "-c", "pass"])),
                ("llmdash --help", timed([llmdash, "--help"])),
                ("llmdash build --out DIR", timed([llmdash, "build", "--out", out]))]
    lines = [f"{RUNS} runs each, whole process.", "", "| command | min (s) | median (s) |", "|---|---|---|"]
    lines += [f"| `{name}` | {min(times):.3f} | {statistics.median(times):.3f} |" for name, times in rows]
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else bench_report.default_path("bench-build")
    text = bench_report.write(target, "Start-up and build time", "make bench-build", "\n".join(lines))
    print(text + f"written to {target}")


if __name__ == "__main__":
    main()
