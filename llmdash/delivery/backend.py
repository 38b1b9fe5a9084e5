"""What publish needs from a Grafana, whichever API generation speaks for it.

`GrafanaBackend` is the interface (health, folder, get, save, annotate); `LegacyApi`
(llmdash.delivery.legacy_api) and `ResourceApi` (llmdash.delivery.resource_api) implement it,
and llmdash.delivery.discovery picks one. The errors here are what either may raise, and
`checked_model` is the shape both guarantee for a dashboard they read, so publish can
normalise and diff it without meeting a type it cannot compare.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real
from typing import Protocol

from llmdash.errors import EXIT_DRIFT, EXIT_REMOTE, LlmdashError

GRID_KEYS = ("x", "y", "w", "h")
# Panel fields the diff walks into, with the type it needs (absent or null is fine).
PANEL_FIELDS = (("gridPos", dict, "a map"), ("fieldConfig", dict, "a map"), ("targets", list, "a list"),
                ("panels", list, "a list"), ("type", str, "a string"))


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


class UnconfirmedSave(VersionMismatch):
    """A save whose first attempt got no answer it could use (a 5xx, a reset) and whose retry then
    met a newer version: either that first attempt stored it, or someone else saved meanwhile.

    `cause` is what the first attempt got; it is what to report when re-reading shows the
    dashboard stored, since the retry's conflict was then caused by our own first attempt.
    """

    def __init__(self, cause: str, conflict: str):
        super().__init__(f"changed in Grafana during this publish ({conflict}) after a save that got no answer "
                         f"({cause}); re-run to see the diff")
        self.cause = cause


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
    # The dashboard.grafana.app version Grafana stores it in, when it converted it for this read
    # (`status.conversion.storedVersion`); "" when it was read in the version it is stored in, or on /api.
    stored_version: str = ""


@dataclass(frozen=True)
class SavedDashboard:
    uid: str
    version: int


class GrafanaBackend(Protocol):
    """What publish needs from Grafana; one implementation per API generation."""

    description: str   # which API it speaks, for the first line of `llmdash publish`
    schema: str        # the dashboard model it reads and writes: "v1" (classic JSON) or "v2"

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


def checked_model(model: dict, uid: str) -> dict:
    """`model` as read from Grafana, when publish can compare it: the containers it walks are of the
    right type and every panel position is numeric (Grafana sorts by gridPos; so does the diff).
    Anything else is one GrafanaError naming where, instead of a TypeError deep in the diff."""
    def malformed(where: str, value: object, wanted: str) -> GrafanaError:
        return GrafanaError(f"Grafana returned a malformed dashboard {uid}: {where} is not {wanted} "
                            f"(a {type(value).__name__})")

    for key in ("panels", "tags"):
        if not isinstance(model.get(key, []), list):
            raise malformed(key, model[key], "a list")
    if model.get("links") is not None and not isinstance(model["links"], list):
        raise malformed("links", model["links"], "a list")

    def check_panels(panels: list, where: str) -> None:
        for index, panel in enumerate(panels):
            if not isinstance(panel, dict):
                continue
            at = f"{where}[{index}]"
            for key, wanted, name in PANEL_FIELDS:
                if panel.get(key) is not None and not isinstance(panel[key], wanted):
                    raise malformed(f"{at}.{key}", panel[key], name)
            defaults = (panel.get("fieldConfig") or {}).get("defaults")
            if defaults is not None and not isinstance(defaults, dict):
                raise malformed(f"{at}.fieldConfig.defaults", defaults, "a map")
            for key in GRID_KEYS:
                value = (panel.get("gridPos") or {}).get(key, 0)
                if not isinstance(value, Real) or isinstance(value, bool):
                    raise malformed(f"{at}.gridPos.{key}", value, "a number")
            check_panels(panel.get("panels") or [], f"{at}.panels")

    check_panels(model.get("panels", []), "panels")
    return model
