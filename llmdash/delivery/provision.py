"""Grafana file provisioning: a provider YAML plus raw dashboard JSON, for GitOps users.

Layout written under DIR (https://grafana.com/docs/grafana/latest/administration/provisioning/#dashboards):

    DIR/provisioning/dashboards/llmdash.yaml   provider, apiVersion 1, allowUiUpdates false
    DIR/dashboards/<stem>.json                 raw models (no {"dashboard": ...} wrapper)

Grafana then owns the dashboards from the files: UI and API saves are refused, so
`llmdash publish` reports them as provisioned instead of fighting the provider. DIR may be shared
(Grafana's own dashboards directory): only files llmdash wrote there are ever removed (`llmdash.atomic`).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from llmdash.atomic import Outcome, quoted, update_outputs
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
                       grafana_path: str = DEFAULT_GRAFANA_PATH) -> Outcome:
    """Write the layout; returns what was written, removed and left alone.

    Everything is validated and rendered before the first write, and DIRECTORY is updated
    all at once (`llmdash.atomic`), so a failure or an interrupt never leaves a half-written layout.
    """
    check_all(dashboards)
    if not grafana_path.startswith("/"):
        raise LlmdashError(f"--grafana-path must be absolute (the path inside Grafana), got {grafana_path!r}",
                           EXIT_USAGE)
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise LlmdashError(f"{quoted(root)} exists and is not a directory", EXIT_USAGE)

    files = {str(PROVIDER_FILE): yaml.safe_dump(provider(folder_uid, folder_title, grafana_path), sort_keys=False)}
    for stem, dashboard in sorted(dashboards.items()):
        model = {**dashboard, "id": None}
        model.pop("version", None)
        files[str(DASHBOARD_DIR / f"{stem}.json")] = json.dumps(model, sort_keys=True, indent=2) + "\n"

    return update_outputs(root, files, (str(PROVIDER_FILE.parent), str(DASHBOARD_DIR)))
