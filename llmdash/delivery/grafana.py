"""A small Grafana client behind an interface, so publish logic never speaks HTTP.

`GrafanaBackend` is what publish needs (health, folder, get, save, annotate).
`LegacyApi` implements it over the classic `/api/*` endpoints, which work on
Grafana 10-13; `ResourceApi` over the Grafana 12+ resource API
`/apis/dashboard.grafana.app/<v1|v1beta1>/namespaces/<ns>/dashboards`, which Grafana 13
keeps developing while it deprecates `/api`. `connect` picks one by discovery.

Secrets (token, password) live only in `Connection`, whose repr hides them, and
are scrubbed (with their base64, URL- and JSON-encoded forms) from every message
this module produces. Every request goes through `LegacyApi._request`, which
bounds it: a total deadline (connect + headers + body, enforced by shutting the
socket), a body cap, and TLS settings the environment cannot override.
"""

from __future__ import annotations

import base64
import math
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol
from urllib.parse import urlsplit

import requests
import urllib3

from llmdash import redact
from llmdash.errors import EXIT_DRIFT, EXIT_REMOTE, EXIT_USAGE, LlmdashError

MAX_BODY_BYTES = 16 * 1024 * 1024      # dashboards are ~100 KB; anything near this is not Grafana
MAX_TOKEN_FILE_BYTES = 64 * 1024
CA_BUNDLE_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


# ---------------------------------------------------------------- connection


@dataclass(frozen=True)
class Connection:
    """Everything needed to reach one Grafana; `token`/`password` never appear in repr."""

    url: str
    token: str | None = field(default=None, repr=False)
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    verify: bool | str = True          # False = --insecure, str = CA bundle path
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    deadline: float = 60.0             # seconds for one whole request: connect, headers and body
    retries: int = 3                   # extra attempts after the first one
    retry_budget: float = 30.0         # seconds; no retry starts after this
    backoff_base: float = 0.5          # first pause; doubles per retry

    @property
    def secrets(self) -> tuple[str, ...]:
        pair = f"{self.user}:{self.password}" if self.user and self.password else None
        return tuple(s for s in (self.token, self.password, pair) if s)

    @property
    def authorization(self) -> str | None:
        """The Authorization header; basic auth is UTF-8 encoded (requests would insist on Latin-1)."""
        if self.token:
            return f"Bearer {self.token}"
        if self.user:
            return "Basic " + base64.b64encode(f"{self.user}:{self.password or ''}".encode()).decode()
        return None

    def scrub(self, text: str) -> str:
        """`text` with every secret, in every encoding a server might echo it in, replaced by ***."""
        return redact.scrub(text, self.secrets)


