"""Directory trees as the output tests compare them: every file's bytes by relative path, and files planted."""

from __future__ import annotations

from pathlib import Path


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def plant(out: Path, files: dict[str, str]) -> dict[str, bytes]:
    """Write `files` (relative path -> text) under `out`; returns them as `snapshot` would read them."""
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    return {rel: text.encode() for rel, text in files.items()}
