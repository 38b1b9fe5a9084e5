"""Where a benchmark's figures go (`docs/benchmarks/<name>.md`) and the stamp that dates them.

Why: figures copied into prose go stale silently. Each `make bench-*` run rewrites its own page, and
the page names the commit the code was at ("+dirty" when the working tree had uncommitted changes)
and the UTC date, so a reader sees how old a figure is and which code produced it.
"""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

BENCHMARKS_DIR = Path("docs/benchmarks")
SOURCE_DIR = Path(__file__).resolve().parent   # the code that ran, whatever the working directory


def default_path(name: str) -> Path:
    return BENCHMARKS_DIR / f"{name}.md"


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=SOURCE_DIR, capture_output=True, text=True, timeout=30)


def commit() -> str:
    """`git rev-parse --short HEAD` of the code, "+dirty" when tracked files differ from it."""
    try:
        head = _git("rev-parse", "--short", "HEAD")
        if head.returncode != 0:
            return "unknown commit (not a git checkout)"
        dirty = _git("diff", "--quiet", "HEAD", "--").returncode != 0
    except (OSError, subprocess.TimeoutExpired):
        return "unknown commit (git not available)"
    return head.stdout.strip() + ("+dirty" if dirty else "")


def stamp(now: datetime.datetime | None = None) -> str:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return f"Measured on commit {commit()}, {now.strftime('%Y-%m-%d %H:%M')} UTC."


def page(title: str, command: str, body: str, now: datetime.datetime | None = None) -> str:
    """The whole page: title, what wrote it and when, then the benchmark's own markdown."""
    return (f"# {title}\n\n{stamp(now)} Written by `{command}`; how it measures: "
            f"[methods.md](methods.md).\n\n{body.rstrip()}\n")


def write(path: Path, title: str, command: str, body: str) -> str:
    text = page(title, command, body)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text
