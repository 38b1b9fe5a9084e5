"""What publish needs from a Grafana, whichever API generation speaks for it.

`GrafanaBackend` is the interface (health, folder, get, save, annotate); `LegacyApi`
(llmdash.delivery.legacy_api) and `ResourceApi` (llmdash.delivery.resource_api) implement it,
and llmdash.delivery.discovery picks one. The errors here are what either may raise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from llmdash.errors import EXIT_DRIFT, EXIT_REMOTE, LlmdashError



class GrafanaError(LlmdashError):
    """Grafana answered with an error or could not be reached (exit 3 unless refined below)."""

    def __init__(self, message: str, exit_code: int = EXIT_REMOTE):
        super().__init__(message, exit_code)


class Refused(GrafanaError):
    """Grafana would not save one dashboard; publish reports it and goes on with the others (exit 1)."""

    def __init__(self, message: str):
        super().__init__(message, EXIT_DRIFT)


class VersionMismatch(Refused):
    """412 version-mismatch: someone saved the dashboard between our GET and our POST."""


class NameExists(Refused):
    """412 name-exists (Grafana <= 11.2): another dashboard in the folder has this title."""


class ProvisionedDashboard(Refused):
    """400 "Cannot save provisioned dashboard": the file provider owns it."""


@dataclass(frozen=True)
class RemoteDashboard:
    dashboard: dict
    version: int
    folder_uid: str
    folder_title: str
    provisioned: bool
    resource_version: str = ""     # the resource API's optimistic-concurrency token; "" on /api


@dataclass(frozen=True)
class SavedDashboard:
    uid: str
    version: int


class GrafanaBackend(Protocol):
    """What publish needs from Grafana; one implementation per API generation."""

    description: str   # which API it speaks, for the first line of `llmdash publish`

    def health(self) -> str:
        """Return the Grafana version ("" when hidden); raise GrafanaError when not ready."""

    def get_folder(self, uid: str) -> dict | None: ...

    def create_folder(self, uid: str, title: str) -> dict:
        """Create the folder, or return the existing one when the uid is taken."""

    def get_dashboard(self, uid: str) -> RemoteDashboard | None: ...

    def save_dashboard(self, dashboard: dict, *, folder_uid: str, version: int, overwrite: bool,
                       message: str, resource_version: str = "") -> SavedDashboard:
        """Create (version 0) or update the dashboard read at `version` / `resource_version`;
        raise VersionMismatch when it changed since that read."""

    def annotate(self, *, text: str, tags: list[str], time_ms: int) -> int: ...

