"""`GrafanaBackend` over the classic `/api/*` endpoints, which work on Grafana 10-13.

Grafana 13 deprecates them in favour of the resource API (llmdash.delivery.resource_api),
which still relies on this client for health, folders and annotations.
"""

from __future__ import annotations

import requests

from llmdash import redact
from llmdash.delivery.backend import (GrafanaError, NameExists, ProvisionedDashboard, RemoteDashboard, SavedDashboard,
                                      UnconfirmedSave, VersionMismatch, checked_model)
from llmdash.delivery.transport import Transport


class LegacyApi:
    """`GrafanaBackend` over `/api`: dashboards by uid, saved with `id: null`, the live version and
    `overwrite`, so an edit between our GET and our POST is Grafana's 412 version-mismatch."""

    description = "/api (legacy dashboard API)"
    schema = "v1"

    def __init__(self, transport: Transport):
        self.http = transport

    def health(self) -> str:
        response = self.http.request("GET", "/api/health")
        if response.status_code != 200:
            raise self.http.fail(response, "checking /api/health")
        payload = self.http.json(response, "checking /api/health")
        secrets = self.http.connection.secrets
        if payload.get("database") != "ok":
            database = redact.safe_line(payload.get("database"), secrets, 60)
            raise GrafanaError(f"Grafana at {self.http.where} reports database {database!r}")
        version = payload.get("version")
        return redact.safe_line(version, secrets, 60) if isinstance(version, (str, int, float)) else ""

    def get_folder(self, uid: str) -> dict | None:
        response = self.http.request("GET", f"/api/folders/{uid}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self.http.fail(response, f"reading folder {uid}")
        return self.http.json(response, f"reading folder {uid}")

    def create_folder(self, uid: str, title: str) -> dict:
        response = self.http.request("POST", "/api/folders", {"uid": uid, "title": title}, idempotent=False)
        if response.status_code == 200:
            return self.http.json(response, f"creating folder {uid}")
        if response.status_code in (409, 412):
            # 409 on the legacy store, 412 on Kubernetes-backed Grafana: the uid exists already.
            existing = self.get_folder(uid)
            if existing is not None:
                return existing
            raise GrafanaError(f"folder uid {uid!r} is taken by a dashboard, not a folder; pick another folder uid")
        raise self.http.fail(response, f"creating folder {uid}")

    def get_dashboard(self, uid: str) -> RemoteDashboard | None:
        response = self.http.request("GET", f"/api/dashboards/uid/{uid}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self.http.fail(response, f"reading dashboard {uid}")
        payload = self.http.json(response, f"reading dashboard {uid}")
        meta = payload.get("meta") or {}
        dashboard = payload.get("dashboard")
        if not isinstance(dashboard, dict) or not isinstance(meta, dict):
            raise GrafanaError(f"Grafana returned no dashboard model for {uid}")
        return RemoteDashboard(
            dashboard=checked_model(dashboard, uid),
            version=self.http.integer(dashboard.get("version") or meta.get("version") or 0, f"version of {uid}"),
            folder_uid=self.http.text(meta.get("folderUid")),
            folder_title=self.http.text(meta.get("folderTitle")) or "General",
            provisioned=meta.get("provisioned") is True,
        )

    def save_dashboard(self, dashboard: dict, *, folder_uid: str, version: int, overwrite: bool,
                       message: str, resource_version: str = "") -> SavedDashboard:
        body = {"dashboard": {**dashboard, "id": None, "version": version}, "folderUid": folder_uid,
                "overwrite": overwrite, "message": message[:500]}
        reply = self.http.send("POST", "/api/dashboards/db", body, idempotent=False)
        response = reply.response
        uid = dashboard.get("uid", "")
        if response.status_code == 200:
            payload = self.http.json(response, f"saving dashboard {uid}")
            return SavedDashboard(uid=self.http.text(payload.get("uid")) or uid,
                                  version=self.http.integer(payload.get("version", 0), f"saved version of {uid}"))
        status, text = self._status(response), self.http.message(response)
        if response.status_code == 412 and status == "version-mismatch":
            if reply.lost:
                raise UnconfirmedSave(reply.lost, f"412 version-mismatch: {text}")
            raise VersionMismatch(f"changed in Grafana during this publish (412 version-mismatch: {text}); "
                                  "re-run to see the diff")
        if response.status_code == 412 and status == "name-exists":
            raise NameExists(f"another dashboard in folder {folder_uid} is titled {dashboard.get('title')!r} "
                             "(Grafana <= 11.2 requires unique titles per folder)")
        if response.status_code == 400 and "provisioned" in text.lower():
            raise ProvisionedDashboard("provisioned from files in Grafana (Cannot save provisioned dashboard); "
                                       "use `llmdash provision` for it instead of publish")
        if response.status_code in (400, 404) and "folder not found" in text.lower():
            raise GrafanaError(f"Grafana says folder {folder_uid!r} does not exist (400 folder not found)")
        raise self.http.fail(response, f"saving dashboard {uid}")

    def annotate(self, *, text: str, tags: list[str], time_ms: int) -> int:
        response = self.http.request("POST", "/api/annotations", {"time": time_ms, "tags": tags, "text": text},
                                     idempotent=False)
        if response.status_code != 200:
            raise self.http.fail(response, "posting the publish annotation")
        payload = self.http.json(response, "posting the publish annotation")
        return self.http.integer(payload.get("id", 0), "annotation id")

    @staticmethod
    def _status(response: requests.Response) -> str | None:
        """/api error bodies name their kind in `status` (version-mismatch, name-exists, ...)."""
        try:
            payload = response.json()
        except ValueError:
            return None
        return payload.get("status") if isinstance(payload, dict) else None
