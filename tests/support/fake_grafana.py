"""A fake Grafana HTTP API on 127.0.0.1 for publish tests (no Grafana can be installed in CI).

It reproduces only behaviour that Grafana's own sources document: every rule names the file of
the grafana/grafana repository (code under pkg/, or a page under docs/sources/) it follows, so a
reader can check it against upstream.
It records every request so tests can count writes, and can inject 5xx answers,
slow answers, answers sent after the request was applied (or a reset instead of one),
arbitrary payloads (a hostile or broken server), UI edits and file-provisioned dashboards.

By default it is a Grafana 11: `/api` only, `/apis` answers 404. With `resource_versions`
(e.g. ("v1beta1",) for 12.x, ("v1", "v1beta1", "v2beta1", "v2") for 13.x) it also serves the Grafana 12+
resource API for dashboards over the same store, as Grafana's dual-writing storage does, so a
dashboard saved through one API is read back through the other. Sources for that part are the
Grafana docs `docs/sources/developer-resources/api-reference/http-api/{apis,dashboard}.md` and
`pkg/apimachinery/utils/meta.go`; where those say nothing, the fake follows plain Kubernetes
apiserver semantics and its comment says "unconfirmed". Of the v2 versions it speaks `v2` only, whose spec
is the schema v2 model (@grafana/schema `dist/types/schema/dashboard/v2/`); each dashboard is stored in
the schema it was last written in, and a read in the other one is converted and says so in
`status.conversion` (`types.status.gen.d.ts` ConversionStatus).

`RawServer` is the other fake: a bare TCP server for answers no HTTP server library would send
(trickling headers, endless bodies).
"""

from __future__ import annotations

import base64
import copy
import json
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
# pkg/util/shortid_generator.go: uid characters and length.
UID_PATTERN = re.compile(r"^[a-zA-Z0-9\-_]*$")


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict
    body: object


@dataclass
class StoredDashboard:
    id: int
    model: dict
    version: int
    folder_uid: str
    provisioned: bool = False
    saves: int = 0          # rows written to dashboard_version; a no-op publish must not add any
    resource_version: int = 0   # metadata.resourceVersion on /apis: moves on every write, whichever API
    # The dashboard.grafana.app version it was last written through; /api writes the classic model,
    # recorded as v1beta1 (unconfirmed which v1 version Grafana records for a legacy save).
    stored_version: str = "v1beta1"


@dataclass
class Fault:
    method: str
    path: str
    status: int | None      # None = only delay
    delay: float
    times: int
    payload: object = None  # None = {"message": "Internal Server Error"}; a callable gets the Recorded request
    applied: bool = False   # carry the request out first, then answer with this fault
    reset: bool = False     # answer with a TCP reset instead of a response


