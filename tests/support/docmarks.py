"""A measured figure written into a docs page between two markers, stamped with the commit it was measured on:
what `make mutate WRITE=1` and `make time-tests WRITE=1` share."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path


def revision(root: Path) -> str:
    """The checkout's commit, `+changes` where the working tree differs from it."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True,
                           text=True).stdout.strip()
    return commit + ("+changes" if dirty else "")


def write_between(doc: Path, begin: str, end: str, text: str) -> None:
    """Replace what `doc` holds between its `begin` and `end` markers by `text`; stop if the markers are missing."""
    page = doc.read_text()
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(page):
        raise SystemExit(f"{doc} has no {begin} ... {end} markers")
    doc.write_text(pattern.sub(lambda _: f"{begin}\n{text}{end}", page))