def resolve_connection(
    settings: Any,
    env: Mapping[str, str],
    *,
    url: str | None = None,
    token_file: str | None = None,
    ca_cert: str | None = None,
    insecure: bool = False,
    connect_timeout: float | None = None,
    read_timeout: float | None = None,
    deadline: float | None = None,
    retries: int | None = None,
    backoff_base: float | None = None,
) -> Connection:
    """Merge config (`GrafanaSettings`), environment and flags; flags win, then env, then config.

    Credentials come only from a file or the environment, never from a command-line
    value, so they do not end up in shell history or `ps` output. TLS: --insecure or
    --ca-cert, then grafana.verify_tls/ca_cert, then REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE,
    then the system CAs; the choice is final (the session ignores the environment).
    """
    chosen_url = url or env.get("GRAFANA_URL") or getattr(settings, "url", None)
    if not chosen_url:
        raise LlmdashError("no Grafana URL: set GRAFANA_URL, grafana.url in the config, or --url", EXIT_USAGE)
    parts = urlsplit(chosen_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LlmdashError("Grafana URL must look like https://grafana.example.com[/sub-path]", EXIT_USAGE)
    if parts.username or parts.password:
        raise LlmdashError(
            "Grafana URL must not contain credentials; use GRAFANA_TOKEN, --token-file or GRAFANA_USER/GRAFANA_PASSWORD",
            EXIT_USAGE,
        )

    token = user = password = None
    if token_file:
        token = _read_token_file(token_file)
    elif env.get("GRAFANA_TOKEN", "").strip():
        token = env["GRAFANA_TOKEN"].strip()
        _check_token(token, "GRAFANA_TOKEN")
    elif env.get("GRAFANA_USER") or env.get("GRAFANA_PASSWORD"):
        user, password = env.get("GRAFANA_USER"), env.get("GRAFANA_PASSWORD")
        if not (user and password):
            raise LlmdashError("GRAFANA_USER and GRAFANA_PASSWORD must be set together", EXIT_USAGE)
    else:
        raise LlmdashError(
            "no Grafana credentials: set GRAFANA_TOKEN (service-account token), pass --token-file, "
            "or set GRAFANA_USER and GRAFANA_PASSWORD",
            EXIT_USAGE,
        )

    ca = ca_cert or getattr(settings, "ca_cert", None)
    if insecure and ca_cert:
        raise LlmdashError("--insecure and --ca-cert contradict each other; pass one", EXIT_USAGE)
    env_ca = next((env[name] for name in CA_BUNDLE_VARIABLES if env.get(name)), None)
    if insecure:
        verify: bool | str = False
    elif ca:
        if not os.path.isfile(ca):
            raise LlmdashError(f"CA certificate {ca} does not exist", EXIT_USAGE)
        verify = ca
    elif not getattr(settings, "verify_tls", True):
        verify = False
    elif env_ca:
        if not os.path.exists(env_ca):
            raise LlmdashError(f"CA bundle {env_ca} (from REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE) does not exist",
                               EXIT_USAGE)
        verify = env_ca
    else:
        verify = True

    def seconds(name: str, value: float | None, default: float) -> float:
        chosen = float(default if value is None else value)
        if not (math.isfinite(chosen) and chosen > 0):
            raise LlmdashError(f"{name} must be positive and finite (seconds), got {chosen:g}", EXIT_USAGE)
        return chosen

    backoff = Connection.backoff_base if backoff_base is None else float(backoff_base)
    if not (math.isfinite(backoff) and backoff >= 0):
        raise LlmdashError(f"--retry-backoff must be a finite number of seconds, got {backoff:g}", EXIT_USAGE)
    return Connection(
        url=chosen_url.rstrip("/"),
        token=token,
        user=user,
        password=password,
        verify=verify,
        connect_timeout=seconds("--connect-timeout / grafana.connect_timeout", connect_timeout,
                                getattr(settings, "connect_timeout", Connection.connect_timeout)),
        read_timeout=seconds("--read-timeout / grafana.read_timeout", read_timeout,
                             getattr(settings, "read_timeout", Connection.read_timeout)),
        deadline=seconds("--deadline / grafana.deadline", deadline,
                         getattr(settings, "deadline", Connection.deadline)),
        retries=Connection.retries if retries is None else max(0, retries),
        backoff_base=backoff,
    )


def _read_token_file(path: str) -> str:
    """The token in `path`: at most 64 KiB read (so /dev/zero cannot exhaust memory), UTF-8, one header-safe word."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_TOKEN_FILE_BYTES + 1)
    except OSError as exc:
        raise LlmdashError(f"cannot read --token-file {path}: {exc.strerror}", EXIT_USAGE) from None
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise LlmdashError(f"--token-file {path} is larger than 64 KiB; it should hold one token", EXIT_USAGE)
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise LlmdashError(f"--token-file {path} is not UTF-8 text", EXIT_USAGE) from None
    if not token:
        raise LlmdashError(f"--token-file {path} is empty", EXIT_USAGE)
    _check_token(token, f"--token-file {path}")
    return token


def _check_token(token: str, source: str) -> None:
    """A token travels in an HTTP header: printable ASCII without spaces (never echo it)."""
    if not (token.isascii() and token.isprintable()) or any(c.isspace() for c in token):
        raise LlmdashError(f"the token in {source} contains characters an HTTP header cannot carry "
                           "(non-ASCII, control characters or spaces); check that the file holds only the token",
                           EXIT_USAGE)


# ---------------------------------------------------------------- errors


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


# ---------------------------------------------------------------- interface


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


# ---------------------------------------------------------------- transport


class DeadlineExceeded(Exception):
    """The whole request (connect, headers, body) did not finish within `Connection.deadline`."""


class BodyTooLarge(Exception):
    """The answer grew past MAX_BODY_BYTES."""


class _Deadline:
    """The sockets of one request in flight; at the deadline a timer shuts them, which wakes a
    blocked recv (a per-read timeout restarts with every byte a trickling server sends)."""

    def __init__(self, seconds: float):
        self.sockets: list[socket.socket] = []
        self.expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        self.expired = True
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self) -> None:
        self._timer.cancel()


_in_flight = threading.local()     # .deadline: the _Deadline of this thread's current request


def _watch(sock) -> None:
    deadline = getattr(_in_flight, "deadline", None)
    if deadline is not None and sock is not None:
        deadline.sockets.append(sock)


class _WatchedConnection:
    """Registers each socket it opens or reuses with `_watch`."""

    def _new_conn(self):
        sock = super()._new_conn()
        _watch(sock)
        return sock

    def request(self, *args, **kwargs):
        _watch(self.sock)                        # None on a new connection: _new_conn registers it
        return super().request(*args, **kwargs)


class _HTTPConnection(_WatchedConnection, urllib3.connection.HTTPConnection):
    pass


class _HTTPSConnection(_WatchedConnection, urllib3.connection.HTTPSConnection):
    pass


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_WATCHED_POOLS = {"http": _HTTPPool, "https": _HTTPSPool}


class _DeadlineAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter with connections the deadline timer can shut (HTTP(S) proxies included)."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _WATCHED_POOLS

    def proxy_manager_for(self, proxy, **kwargs):
        manager = super().proxy_manager_for(proxy, **kwargs)
        if proxy.lower().startswith("http"):     # SOCKS pools have their own connection classes
            manager.pool_classes_by_scheme = _WATCHED_POOLS
        return manager


def _read_body(response: requests.Response, started: float, deadline: float, clock) -> None:
    """Read the streamed body into `response` (so .json()/.text work), bounded in time and size."""
    chunks, size = [], 0
    for chunk in response.iter_content(64 * 1024):
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            response.close()
            raise BodyTooLarge
        if clock() - started > deadline:
            response.close()
            raise DeadlineExceeded
        chunks.append(chunk)
    response._content = b"".join(chunks)        # what requests itself stores after reading a body


# ---------------------------------------------------------------- /api backend


class LegacyApi:
    """`GrafanaBackend` over the classic `/api/*` endpoints (Grafana's documented HTTP API)."""

    description = "/api (legacy dashboard API)"

    def __init__(self, connection: Connection, session: requests.Session | None = None,
                 sleep=time.sleep, clock=time.monotonic):
        self._conn = connection
        self._session = session or requests.Session()
        self._session.headers.update({"Accept": "application/json", "Content-Type": "application/json",
                                      "User-Agent": "llmdash"})
        if connection.authorization:
            self._session.headers["Authorization"] = connection.authorization
        # trust_env would let REQUESTS_CA_BUNDLE replace --ca-cert/--insecure and ~/.netrc replace the
        # token; resolve_connection already weighed the CA variables, and proxies are taken here.
        self._session.trust_env = False
        self._session.proxies = requests.utils.get_environ_proxies(connection.url)
        for prefix in ("http://", "https://"):
            self._session.mount(prefix, _DeadlineAdapter())
        self._sleep = sleep
        self._clock = clock
        parts = urlsplit(connection.url)
        self._where = f"{parts.scheme}://{parts.netloc}"

    # -- transport

    def _request(self, method: str, path: str, body: Any = None, *, idempotent: bool = True) -> requests.Response:
        """Send one request, retrying connection errors and 5xx with exponential backoff.

        Each attempt must finish (connect, headers, body of at most MAX_BODY_BYTES) within
        `deadline`; one that does not is not retried. A POST whose answer timed out is not
        retried: it may have been applied, and a second attempt would turn a success into a
        confusing version-mismatch.
        """
        started = self._clock()
        attempt = 0
        while True:
            failure: str
            try:
                response = self._attempt(method, path, body)
            except requests.exceptions.SSLError:
                raise GrafanaError(self._tls_message()) from None
            except BodyTooLarge:
                raise GrafanaError(f"Grafana at {self._where} answered {method} {path} with more than "
                                   f"{MAX_BODY_BYTES // 2**20} MiB; refusing to read further") from None
            except DeadlineExceeded:
                raise GrafanaError(self._deadline_message(method, path, idempotent)) from None
            except requests.exceptions.ConnectTimeout:
                failure = f"timed out connecting to Grafana at {self._where} after {self._conn.connect_timeout:g}s"
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as exc:
                # urllib3 reports a body that stalls mid-read as a ConnectionError "Read timed out".
                if isinstance(exc, requests.exceptions.ReadTimeout) or "timed out" in str(exc):
                    failure = self._read_timeout_message(method, path)
                    if not idempotent:
                        raise GrafanaError(failure + "; it may or may not have been applied") from None
                else:
                    failure = f"cannot reach Grafana at {self._where} (connection refused, reset or host unknown)"
            except requests.exceptions.RequestException as exc:
                raise GrafanaError(f"request to Grafana at {self._where} failed ({type(exc).__name__})") from None
            else:
                if response.status_code < 500:
                    return response
                failure = f"Grafana answered {response.status_code} to {method} {path}: {self._message(response)}"
            attempt += 1
            pause = self._conn.backoff_base * 2 ** (attempt - 1)
            if attempt > self._conn.retries or self._clock() - started + pause > self._conn.retry_budget:
                raise GrafanaError(self._scrub(f"{failure} (gave up after {attempt} attempts)"))
            self._sleep(pause)

    def _attempt(self, method: str, path: str, body: Any) -> requests.Response:
        """One request and its whole body, within the deadline; raises DeadlineExceeded past it."""
        started = time.monotonic()
        deadline = _in_flight.deadline = _Deadline(self._conn.deadline)
        try:
            response = self._session.request(
                method, self._conn.url + path, json=body, stream=True, verify=self._conn.verify,
                timeout=(self._conn.connect_timeout, self._conn.read_timeout),
            )
            _read_body(response, started, self._conn.deadline, time.monotonic)
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError, ValueError):
            if deadline.expired:
                raise DeadlineExceeded from None
            raise
        finally:
            deadline.cancel()
            _in_flight.deadline = None
        if deadline.expired:
            raise DeadlineExceeded
        return response

    def _deadline_message(self, method: str, path: str, idempotent: bool) -> str:
        applied = "" if idempotent else "; it may or may not have been applied"
        return (f"Grafana at {self._where} did not finish answering {method} {path} within the "
                f"{self._conn.deadline:g}s deadline (--deadline){applied}")

    def _tls_message(self) -> str:
        if self._conn.verify is False:
            return f"TLS handshake with {self._where} failed (verification was off); is it an https URL of a Grafana?"
        if isinstance(self._conn.verify, str):
            return (f"TLS verification failed for {self._where} with CA bundle {self._conn.verify}; "
                    "check that it signs Grafana's certificate")
        return (f"TLS verification failed for {self._where}; pass --ca-cert with your CA bundle "
                "(or --insecure to skip verification)")

    def _read_timeout_message(self, method: str, path: str) -> str:
        return f"Grafana at {self._where} did not answer {method} {path} within {self._conn.read_timeout:g}s"

    def _scrub(self, text: str) -> str:
        return self._conn.scrub(text)

    def _message(self, response: requests.Response) -> str:
        try:
            payload = response.json()
            text = payload.get("message") if isinstance(payload, dict) else None
        except ValueError:
            text = None
        return redact.safe_line(text or response.text or response.reason or "", self._conn.secrets)

    def _json(self, response: requests.Response, what: str) -> dict:
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise GrafanaError(f"{self._where} did not answer JSON while {what}; is GRAFANA_URL a Grafana?")
        return payload

    def _integer(self, value: Any, what: str) -> int:
        """A count or version from Grafana; anything but an integer (or its digits) is a protocol error."""
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 19:
            return int(value)
        raise GrafanaError(f"Grafana at {self._where} answered a {type(value).__name__} where the {what} "
                           "should be an integer; is GRAFANA_URL a Grafana?")

    def _text(self, value: Any) -> str:
        """A name or uid from Grafana, safe to print; non-strings count as missing."""
        return redact.safe_line(value, self._conn.secrets) if isinstance(value, str) else ""

    @staticmethod
    def _status(response: requests.Response) -> str | None:
        try:
            payload = response.json()
        except ValueError:
            return None
        return payload.get("status") if isinstance(payload, dict) else None

    def _fail(self, response: requests.Response, what: str) -> GrafanaError:
        """One readable line for an error status; never includes request headers."""
        code, message = response.status_code, self._message(response)
        if code == 401:
            return GrafanaError(f"Grafana rejected the credentials (401 {message or 'Unauthorized'}) while {what}; "
                                "check GRAFANA_TOKEN / --token-file or GRAFANA_USER/GRAFANA_PASSWORD")
        if code == 403:
            return GrafanaError(f"Grafana denied access (403 {message}) while {what}; the service account needs the "
                                "Editor role on the target folder")
        return GrafanaError(f"Grafana answered {code} ({message}) while {what}")

    # -- GrafanaBackend

    def health(self) -> str:
        response = self._request("GET", "/api/health")
        if response.status_code != 200:
            raise self._fail(response, "checking /api/health")
        payload = self._json(response, "checking /api/health")
        if payload.get("database") != "ok":
            database = redact.safe_line(payload.get("database"), self._conn.secrets, 60)
            raise GrafanaError(f"Grafana at {self._where} reports database {database!r}")
        version = payload.get("version")
        return redact.safe_line(version, self._conn.secrets, 60) if isinstance(version, (str, int, float)) else ""

    def get_folder(self, uid: str) -> dict | None:
        response = self._request("GET", f"/api/folders/{uid}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._fail(response, f"reading folder {uid}")
        return self._json(response, f"reading folder {uid}")

    def create_folder(self, uid: str, title: str) -> dict:
        response = self._request("POST", "/api/folders", {"uid": uid, "title": title}, idempotent=False)
        if response.status_code == 200:
            return self._json(response, f"creating folder {uid}")
        if response.status_code in (409, 412):
            # 409 on the legacy store, 412 on Kubernetes-backed Grafana: the uid exists already.
            existing = self.get_folder(uid)
            if existing is not None:
                return existing
            raise GrafanaError(f"folder uid {uid!r} is taken by a dashboard, not a folder; pick another folder uid")
        raise self._fail(response, f"creating folder {uid}")

    def get_dashboard(self, uid: str) -> RemoteDashboard | None:
        response = self._request("GET", f"/api/dashboards/uid/{uid}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._fail(response, f"reading dashboard {uid}")
        payload = self._json(response, f"reading dashboard {uid}")
        meta = payload.get("meta") or {}
        dashboard = payload.get("dashboard")
        if not isinstance(dashboard, dict) or not isinstance(meta, dict):
            raise GrafanaError(f"Grafana returned no dashboard model for {uid}")
        for key in ("panels", "tags"):
            if not isinstance(dashboard.get(key, []), list):
                raise GrafanaError(f"Grafana returned a malformed dashboard {uid}: {key} is not a list")
        return RemoteDashboard(
            dashboard=dashboard,
            version=self._integer(dashboard.get("version") or meta.get("version") or 0, f"version of {uid}"),
            folder_uid=self._text(meta.get("folderUid")),
            folder_title=self._text(meta.get("folderTitle")) or "General",
            provisioned=meta.get("provisioned") is True,
        )

    def save_dashboard(self, dashboard: dict, *, folder_uid: str, version: int, overwrite: bool,
                       message: str, resource_version: str = "") -> SavedDashboard:
        body = {"dashboard": {**dashboard, "id": None, "version": version}, "folderUid": folder_uid,
                "overwrite": overwrite, "message": message[:500]}
        response = self._request("POST", "/api/dashboards/db", body, idempotent=False)
        uid = dashboard.get("uid", "")
        if response.status_code == 200:
            payload = self._json(response, f"saving dashboard {uid}")
            return SavedDashboard(uid=self._text(payload.get("uid")) or uid,
                                  version=self._integer(payload.get("version", 0), f"saved version of {uid}"))
        status, text = self._status(response), self._message(response)
        if response.status_code == 412 and status == "version-mismatch":
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
        raise self._fail(response, f"saving dashboard {uid}")

    def annotate(self, *, text: str, tags: list[str], time_ms: int) -> int:
        response = self._request("POST", "/api/annotations", {"time": time_ms, "tags": tags, "text": text},
                                 idempotent=False)
        if response.status_code != 200:
            raise self._fail(response, "posting the publish annotation")
        return self._integer(self._json(response, "posting the publish annotation").get("id", 0), "annotation id")


# ---------------------------------------------------------------- /apis backend

DASHBOARD_GROUP = "dashboard.grafana.app"
CLASSIC_VERSIONS = ("v1", "v1beta1")   # versions whose `spec` is the classic JSON model, preferred first
FOLDER_ANNOTATION = "grafana.app/folder"
MESSAGE_ANNOTATION = "grafana.app/message"
MANAGER_ANNOTATION = "grafana.app/managedBy"
API_CHOICES = ("auto", "legacy", "resource")


class ResourceApi(LegacyApi):
    """`GrafanaBackend` over Grafana 12+'s `/apis/dashboard.grafana.app/<version>/namespaces/<ns>/dashboards`.

    The dashboard is the object's `spec`, its uid `metadata.name`, its folder the `grafana.app/folder`
    annotation. Every update sends the `metadata.resourceVersion` read before it, so an edit made
    in between is a 409 Conflict, the resource API's form of /api's 412 version-mismatch. Folders,
    health and annotations stay on `/api`, which Grafana 12 and 13 still serve.
    """

    def __init__(self, connection: Connection, *, api_version: str, namespace: str, **kwargs):
        super().__init__(connection, **kwargs)
        self.api_version = api_version
        self.namespace = namespace
        self.description = f"/apis/{DASHBOARD_GROUP}/{api_version} (namespace {namespace})"
        self._collection = f"/apis/{DASHBOARD_GROUP}/{api_version}/namespaces/{namespace}/dashboards"
        self._folder_titles: dict[str, str] = {}

    def get_dashboard(self, uid: str) -> RemoteDashboard | None:
        response = self._request("GET", f"{self._collection}/{uid}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._fail(response, f"reading dashboard {uid}")
        payload = self._json(response, f"reading dashboard {uid}")
        metadata, spec = payload.get("metadata"), payload.get("spec")
        metadata = metadata if isinstance(metadata, dict) else {}
        if not isinstance(spec, dict):
            raise GrafanaError(f"Grafana returned no dashboard spec for {uid}")
        annotations = metadata.get("annotations") if isinstance(metadata.get("annotations"), dict) else {}
        folder_uid = self._text(annotations.get(FOLDER_ANNOTATION))
        return RemoteDashboard(
            dashboard={**spec, "uid": self._text(metadata.get("name")) or uid},
            version=self._integer(metadata.get("generation") or 0, "dashboard generation"),
            folder_uid=folder_uid,
            folder_title=self._folder_title(folder_uid),
            # Any manager (file provisioning, Git Sync, Terraform, ...) owns the dashboard, not us.
            provisioned=bool(annotations.get(MANAGER_ANNOTATION)),
            resource_version=self._text(metadata.get("resourceVersion")),
        )

    def save_dashboard(self, dashboard: dict, *, folder_uid: str, version: int, overwrite: bool,
                       message: str, resource_version: str = "") -> SavedDashboard:
        uid = dashboard.get("uid", "")
        spec = {key: value for key, value in dashboard.items() if key not in ("id", "version")}
        metadata: dict[str, Any] = {"name": uid, "annotations": {MESSAGE_ANNOTATION: message[:500]}}
        if folder_uid:
            metadata["annotations"][FOLDER_ANNOTATION] = folder_uid
        body = {"apiVersion": f"{DASHBOARD_GROUP}/{self.api_version}", "kind": "Dashboard", "metadata": metadata,
                "spec": spec}
        if resource_version:
            # Sent with --force too: it overwrites the edit publish saw, never one made after that read.
            metadata["resourceVersion"] = resource_version
            response = self._request("PUT", f"{self._collection}/{uid}", body, idempotent=False)
        else:
            response = self._request("POST", self._collection, body, idempotent=False)
        if response.status_code in (200, 201):
            saved = self._json(response, f"saving dashboard {uid}").get("metadata")
            saved = saved if isinstance(saved, dict) else {}
            return SavedDashboard(uid=self._text(saved.get("name")) or uid,
                                  version=self._integer(saved.get("generation") or 0, "saved generation"))
        text = self._message(response)
        if response.status_code == 409:
            what = "created" if not resource_version else "changed"
            raise VersionMismatch(f"{what} in Grafana during this publish (409 {self._reason(response)}: {text}); "
                                  "re-run to see the diff")
        raise self._fail(response, f"saving dashboard {uid}")

    def _folder_title(self, uid: str) -> str:
        if not uid:
            return "General"
        if uid not in self._folder_titles:
            folder = self.get_folder(uid)
            self._folder_titles[uid] = self._text((folder or {}).get("title")) or uid
        return self._folder_titles[uid]

    @staticmethod
    def _reason(response: requests.Response) -> str:
        """A Kubernetes Status carries `reason` (Conflict, AlreadyExists, ...)."""
        try:
            payload = response.json()
        except ValueError:
            return "Conflict"
        return str(payload.get("reason") or "Conflict") if isinstance(payload, dict) else "Conflict"


def connect(connection: Connection, api: str = "auto", namespace: str | None = None, **kwargs) -> LegacyApi:
    """The backend for this Grafana: `legacy` is /api; `resource` the /apis dashboard API (an error
    when Grafana does not offer it); `auto` the resource API where `GET /apis` lists
    dashboard.grafana.app with a classic-model version (v1, else v1beta1), else /api.

    Grafana <= 11 (by `/api/health`) is not asked for /apis at all. The namespace is `namespace`
    when given (Grafana Cloud: `stacks-<id>`), else `default` for org 1 and `org-<id>` otherwise.
    """
    if api not in API_CHOICES:
        raise LlmdashError(f"--api must be one of {', '.join(API_CHOICES)}, got {api!r}", EXIT_USAGE)
    legacy = LegacyApi(connection, **kwargs)
    if api == "legacy":
        return legacy
    major = _major(legacy.health())
    versions = [] if api == "auto" and major is not None and major < 12 else _dashboard_versions(legacy)
    chosen = next((v for v in CLASSIC_VERSIONS if v in versions), None)
    if chosen is None:
        if api == "auto":
            return legacy
        offered = f"only {', '.join(versions)}" if versions else "no resource API"
        raise LlmdashError(f"--api resource: Grafana at {legacy._where} offers {offered} for {DASHBOARD_GROUP} "
                           f"(needs {' or '.join(CLASSIC_VERSIONS)}, Grafana 12+); use --api legacy or auto",
                           EXIT_USAGE)
    return ResourceApi(connection, api_version=chosen, namespace=namespace or _org_namespace(legacy), **kwargs)


def _major(version: str) -> int | None:
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _dashboard_versions(legacy: LegacyApi) -> list[str]:
    """Versions of dashboard.grafana.app in Kubernetes discovery (`GET /apis`, an APIGroupList)."""
    response = legacy._request("GET", "/apis")
    if response.status_code == 404:
        return []
    if response.status_code != 200:
        raise legacy._fail(response, "reading /apis (API discovery)")
    groups = legacy._json(response, "reading /apis (API discovery)").get("groups") or []
    return [v.get("version", "") for g in groups if isinstance(g, dict) and g.get("name") == DASHBOARD_GROUP
            for v in g.get("versions") or [] if isinstance(v, dict)]


def _org_namespace(legacy: LegacyApi) -> str:
    """`default` for org 1, `org-<id>` otherwise (Grafana's /apis namespace convention)."""
    response = legacy._request("GET", "/api/org")
    if response.status_code != 200:
        raise legacy._fail(response, "reading the current organisation (/api/org)")
    org_id = legacy._json(response, "reading /api/org").get("id")
    if not isinstance(org_id, int) or isinstance(org_id, bool) or org_id < 1:
        raise GrafanaError(f"Grafana at {legacy._where} answered /api/org without an organisation id")
    return "default" if org_id == 1 else f"org-{org_id}"