@dataclass
class FakeGrafana:
    """State of one fake instance; start() binds a free port on 127.0.0.1."""

    tokens: dict = field(default_factory=lambda: {"glsa_good": "Editor"})    # token -> role
    users: dict = field(default_factory=lambda: {"admin": ("s3cret", "Admin")})  # user -> (password, role)
    version: str = "11.6.0"
    resource_versions: tuple = ()       # dashboard.grafana.app versions served under /apis; () = Grafana <= 11
    org_id: int = 1
    namespace_override: str | None = None   # Grafana Cloud: stacks-<id>, not derivable from the org id
    database: str = "ok"
    # A broken apiserver (or a proxy caching one): takes any metadata.resourceVersion on update, never 409
    ignores_resource_version: bool = False
    folders: dict = field(default_factory=dict)
    dashboards: dict = field(default_factory=dict)
    annotations: list = field(default_factory=list)
    requests: list = field(default_factory=list)
    faults: list = field(default_factory=list)
    _next_id: int = 1
    _next_rv: int = 100
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ---------------------------------------------------------- lifecycle

    def start(self, tls=None) -> "FakeGrafana":
        """Serve on a free port; `tls` (an ssl.SSLContext) makes it an https:// Grafana."""
        fake = self

        class Handler(_Handler):
            grafana = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self._scheme = "https" if tls is not None else "http"
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{self._scheme}://{host}:{port}"

    # ---------------------------------------------------------- test helpers

    @property
    def writes(self) -> list[Recorded]:
        return [r for r in self.requests if r.method in WRITE_METHODS]

    def fail(self, method: str, path: str, status: int = 503, times: int = 1, delay: float = 0.0,
             payload: object = None, applied: bool = False) -> None:
        """Answer the next `times` matching requests with `status` and `payload` (after `delay` seconds);
        with `applied`, the request takes effect first (a proxy or crash losing Grafana's answer)."""
        self.faults.append(Fault(method, path, status, delay, times, payload, applied))

    def reset(self, method: str, path: str, times: int = 1, applied: bool = True) -> None:
        """Drop the connection with a TCP reset instead of answering (after applying, by default)."""
        self.faults.append(Fault(method, path, None, 0.0, times, applied=applied, reset=True))

    def slow(self, method: str, path: str, delay: float, times: int = 1) -> None:
        self.faults.append(Fault(method, path, None, delay, times))

    def add_folder(self, uid: str, title: str) -> None:
        self.folders[uid] = {"id": self._new_id(), "uid": uid, "title": title, "version": 1}

    def ui_save(self, uid: str, edit) -> None:
        """What the dashboard Save button does: the edited model is stored with version + 1."""
        stored = self.dashboards[uid]
        model = copy.deepcopy(stored.model)
        edit(model)
        stored.model = model
        stored.version += 1
        stored.saves += 1
        self.touch(stored)

    def touch(self, stored: "StoredDashboard") -> None:
        """A new resourceVersion, as every write to the storage gives (apis.md: "changes whenever any
        part of the resource changes")."""
        self._next_rv += 1
        stored.resource_version = self._next_rv

    @property
    def apis_namespace(self) -> str:
        """apis.md: org 1 is `default`, org n is `org-n`; Grafana Cloud stacks are `stacks-<id>`."""
        if self.namespace_override:
            return self.namespace_override
        return "default" if self.org_id == 1 else f"org-{self.org_id}"

    def provision(self, dashboard: dict, folder_uid: str = "") -> None:
        """A file-provisioned dashboard whose provider has allowUiUpdates: false
        (docs/sources/administration/provisioning/index.md, pkg/services/provisioning/dashboards/file_reader.go)."""
        model = copy.deepcopy(dashboard)
        self.dashboards[model["uid"]] = StoredDashboard(self._new_id(), model, 1, folder_uid, provisioned=True)
        self.touch(self.dashboards[model["uid"]])

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _major_minor(self) -> tuple[int, int]:
        major, minor = self.version.split(".")[:2]
        return int(major), int(minor)


