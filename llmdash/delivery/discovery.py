"""Which dashboard API to speak to a Grafana: `connect` asks it, and returns the backend that fits.

Grafana <= 11 only has `/api`; Grafana 12 and 13 also serve the resource API under `/apis`,
listed by Kubernetes-style discovery (`GET /apis`, an APIGroupList). Every answer read here
is type-checked, so a server that is not a Grafana ends in one GrafanaError line.
"""

from __future__ import annotations

from llmdash.delivery.backend import GrafanaBackend, GrafanaError
from llmdash.delivery.credentials import Connection
from llmdash.delivery.legacy_api import LegacyApi
from llmdash.delivery.resource_api import CLASSIC_VERSIONS, DASHBOARD_GROUP, V2_VERSIONS, ResourceApi
from llmdash.delivery.transport import Transport
from llmdash.errors import EXIT_USAGE, LlmdashError

API_CHOICES = ("auto", "legacy", "resource")
SCHEMA_CHOICES = ("auto", "v1", "v2")
DISCOVERY = "reading /apis (API discovery)"


def connect(connection: Connection, api: str = "auto", namespace: str | None = None, schema: str = "auto",
            **transport) -> GrafanaBackend:
    """The backend for this Grafana: `legacy` is /api; `resource` the /apis dashboard API (an error
    when Grafana does not offer it); `auto` the resource API where `GET /apis` lists
    dashboard.grafana.app with a classic-model version (v1, else v1beta1), else /api.

    `schema` is the dashboard model to publish: `v1` the classic one, as above; `v2` the schema v2 resource
    (dashboard.grafana.app/v2, an error when /apis does not list it or with `api` legacy); `auto` v2 where
    /apis lists it and `api` is not legacy, else as `v1`.

    Grafana <= 11 (by `/api/health`) is not asked for /apis at all. The namespace is `namespace`
    when given (Grafana Cloud: `stacks-<id>`), else `default` for org 1 and `org-<id>` otherwise.
    `transport` are Transport's keyword arguments (session, sleep, clock).
    """
    if api not in API_CHOICES:
        raise LlmdashError(f"--api must be one of {', '.join(API_CHOICES)}, got {api!r}", EXIT_USAGE)
    if schema not in SCHEMA_CHOICES:
        raise LlmdashError(f"--schema must be one of {', '.join(SCHEMA_CHOICES)}, got {schema!r}", EXIT_USAGE)
    if schema == "v2" and api == "legacy":
        raise LlmdashError("--schema v2 needs the resource API (/apis/dashboard.grafana.app/v2); "
                           "/api takes the classic model only: drop --api legacy or use --schema v1", EXIT_USAGE)
    http = Transport(connection, **transport)
    legacy = LegacyApi(http)
    if api == "legacy":
        return legacy
    major = _major(legacy.health())
    old = api == "auto" and schema != "v2" and major is not None and major < 12
    versions = [] if old else _dashboard_versions(http)
    v2 = next((v for v in V2_VERSIONS if v in versions), None)
    if schema == "v2" and v2 is None:
        offered = f"only {', '.join(http.text(v, 20) for v in versions)}" if versions else "no resource API"
        raise LlmdashError(f"--schema v2: Grafana at {http.where} offers {offered} for {DASHBOARD_GROUP} "
                           f"(needs {' or '.join(V2_VERSIONS)}, Grafana 13+); use --schema v1 or auto", EXIT_USAGE)
    if schema != "v1" and v2 is not None:
        return ResourceApi(http, api_version=v2, namespace=namespace or _org_namespace(http))
    chosen = next((v for v in CLASSIC_VERSIONS if v in versions), None)
    if chosen is None:
        if api == "auto":
            return legacy
        offered = f"only {', '.join(http.text(v, 20) for v in versions)}" if versions else "no resource API"
        raise LlmdashError(f"--api resource: Grafana at {http.where} offers {offered} for {DASHBOARD_GROUP} "
                           f"(needs {' or '.join(CLASSIC_VERSIONS)}, Grafana 12+); use --api legacy or auto",
                           EXIT_USAGE)
    return ResourceApi(http, api_version=chosen, namespace=namespace or _org_namespace(http))


def _major(version: str) -> int | None:
    """The major release in a version like 12.1.0; None when hidden or not a plain number (e.g. `²`)."""
    head = version.split(".", 1)[0]
    return int(head) if head.isascii() and head.isdigit() else None


def _dashboard_versions(http: Transport) -> list[str]:
    """Versions of dashboard.grafana.app in Kubernetes discovery (`GET /apis`, an APIGroupList)."""
    response = http.request("GET", "/apis")
    if response.status_code == 404:
        return []
    if response.status_code != 200:
        raise http.fail(response, DISCOVERY)
    groups = http.json(response, DISCOVERY).get("groups") or []
    if not isinstance(groups, list):
        raise _not_discovery(http, "groups", groups)
    versions = []
    for group in groups:
        if not isinstance(group, dict) or group.get("name") != DASHBOARD_GROUP:
            continue
        listed = group.get("versions") or []
        if not isinstance(listed, list):
            raise _not_discovery(http, f"{DASHBOARD_GROUP} versions", listed)
        versions += [v["version"] for v in listed if isinstance(v, dict) and isinstance(v.get("version"), str)]
    return versions


def _not_discovery(http: Transport, what: str, value: object) -> GrafanaError:
    return GrafanaError(f"Grafana at {http.where} answered /apis with {what} as a {type(value).__name__}, "
                        "not a list; is GRAFANA_URL a Grafana?")


def _org_namespace(http: Transport) -> str:
    """`default` for org 1, `org-<id>` otherwise (Grafana's /apis namespace convention)."""
    response = http.request("GET", "/api/org")
    if response.status_code != 200:
        raise http.fail(response, "reading the current organisation (/api/org)")
    org_id = http.json(response, "reading /api/org").get("id")
    if not isinstance(org_id, int) or isinstance(org_id, bool) or org_id < 1:
        raise GrafanaError(f"Grafana at {http.where} answered /api/org without an organisation id")
    return "default" if org_id == 1 else f"org-{org_id}"
