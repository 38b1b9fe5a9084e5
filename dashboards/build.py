"""Build: catalogs + config -> validated dashboards -> deterministic files under generated/.

Every file is rendered in memory and validated before the first one is written, and the
writes go through temporary files renamed into place, so a failed build leaves the
previous output untouched. `check` compares without writing: CI's drift guard.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from dashboards.assemble import build_dashboard
from dashboards.config import Config
from dashboards.validate import validate_dashboard
from engines.catalog import load_engine
from engines.errors import EXIT_DRIFT, LlmdashError

DEFAULT_OUT = Path("generated")
MANAGED = {"dashboards": ".json"}  # subdirectory -> suffix of the files a build owns there


def render_json(model: dict) -> str:
    return json.dumps(model, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def build_dashboards(config: Config) -> dict[str, dict]:
    """Dashboard file stem -> Grafana JSON model, each validated against its engine's catalog."""
    dashboards = {}
    for engine in config.engine_ids:
        spec = load_engine(engine)
        model = build_dashboard(spec, config)
        problems = validate_dashboard(model, spec)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise LlmdashError(f"dashboard {engine} is invalid: {problems[0]}{more}")
        dashboards[engine] = model
    return dashboards


def generated_files(config: Config) -> dict[str, str]:
    """Relative path under the output directory -> file content."""
    return {f"dashboards/{name}.json": render_json(model) for name, model in build_dashboards(config).items()}


def _owned(out: Path) -> set[str]:
    owned = set()
    for subdir, suffix in MANAGED.items():
        if (out / subdir).is_dir():
            owned |= {f"{subdir}/{p.name}" for p in (out / subdir).iterdir() if p.name.endswith(suffix)}
    return owned


def write(files: dict[str, str], out: Path) -> list[str]:
    """Write `files` under `out`, remove owned files no longer produced; returns the paths changed."""
    changed = []
    staged = []
    try:
        for rel, content in sorted(files.items()):
            target = out / rel
            if target.is_file() and target.read_text() == content:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            with os.fdopen(fd, "w") as handle:
                handle.write(content)
            staged.append((tmp, target))
            changed.append(rel)
    except OSError as exc:
        for tmp, _ in staged:
            os.unlink(tmp)
        raise LlmdashError(f"cannot write {out}: {exc.strerror}") from None
    for tmp, target in staged:
        os.replace(tmp, target)
    for rel in sorted(_owned(out) - set(files)):
        (out / rel).unlink()
        changed.append(rel)
    return changed


def check(files: dict[str, str], out: Path) -> None:
    """Raise (exit 1) naming every stale, missing or extra file under `out`."""
    stale = [rel for rel, content in sorted(files.items())
             if not (out / rel).is_file() or (out / rel).read_text() != content]
    extra = sorted(_owned(out) - set(files))
    if stale or extra:
        names = ", ".join(stale + [f"{rel} (no longer built)" for rel in extra])
        raise LlmdashError(f"{out}/ is stale: {names}; run `make dashboards` and commit it", EXIT_DRIFT)