class _Handler(BaseHTTPRequestHandler):
    grafana: FakeGrafana
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True           # headers and body go out in separate writes

    def log_message(self, *args) -> None:       # keep pytest output clean
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # ---------------------------------------------------------- plumbing

    def _dispatch(self, method: str) -> None:
        g = self.grafana
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = urlsplit(self.path).path
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = ValueError
        recorded = Recorded(method, self.path, dict(self.headers), body)
        with g._lock:
            g.requests.append(recorded)
            fault = next((f for f in g.faults if f.method == method and path.startswith(f.path) and f.times > 0), None)
            if fault:
                fault.times -= 1
        if fault and not fault.applied:
            time.sleep(fault.delay)
            if fault.reset:
                return self._reset()
            if fault.status is not None:
                # pkg/api/dashboard.go: an unexpected failure is a 500 "Failed to save dashboard";
                # a proxy in front of Grafana answers 502/503/504 with whatever body it likes.
                return self._send(fault.status, _fault_payload(fault, recorded))
        with g._lock:
            status, payload = self._route(method, path, body)
        if fault and fault.applied:
            if fault.reset:
                return self._reset()
            status, payload = fault.status, _fault_payload(fault, recorded)
        self._send(status, payload)

    def _reset(self) -> None:
        """Close with SO_LINGER 0, so the client sees ECONNRESET rather than a clean end."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def _send(self, status: int, payload) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass                                  # the client timed out and left

    def _role(self) -> str | None:
        """Bearer service-account token or basic auth; anything else is anonymous
        (docs/sources/developer-resources/api-reference/http-api/authentication.md)."""
        g = self.grafana
        header = self.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            return g.tokens.get(header[len("Bearer "):])
        if header.startswith("Basic "):
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            known = g.users.get(user)
            return known[1] if known and known[0] == password else None
        return None

    # ---------------------------------------------------------- routes

    def _route(self, method: str, path: str, body):
        g = self.grafana
        if path == "/api/health" and method in ("GET", "HEAD"):
            # pkg/api/health.go: unauthenticated; 503 when the DB probe fails.
            payload = {"commit": "fake", "database": g.database, "version": g.version}
            return (200 if g.database == "ok" else 503), payload

        role = self._role()
        if role is None:
            # 401 without valid credentials, in the body shape current Grafana sends (messageId auth.unauthorized).
            return 401, {"message": "Unauthorized", "messageId": "auth.unauthorized", "statusCode": 401}
        if body is ValueError:
            # pkg/api/dashboard.go: a body that does not bind is 400 "bad request data".
            return 400, {"message": "bad request data"}
        can_write = role in ("Editor", "Admin")

        if path.startswith("/api/folders"):
            return self._folders(method, path, body, can_write)
        if path == "/api/org" and method == "GET":
            # pkg/api/org.go getCurrentOrg: the signed-in (service account's) org.
            return 200, {"id": g.org_id, "name": "Main Org." if g.org_id == 1 else f"Org {g.org_id}",
                         "address": {}}
        if path == "/apis" or path.startswith("/apis/"):
            if not g.resource_versions:
                return 404, {"message": "Not found"}     # Grafana <= 11: no apiserver behind /apis
            return _ResourceApi(g, can_write).route(method, path, body)
        if method == "GET" and path.startswith("/api/dashboards/uid/"):
            return self._get_dashboard(path.rsplit("/", 1)[1])
        if method == "POST" and path == "/api/dashboards/db":
            if not can_write:
                # pkg/api/apierrors/dashboard.go: 403 "Access denied to save dashboard".
                return 403, {"message": "Access denied to save dashboard"}
            return self._save_dashboard(body or {})
        if method == "POST" and path == "/api/annotations":
            # pkg/api/annotations.go: needs annotations:create; text required.
            if not can_write:
                return 403, {"message": "Access denied"}
            if not (body or {}).get("text"):
                return 400, {"message": "Failed to save annotation"}
            g.annotations.append(body)
            return 200, {"message": "Annotation added", "id": len(g.annotations)}
        return 404, {"message": "Not found"}

    def _folders(self, method: str, path: str, body, can_write: bool):
        # pkg/api/folder.go, pkg/api/apierrors/folder.go.
        g = self.grafana
        if method == "GET" and path.startswith("/api/folders/"):
            folder = g.folders.get(path.rsplit("/", 1)[1])
            if folder is None:
                return 404, {"status": "not-found", "message": "folder not found"}
            return 200, {**folder, "url": f"/dashboards/f/{folder['uid']}/", "parentUid": "", "canSave": can_write}
        if method == "POST" and path == "/api/folders":
            if not can_write:
                return 403, {"message": "Access denied"}
            uid, title = body.get("uid") or f"f{g._new_id()}", (body.get("title") or "").strip()
            if not title:
                return 400, {"message": "folder title cannot be empty"}
            if uid in g.folders or uid in g.dashboards:
                # Dashboards and folders share one uid namespace. Legacy store: 409; newest
                # Kubernetes-backed code (ToFolderErrorResponse) maps AlreadyExists to 412.
                if g._major_minor() >= (12, 0):
                    return 412, {"status": "version-mismatch", "message": "the folder has been changed by someone else"}
                return 409, {"message": "a folder/dashboard with the same uid already exists"}
            g.add_folder(uid, title)
            return 200, {**g.folders[uid], "url": f"/dashboards/f/{uid}/"}
        if method == "DELETE" and path.startswith("/api/folders/"):
            # DELETE /api/folders/:uid deletes every dashboard inside (pkg/api/folder.go).
            uid = path.rsplit("/", 1)[1]
            if uid not in g.folders:
                return 404, {"status": "not-found", "message": "folder not found"}
            if not can_write:
                return 403, {"message": "Access denied"}
            del g.folders[uid]
            for dashboard_uid in [d for d, s in g.dashboards.items() if s.folder_uid == uid]:
                del g.dashboards[dashboard_uid]
            return 200, {"message": "Folder deleted"}
        return 404, {"message": "Not found"}

    def _get_dashboard(self, uid: str):
        # pkg/api/dashboard.go + pkg/api/dtos/dashboard.go: stored JSON with
        # id/uid/version overwritten from the DB row, and a meta block.
        g = self.grafana
        stored = g.dashboards.get(uid)
        if stored is None:
            return 404, {"message": "Dashboard not found"}
        folder = g.folders.get(stored.folder_uid)
        model = {**copy.deepcopy(stored.model), "id": stored.id, "uid": uid, "version": stored.version}
        meta = {
            "type": "db", "canSave": True, "canEdit": True, "slug": _slug(model.get("title", "")),
            "url": f"/d/{uid}/{_slug(model.get('title', ''))}", "version": stored.version,
            "folderId": folder["id"] if folder else 0, "folderUid": stored.folder_uid,
            "folderTitle": folder["title"] if folder else "General",
            # meta.provisioned is true only for file-provisioned dashboards with allowUiUpdates: false.
            "provisioned": stored.provisioned,
            "provisionedExternalId": f"{uid}.json" if stored.provisioned else "",
        }
        return 200, {"dashboard": model, "meta": meta}

    def _save_dashboard(self, body: dict):
        # pkg/api/dashboard.go postDashboard; SaveDashboardCommand in pkg/services/dashboards/models.go;
        # errors from pkg/services/dashboards/errors.go via pkg/api/apierrors/dashboard.go.
        g = self.grafana
        model = body.get("dashboard")
        if not isinstance(model, dict):
            return 400, {"message": "bad request data"}
        if len(body.get("message") or "") > 500:
            return 400, {"message": "message too long, max 500 characters"}
        uid, dash_id = model.get("uid"), model.get("id")
        if isinstance(dash_id, int) and dash_id > 0 and not any(d.id == dash_id for d in g.dashboards.values()):
            # A numeric id that does not exist is a 404 (the classic "exported from elsewhere" bug).
            return 404, {"status": "not-found", "message": "Dashboard not found"}
        if uid is not None and (not UID_PATTERN.match(uid)):
            return 400, {"message": "uid contains illegal characters"}
        if uid is not None and len(uid) > 40:
            return 400, {"message": "uid too long, max 40 characters"}
        title = (model.get("title") or "").strip()
        if not title:
            return 400, {"status": "empty-name", "message": "Dashboard title cannot be empty"}
        if uid in g.folders:
            return 400, {"message": "Dashboard cannot be changed to a folder"}
        # docs/sources/developers/http_api/dashboard.md: the folder comes only from the request;
        # without folderUid the dashboard lands in (or moves to) the root.
        folder_uid = body.get("folderUid") or ""
        if folder_uid and folder_uid not in g.folders:
            # ToDashboardErrorResponse maps ErrFolderNotFound to 400, not 404.
            return 400, {"message": "folder not found"}
        existing = g.dashboards.get(uid) if uid else None
        if existing and existing.provisioned:
            # pkg/services/provisioning/dashboards/file_reader.go, provider allowUiUpdates: false.
            return 400, {"message": "Cannot save provisioned dashboard"}
        if g._major_minor() <= (11, 2):
            # Grafana <= 11.2 only (removed by grafana/grafana PR #90687): titles unique per folder.
            for other_uid, other in g.dashboards.items():
                if other_uid != uid and other.folder_uid == folder_uid and other.model.get("title") == title:
                    return 412, {"status": "name-exists",
                                 "message": "A dashboard with the same name in the folder already exists"}
        if existing:
            sent_version = model.get("version")
            if sent_version != existing.version and not body.get("overwrite"):
                # Optimistic concurrency: stale version without overwrite -> 412 version-mismatch.
                return 412, {"status": "version-mismatch", "message": "The dashboard has been changed by someone else"}
            # Each save writes a new version row, even for identical JSON.
            existing.model = _stored(model, title)
            existing.stored_version = "v1beta1"
            existing.version += 1
            existing.folder_uid = folder_uid
            existing.saves += 1
            g.touch(existing)
            stored = existing
        else:
            uid = uid or f"gen{g._new_id()}"
            stored = StoredDashboard(g._new_id(), _stored({**model, "uid": uid}, title), 1, folder_uid, saves=1)
            g.touch(stored)
            g.dashboards[uid] = stored
        slug = _slug(title)
        return 200, {"status": "success", "slug": slug, "version": stored.version, "id": stored.id, "uid": uid,
                     "url": f"/d/{uid}/{slug}", "folderUid": folder_uid}


def _fault_payload(fault: Fault, request: Recorded):
    if callable(fault.payload):
        return fault.payload(request)
    return {"message": "Internal Server Error"} if fault.payload is None else fault.payload


def _stored(model: dict, title: str) -> dict:
    """The legacy SQL store keeps the JSON verbatim apart from id/uid/version/title
    (pkg/services/dashboards/models.go)."""
    kept = copy.deepcopy(model)
    kept.pop("id", None)
    kept.pop("version", None)
    kept["title"] = title
    return kept


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


GROUP = "dashboard.grafana.app"


def _status(code: int, reason: str, message: str, name: str = "") -> tuple[int, dict]:
    """A Kubernetes `Status` body, what the apiserver answers for every error (k8s-generic; exact
    messages unconfirmed for Grafana)."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
    if name:
        body["details"] = {"name": name, "group": GROUP, "kind": "dashboards"}
    return code, body


