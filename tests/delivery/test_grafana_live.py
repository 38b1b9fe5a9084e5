"""Opt-in: the publish contract against a real Grafana (CI has none; see docs/publishing-and-grafana-versions.md).

Runs only when GRAFANA_URL is set, with GRAFANA_TOKEN or GRAFANA_USER/GRAFANA_PASSWORD, once
through /api and once through the resource API /apis/dashboard.grafana.app (skipped, saying so,
when the server does not offer it: Grafana <= 11). GRAFANA_NAMESPACE overrides the resource API
namespace (Grafana Cloud: stacks-<id>). It works in a throw-away folder `llmdash-test-<random>` on
dashboards with test uids, so the team's published dashboards are never touched, and deletes that folder at the end.
"""

from __future__ import annotations

import os
import uuid
from types import SimpleNamespace

import pytest

from llmdash.build import build_dashboards
from llmdash.config import Config
from llmdash.delivery.backend import VersionMismatch
from llmdash.delivery.credentials import resolve_connection
from llmdash.delivery.discovery import connect
from llmdash.delivery.legacy_api import LegacyApi
from llmdash.delivery.resource_api import ResourceApi
from llmdash.delivery.transport import Transport
from llmdash.delivery.publish import PublishOptions, publish
from llmdash.errors import EXIT_DRIFT, EXIT_OK

pytestmark = [
    pytest.mark.publish,
    pytest.mark.skipif(not os.environ.get("GRAFANA_URL"),
                       reason="GRAFANA_URL is not set: live Grafana test is opt-in "
                              "(see docs/publishing-and-grafana-versions.md#tests)"),
]


class Counting:
    """Counts the calls that write, so 'the second publish writes nothing' is checked on the real server."""

    writes = 0

    def create_folder(self, uid, title):
        self.writes += 1
        return super().create_folder(uid, title)

    def save_dashboard(self, dashboard, **kwargs):
        self.writes += 1
        return super().save_dashboard(dashboard, **kwargs)

    def delete_folder(self, uid: str) -> None:
        """Test clean-up only: DELETE removes every dashboard inside, so it targets our random folder."""
        response = self.http.request("DELETE", f"/api/folders/{uid}", idempotent=False)
        assert response.status_code in (200, 404), response.status_code


class CountingLegacy(Counting, LegacyApi):
    pass


class CountingResource(Counting, ResourceApi):
    pass


def live_client(api: str):
    defaults = SimpleNamespace(url=None, connect_timeout=5.0, read_timeout=30.0, verify_tls=True,
                               ca_cert=os.environ.get("GRAFANA_CA_CERT"))
    connection = resolve_connection(defaults, os.environ)
    chosen = connect(connection, "auto", os.environ.get("GRAFANA_NAMESPACE"))
    if api == "legacy":
        return CountingLegacy(Transport(connection))
    if not isinstance(chosen, ResourceApi):
        pytest.skip("this Grafana does not offer /apis/dashboard.grafana.app v1 or v1beta1 (Grafana <= 11)")
    return CountingResource(Transport(connection), api_version=chosen.api_version, namespace=chosen.namespace)


@pytest.mark.parametrize("api", ["legacy", "resource"])
def test_publish_contract_against_real_grafana(api):
    client = live_client(api)
    folder = f"llmdash-test-{uuid.uuid4().hex[:8]}"
    options = PublishOptions(folder_uid=folder, folder_title=f"llmdash test {folder}")
    dashboard = live_dashboard(folder)
    quiet = []
    try:
        assert publish({"vllm": dashboard}, client, options, echo=quiet.append) == EXIT_OK
        writes = client.writes
        assert publish({"vllm": dashboard}, client, options, echo=quiet.append) == EXIT_OK
        assert client.writes == writes, "second publish wrote to Grafana"

        live = client.get_dashboard(dashboard["uid"])
        edited = {**live.dashboard, "description": "edited in the UI during an incident"}
        client.save_dashboard(edited, folder_uid=folder, version=live.version, overwrite=False, message="UI edit",
                              resource_version=live.resource_version)
        lines: list[str] = []
        assert publish({"vllm": dashboard}, client, options, echo=lines.append) == EXIT_DRIFT
        assert "edited in the UI during an incident" in "\n".join(lines)

        # An edit after our read: Grafana itself must refuse the stale write (412 on /api, 409 on /apis).
        stale = client.get_dashboard(dashboard["uid"])
        client.save_dashboard({**stale.dashboard, "description": "second edit"}, folder_uid=folder,
                              version=stale.version, overwrite=False, message="UI edit",
                              resource_version=stale.resource_version)
        with pytest.raises(VersionMismatch):
            client.save_dashboard({**stale.dashboard, "description": "lost update"}, folder_uid=folder,
                                  version=stale.version, overwrite=False, message="stale",
                                  resource_version=stale.resource_version)

        forced = PublishOptions(folder_uid=folder, folder_title=options.folder_title, force=True)
        assert publish({"vllm": dashboard}, client, forced, echo=quiet.append) == EXIT_OK
        assert client.get_dashboard(dashboard["uid"]).dashboard.get("description") == dashboard["description"]
    finally:
        client.delete_folder(folder)


def live_dashboard(folder: str) -> dict:
    """The real vLLM dashboard under a test uid, so a shared Grafana's copy is left alone."""
    dashboard = build_dashboards(Config())["vllm"]
    return {**dashboard, "uid": f"{folder}-vllm", "title": f"{dashboard['title']} ({folder})"}
