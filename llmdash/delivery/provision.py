"""Grafana file provisioning: a provider YAML plus raw dashboard JSON, for GitOps users.

Layout written under DIR (grafana.md §3):

    DIR/provisioning/dashboards/llmdash.yaml   provider, apiVersion 1, allowUiUpdates false
    DIR/dashboards/<stem>.json                 raw models (no {"dashboard": ...} wrapper)

Grafana then owns the dashboards from the files: UI and API saves are refused, so
`llmdash publish` reports them as provisioned instead of fighting the provider.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import yaml

from llmdash.delivery.publish import check_all
from llmdash.errors import EXIT_USAGE, LlmdashError

DEFAULT_GRAFANA_PATH = "/var/lib/grafana/dashboards/llmdash"
PROVIDER_FILE = Path("provisioning/dashboards/llmdash.yaml")
DASHBOARD_DIR = Path("dashboards")


def provider(folder_uid: str, folder_title: str, grafana_path: str) -> dict:
    return {
        "apiVersion": 1,
        "providers": [{
            "name": "llmdash",
            "orgId": 1,
            "folder": folder_title,
            "folderUid": folder_uid,
            "type": "file",
            # Deleting a file removes its dashboard, so a dropped engine does not linger.
            "disableDeletion": False,
            "updateIntervalSeconds": 30,
            # The files are the source of truth; edits belong in the repository.
            "allowUiUpdates": False,
            "options": {"path": grafana_path, "foldersFromFilesStructure": False},
        }],
    }


def write_provisioning(dashboards: dict[str, dict], directory: str | Path, *, folder_uid: str, folder_title: str,
                       grafana_path: str = DEFAULT_GRAFANA_PATH) -> list[str]:
    """Write the layout; returns one line per file written or removed.

    Everything is validated and rendered before the first write, and each file is
    replaced atomically, so a failure never leaves a half-written layout.
    """
    check_all(dashboards)
    if not grafana_path.startswith("/"):
        raise LlmdashError(f"--grafana-path must be absolute (the path inside Grafana), got {grafana_path!r}",
                           EXIT_USAGE)
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise LlmdashError(f"{root} exists and is not a directory", EXIT_USAGE)

    files = {PROVIDER_FILE: yaml.safe_dump(provider(folder_uid, folder_title, grafana_path), sort_keys=False)}
    for stem, dashboard in sorted(dashboards.items()):
        model = {**dashboard, "id": None}
        model.pop("version", None)
        files[DASHBOARD_DIR / f"{stem}.json"] = json.dumps(model, sort_keys=True, indent=2) + "\n"

    report = []
    try:
        for relative, text in files.items():
            _write_atomic(root / relative, text)
            report.append(f"wrote {root / relative}")
        for stale in sorted((root / DASHBOARD_DIR).glob("*.json")):
            if stale.relative_to(root) not in files and _is_ours(stale):
                stale.unlink()
                report.append(f"removed {stale} (no longer built)")
    except OSError as exc:
        raise LlmdashError(f"cannot write provisioning layout in {root}: {exc.strerror}", EXIT_USAGE) from None
    return report


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _is_ours(path: Path) -> bool:
    """Only files llmdash generated (uid llmdash-*) are pruned; a user's own file stays."""
    try:
        return str(json.loads(path.read_text(encoding="utf-8")).get("uid", "")).startswith("llmdash-")
    except (OSError, ValueError, AttributeError):
        return False
