"""`GrafanaBackend` over Grafana 12+'s resource API, `/apis/dashboard.grafana.app/<version>/namespaces/<ns>/dashboards`,
which Grafana 13 keeps developing while it deprecates `/api`.

The dashboard is the object's `spec`, its uid `metadata.name`, its folder the `grafana.app/folder`
annotation. Every update sends the `metadata.resourceVersion` read before it, so an edit made
in between is a 409 Conflict, the resource API's form of /api's 412 version-mismatch. Folders,
health and annotations stay on `/api`, which Grafana 12 and 13 still serve: this client hands
them to a `LegacyApi` over the same transport.
"""

from __future__ import annotations

from typing import Any

import requests

from llmdash.delivery.backend import (GrafanaError, RemoteDashboard, SavedDashboard, UnconfirmedSave,
                                      VersionMismatch, checked_model)
from llmdash.delivery.legacy_api import LegacyApi
from llmdash.delivery.transport import Transport

DASHBOARD_GROUP = "dashboard.grafana.app"
CLASSIC_VERSIONS = ("v1", "v1beta1")   # versions whose `spec` is the classic JSON model, preferred first
# Versions whose `spec` is the schema v2 model llmdash renders and checks (llmdash.dashboards.v2): `v2` only.
# v2beta1 (Grafana 12.x) spells transformations differently (dashboards/grafana_schema/README.md).
V2_VERSIONS = ("v2",)
FOLDER_ANNOTATION = "grafana.app/folder"
MESSAGE_ANNOTATION = "grafana.app/message"
MANAGER_ANNOTATION = "grafana.app/managedBy"