class _ResourceApi:
    """/apis/dashboard.grafana.app/<version>/namespaces/<ns>/dashboards[/<name>] over the fake's store."""

    def __init__(self, grafana: FakeGrafana, can_write: bool):
        self.g = grafana
        self.can_write = can_write

    def route(self, method: str, path: str, body):
        g = self.g
        if path == "/apis" and method == "GET":
            # Kubernetes discovery, an APIGroupList (apis.md; the exact list per release is unconfirmed).
            versions = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in g.resource_versions]
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": "folder.grafana.app", "versions": [{"groupVersion": "folder.grafana.app/v1beta1",
                                                             "version": "v1beta1"}],
                 "preferredVersion": {"groupVersion": "folder.grafana.app/v1beta1", "version": "v1beta1"}},
                {"name": GROUP, "versions": versions, "preferredVersion": versions[0]}]}
        match = re.fullmatch(rf"/apis/{re.escape(GROUP)}/([^/]+)/namespaces/([^/]+)/dashboards(?:/([^/]+))?", path)
        if not match or match.group(1) not in g.resource_versions or match.group(1) in ("v2alpha1", "v2beta1"):
            # v2alpha1/v2beta1 carry earlier drafts of the v2 schema: this fake does not speak them.
            return _status(404, "NotFound", "the server could not find the requested resource")
        version, namespace, name = match.groups()
        if namespace != g.apis_namespace:
            # Unconfirmed: Grafana refuses a namespace other than the caller's org; Kubernetes would 403.
            return _status(403, "Forbidden", f"namespace {namespace!r} does not match the requester's org")
        if method == "GET" and name:
            stored = g.dashboards.get(name)
            if stored is None:
                return _status(404, "NotFound", f'dashboards.{GROUP} "{name}" not found', name)
            return 200, self._object(version, name, stored)
        if method in ("POST", "PUT") and not self.can_write:
            # apis.md / dashboard.md: dashboards:create / dashboards:write needed; a k8s Forbidden Status.
            return _status(403, "Forbidden", "dashboards is forbidden: the caller cannot write dashboards")
        if method == "POST" and not name:
            return self._create(version, body or {})
        if method == "PUT" and name:
            return self._update(version, name, body or {})
        return _status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    def _object(self, version: str, name: str, stored: StoredDashboard) -> dict:
        """dashboard.md: metadata with name, resourceVersion, generation, annotations; `spec` is the
        classic model (on v1/v1beta1). Whether spec keeps `uid`/`version` is unconfirmed: kept."""
        annotations = {"grafana.app/createdBy": "service-account:fake"}
        if stored.folder_uid:
            annotations["grafana.app/folder"] = stored.folder_uid
        if stored.provisioned:
            # pkg/apimachinery/utils/meta.go + manager.go: file-provisioned dashboards carry the manager.
            annotations.update({"grafana.app/managedBy": "classic-file-provisioning",
                                "grafana.app/managerId": "llmdash", "grafana.app/sourcePath": f"{name}.json"})
        spec, status = self._spec(version, name, stored)
        return {"kind": "Dashboard", "apiVersion": f"{GROUP}/{version}",
                "metadata": {"name": name, "namespace": self.g.apis_namespace, "uid": f"k8s-{stored.id}",
                             "resourceVersion": str(stored.resource_version), "generation": stored.version,
                             "labels": {"grafana.app/deprecatedInternalID": str(stored.id)},
                             "annotations": annotations},
                "spec": spec, "status": status}

    def _spec(self, version: str, name: str, stored: StoredDashboard) -> tuple[dict, dict]:
        """The stored model in the schema of `version`. Read in the other schema, Grafana converts it and
        reports `status.conversion.storedVersion` (@grafana/schema dist/types/schema/dashboard/v2/
        types.status.gen.d.ts ConversionStatus). Its converter (apps/dashboard/pkg/migration/conversion) is
        not reproduced: v1 -> v2 uses llmdash's own (unconfirmed that Grafana's output is the same), and
        v2 -> v1 keeps only title, description and tags (unconfirmed; Grafana rebuilds the panels)."""
        model = copy.deepcopy(stored.model)
        if _family(version) == _family(stored.stored_version):
            return (model if _family(version) == "v2" else {**model, "uid": name, "version": stored.version}), {}
        conversion = {"failed": False, "storedVersion": stored.stored_version}
        if _family(version) == "v1":
            return ({key: model[key] for key in ("title", "description", "tags") if key in model}
                    | {"uid": name, "version": stored.version, "panels": []}), {"conversion": conversion}
        from llmdash.dashboards.v2 import to_v2

        return to_v2({**model, "uid": name})["spec"], {"conversion": conversion}

    def _folder(self, body: dict):
        folder = ((body.get("metadata") or {}).get("annotations") or {}).get("grafana.app/folder") or ""
        if folder and folder not in self.g.folders:
            # Unconfirmed: an unknown folder annotation is refused; 400 BadRequest as /api does.
            return None, _status(400, "BadRequest", f"folder {folder!r} not found")
        return folder, None

    def _create(self, version: str, body: dict):
        g = self.g
        name, spec = (body.get("metadata") or {}).get("name"), body.get("spec")
        if not name or not isinstance(spec, dict):
            return _status(400, "BadRequest", "metadata.name and spec are required")
        if name in g.dashboards:
            # dashboard.md: 409 Conflict when a dashboard with the same uid already exists.
            return _status(409, "AlreadyExists", f'dashboards.{GROUP} "{name}" already exists', name)
        folder, error = self._folder(body)
        if error:
            return error
        stored = StoredDashboard(g._new_id(), _resource_spec(version, name, spec), 1, folder, saves=1,
                                 stored_version=version)
        g.touch(stored)
        g.dashboards[name] = stored
        return 201, self._object(version, name, stored)     # dashboard.md status list: 201 Created

    def _update(self, version: str, name: str, body: dict):
        g = self.g
        metadata, spec = body.get("metadata") or {}, body.get("spec")
        if metadata.get("name") != name or not isinstance(spec, dict):
            return _status(400, "BadRequest", "the name in the body does not match the URL, or spec is missing")
        stored = g.dashboards.get(name)
        if stored is None:
            # Unconfirmed: Kubernetes semantics, no create-on-update.
            return _status(404, "NotFound", f'dashboards.{GROUP} "{name}" not found', name)
        sent = metadata.get("resourceVersion")
        if not sent:
            # Unconfirmed for Grafana (AllowUnconditionalUpdate); Kubernetes' default refuses.
            return _status(422, "Invalid", "metadata.resourceVersion: Invalid value: 0x0: must be specified "
                                           "for an update", name)
        if sent != str(stored.resource_version) and not g.ignores_resource_version:
            # apis.md: resourceVersion is for optimistic concurrency; a stale one is a 409 Conflict.
            return _status(409, "Conflict", f'Operation cannot be fulfilled on dashboards.{GROUP} "{name}": the '
                                            "object has been modified; please apply your changes to the latest "
                                            "version and try again", name)
        folder, error = self._folder(body)
        if error:
            return error
        stored.model = _resource_spec(version, name, spec)
        stored.stored_version = version
        stored.version += 1
        stored.saves += 1
        stored.folder_uid = folder
        g.touch(stored)
        return 200, self._object(version, name, stored)


def _family(version: str) -> str:
    return "v2" if version.startswith("v2") else "v1"


def _resource_spec(version: str, name: str, spec: dict) -> dict:
    """What the store keeps of a resource's spec: a v2 spec verbatim (it has no uid: the name is the
    uid), a classic one as /api keeps it."""
    if _family(version) == "v2":
        return copy.deepcopy(spec)
    return _stored({**spec, "uid": name}, spec.get("title", ""))


class RawServer:
    """A TCP server on 127.0.0.1 that runs `serve(conn)` for each connection: for answers no
    well-behaved HTTP server library would send."""

    def __init__(self, serve):
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._serve = serve
        self._stop = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    @property
    def port(self) -> int:
        return self._listener.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "RawServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)                    # the request; its content does not matter here
            try:
                self._serve(conn, self._stop)
            except OSError:                     # the client gave up: what the test wants
                pass

    def close(self) -> None:
        """Stop accepting before the descriptor is freed: a thread still in accept() on a reused
        descriptor number would steal the next test's connections."""
        self._stop.set()
        self._listener.shutdown(socket.SHUT_RDWR)     # wakes the blocked accept()
        self._acceptor.join()
        self._listener.close()
