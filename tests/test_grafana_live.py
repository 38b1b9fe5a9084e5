"""Opt-in: the publish contract against a real Grafana (CI has none; see docs/publishing.md).

Runs only when GRAFANA_URL is set, with GRAFANA_TOKEN or GRAFANA_USER/GRAFANA_PASSWORD.
It works in a throw-away folder `llmdash-test-<random>` on dashboards with test uids,
so the team's published dashboards are never touched, and deletes that folder at the end.
"""

from __future__ import annotations

import os
import uuid
from types import SimpleNamespace

import pytest

from llmdash.build import build_dashboards
from llmdash.config import Config
from llmdash.delivery.grafana import LegacyApi, resolve_connection
from llmdash.delivery.publish import PublishOptions, publish
from llmdash.errors import EXIT_DRIFT, EXIT_OK

pytestmark = [
    pytest.mark.publish,
    pytest.mark.skipif(not os.environ.get("GRAFANA_URL"),
                       reason="GRAFANA_URL is not set: live Grafana test is opt-in (see docs/publishing.md)"),
]


class CountingApi(LegacyApi):
    """Counts the calls that write, so 'the second publish writes nothing' is checked on the real server."""

    def __init__(self, connection):
        super().__init__(connection)
        self.writes = 0

    def create_folder(self, uid, title):
        self.writes += 1
        return super().create_folder(uid, title)

    def save_dashboard(self, dashboard, **kwargs):
        self.writes += 1
        return super().save_dashboard(dashboard, **kwargs)

    def delete_folder(self, uid: str) -> None:
        """Test clean-up only: DELETE removes every dashboard inside, so it targets our random folder."""
        response = self._request("DELETE", f"/api/folders/{uid}", idempotent=False)
        assert response.status_code in (200, 404), response.status_code


def test_publish_contract_against_real_grafana():
    defaults = SimpleNamespace(url=None, connect_timeout=5.0, read_timeout=30.0, verify_tls=True,
                               ca_cert=os.environ.get("GRAFANA_CA_CERT"))
    client = CountingApi(resolve_connection(defaults, os.environ))
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
        client.save_dashboard(edited, folder_uid=folder, version=live.version, overwrite=False, message="UI edit")
        lines: list[str] = []
        assert publish({"vllm": dashboard}, client, options, echo=lines.append) == EXIT_DRIFT
        assert "edited in the UI during an incident" in "\n".join(lines)

        forced = PublishOptions(folder_uid=folder, folder_title=options.folder_title, force=True)
        assert publish({"vllm": dashboard}, client, forced, echo=quiet.append) == EXIT_OK
        assert client.get_dashboard(dashboard["uid"]).dashboard.get("description") == dashboard["description"]
    finally:
        client.delete_folder(folder)


def live_dashboard(folder: str) -> dict:
    """The real vLLM dashboard under a test uid, so a shared Grafana's copy is left alone."""
    dashboard = build_dashboards(Config())["vllm"]
    return {**dashboard, "uid": f"{folder}-vllm", "title": f"{dashboard['title']} ({folder})"}