class ResourceApi:
    """`GrafanaBackend` over `/apis/dashboard.grafana.app/<api_version>/namespaces/<namespace>/dashboards`."""

    def __init__(self, transport: Transport, *, api_version: str, namespace: str):
        self.http = transport
        self.api_version = api_version
        self.namespace = namespace
        self.schema = "v2" if api_version in V2_VERSIONS else "v1"
        self.description = (f"/apis/{DASHBOARD_GROUP}/{api_version} (namespace {namespace}"
                            f"{', schema v2' if self.schema == 'v2' else ''})")
        self._collection = f"/apis/{DASHBOARD_GROUP}/{api_version}/namespaces/{namespace}/dashboards"
        self._legacy = LegacyApi(transport)
        self._folder_titles: dict[str, str] = {}

    def health(self) -> str:
        return self._legacy.health()

    def get_folder(self, uid: str) -> dict | None:
        return self._legacy.get_folder(uid)

    def create_folder(self, uid: str, title: str) -> dict:
        return self._legacy.create_folder(uid, title)

    def annotate(self, *, text: str, tags: list[str], time_ms: int) -> int:
        return self._legacy.annotate(text=text, tags=tags, time_ms=time_ms)

    def get_dashboard(self, uid: str) -> RemoteDashboard | None:
        response = self.http.request("GET", f"{self._collection}/{uid}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self.http.fail(response, f"reading dashboard {uid}")
        payload = self.http.json(response, f"reading dashboard {uid}")
        metadata, spec = payload.get("metadata"), payload.get("spec")
        metadata = metadata if isinstance(metadata, dict) else {}
        if not isinstance(spec, dict):
            raise GrafanaError(f"Grafana returned no dashboard spec for {uid}")
        # Kubernetes API conventions: a GET by name answers that object, metadata.name equal to the name asked
        # for, with a non-empty resourceVersion. Anything else is another object (a proxy's cache, a broken
        # server): deciding "unedited" from it, and writing with its resourceVersion, would overwrite an edit.
        if metadata.get("name") != uid:
            other = self.http.text(metadata.get("name"), 80)
            raise GrafanaError(f"Grafana answered the read of dashboard {uid} with "
                               f"{f'object {other!r}' if other else 'an object without metadata.name'}; "
                               "refusing to write over it")
        if not isinstance(metadata.get("resourceVersion"), str) or not metadata["resourceVersion"]:
            raise GrafanaError(f"Grafana answered the read of dashboard {uid} without a metadata.resourceVersion, "
                               "so an update could not be conditional; refusing to write over it")
        annotations = metadata.get("annotations") if isinstance(metadata.get("annotations"), dict) else {}
        folder_uid = self.http.text(annotations.get(FOLDER_ANNOTATION))
        # Grafana converts a dashboard stored in another version for this read and says so in
        # status.conversion (@grafana/schema dist/types/schema/dashboard/v2/types.status.gen.d.ts ConversionStatus).
        status = payload.get("status") if isinstance(payload.get("status"), dict) else {}
        conversion = status.get("conversion") if isinstance(status.get("conversion"), dict) else {}
        stored_version = self.http.text(conversion.get("storedVersion"), 20)
        return RemoteDashboard(
            dashboard=checked_model({**spec, "uid": uid}, uid),
            version=self.http.integer(metadata.get("generation") or 0, "dashboard generation"),
            folder_uid=folder_uid,
            folder_title=self._folder_title(folder_uid),
            # Any manager (file provisioning, Git Sync, Terraform, ...) owns the dashboard, not us.
            provisioned=bool(annotations.get(MANAGER_ANNOTATION)),
            resource_version=self.http.text(metadata.get("resourceVersion")),
            stored_version="" if stored_version == self.api_version else stored_version,
        )

    def save_dashboard(self, dashboard: dict, *, folder_uid: str, version: int, overwrite: bool,
                       message: str, resource_version: str = "") -> SavedDashboard:
        uid = dashboard.get("uid", "")
        # A v2 spec has no uid (it is metadata.name only); the classic model keeps its own.
        own = ("id", "version", "uid") if self.schema == "v2" else ("id", "version")
        spec = {key: value for key, value in dashboard.items() if key not in own}
        metadata: dict[str, Any] = {"name": uid, "annotations": {MESSAGE_ANNOTATION: message[:500]}}
        if folder_uid:
            metadata["annotations"][FOLDER_ANNOTATION] = folder_uid
        body = {"apiVersion": f"{DASHBOARD_GROUP}/{self.api_version}", "kind": "Dashboard", "metadata": metadata,
                "spec": spec}
        if resource_version:
            # Sent with --force too: it overwrites the edit publish saw, never one made after that read.
            metadata["resourceVersion"] = resource_version
            reply = self.http.send("PUT", f"{self._collection}/{uid}", body, idempotent=False)
        else:
            reply = self.http.send("POST", self._collection, body, idempotent=False)
        response = reply.response
        if response.status_code in (200, 201):
            saved = self.http.json(response, f"saving dashboard {uid}").get("metadata")
            saved = saved if isinstance(saved, dict) else {}
            return SavedDashboard(uid=self.http.text(saved.get("name")) or uid,
                                  version=self.http.integer(saved.get("generation") or 0, "saved generation"))
        text = self.http.message(response)
        if response.status_code == 409:
            conflict = f"409 {self._reason(response)}: {text}"
            if reply.lost:
                raise UnconfirmedSave(reply.lost, conflict)
            what = "created" if not resource_version else "changed"
            raise VersionMismatch(f"{what} in Grafana during this publish ({conflict}); re-run to see the diff")
        raise self.http.fail(response, f"saving dashboard {uid}")

    def _folder_title(self, uid: str) -> str:
        if not uid:
            return "General"
        if uid not in self._folder_titles:
            folder = self.get_folder(uid)
            self._folder_titles[uid] = self.http.text((folder or {}).get("title")) or uid
        return self._folder_titles[uid]

    def _reason(self, response: requests.Response) -> str:
        """A Kubernetes Status carries `reason` (Conflict, AlreadyExists, ...)."""
        try:
            payload = response.json()
        except ValueError:
            payload = None
        return (self.http.text(payload.get("reason"), 40) if isinstance(payload, dict) else "") or "Conflict"
