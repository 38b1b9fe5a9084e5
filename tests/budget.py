"""Time `make test-unit` and `make test` against their budgets, and `make test-stack` beside them (`make time-tests`).

Why a script: the budgets (60 s and 8 min on the 2-core machine CI uses) are a figure docs/testing.md
states with its date and commit, and a figure typed by hand goes stale with the next test. This runs each make
target as a user does, from a clean pytest cache, reads pytest's own summary line, and with `--write` puts the
table between the test-budget markers of docs/testing.md. The load average before and after each run is part
of the row: a figure taken on a busy machine says so. Exit 1 when a target is over its budget or fails.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.support.docmarks import revision, write_between

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "testing.md"
BEGIN, END = "<!-- test-budget:begin (make time-tests WRITE=1) -->", "<!-- test-budget:end -->"
# make test-stack has no budget of its own (.ci/run runs it after make test); it is timed beside them
BUDGETS_S: dict[str, float | None] = {"test-unit": 60, "test": 8 * 60, "test-stack": None}
SUMMARY = re.compile(r"^=*\s*(\d+ (?:failed|passed|errors?)\b.*?) in [\d.]+s", re.M)
FAILED = re.compile(r"^(?:FAILED|ERROR) .*$", re.M)


def run(target: str) -> tuple[float, int, str, tuple[float, float]]:
    """(seconds, exit code, pytest's summary, (load before, load after)) of `make TARGET`."""
    shutil.rmtree(ROOT / ".pytest_cache", ignore_errors=True)
    before = os.getloadavg()[0]
    started = time.monotonic()
    done = subprocess.run(["make", "-s", target], cwd=ROOT, capture_output=True, text=True)
    seconds = time.monotonic() - started
    found = SUMMARY.findall(done.stdout)
    if done.returncode != 0:   # what failed, or why make stopped: the table's row alone cannot say
        print("\n".join(FAILED.findall(done.stdout)) or (done.stdout + done.stderr)[-3000:], file=sys.stderr)
    return seconds, done.returncode, found[-1] if found else "no pytest summary", (before, os.getloadavg()[0])


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s" if seconds >= 60 else f"{seconds:.1f} s"


def table(rows: list[tuple[str, float, int, str, tuple[float, float]]], commit: str) -> str:
    lines = [f"Measured by `make time-tests` on commit {commit}, {datetime.date.today().isoformat()}, on a "
             f"{os.cpu_count()}-core machine.", "",
             "| command | wall time | budget | within | exit | pytest | load average before / after |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for target, seconds, code, summary, (before, after) in rows:
        budget = BUDGETS_S[target]
        within = "-" if budget is None else "yes" if code == 0 and seconds <= budget else "**no**"
        lines.append(f"| `make {target}` | {minutes(seconds)} | {'-' if budget is None else minutes(budget)} "
                     f"| {within} | {code} | {summary} | {before:.1f} / {after:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write the table into {DOC.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    commit = revision(ROOT)
    rows = []
    for target in BUDGETS_S:
        rows.append((target, *run(target)))
        print(f"make {target}: {minutes(rows[-1][1])}, exit {rows[-1][2]}, {rows[-1][3]}", flush=True)
    report = table(rows, commit)
    print(report, end="")
    if args.write:
        write_between(DOC, BEGIN, END, report)
    over = [r for r in rows if r[2] != 0 or (BUDGETS_S[r[0]] or float("inf")) < r[1]]
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
