"""Publish in schema v2 through dashboard.grafana.app/v2 (Grafana 13), against the fake Grafana's v2 endpoints
(tests/support/fake_grafana.py names what each answer follows)."""

from __future__ import annotations

import pytest
import requests
from click.testing import CliRunner

from llmdash.cli.delivery import publish_command
from llmdash.delivery.credentials import Connection
from llmdash.delivery.discovery import connect
from llmdash.delivery.publish import publish
from llmdash.delivery.resource_api import ResourceApi
from llmdash.errors import EXIT_DRIFT, EXIT_OK, EXIT_USAGE, LlmdashError
from tests.support.publishing import FOLDER, TOKEN, built

pytestmark = pytest.mark.publish

GRAFANA_13 = ("v1", "v1beta1", "v2beta1", "v2")
V2_COLLECTION = "/apis/dashboard.grafana.app/v2/namespaces/default/dashboards"


@pytest.fixture
def grafana(start_grafana):
    return start_grafana(version="13.0.0", resource_versions=GRAFANA_13)


def backend(fake, api="auto", schema="auto"):
    return connect(Connection(url=fake.url, token=TOKEN, retries=1, backoff_base=0.01), api, None, schema)


def run(fake, dashboards=None, options=FOLDER, schema="auto", **changes):
    lines: list[str] = []
    if changes:
        options = type(options)(**{**options.__dict__, **changes})
    code = publish(dashboards or built("vllm"), backend(fake, schema=schema), options, echo=lines.append)
    return code, "\n".join(lines)


def dashboard_writes(fake) -> list:
    return [r for r in fake.writes if r.path.startswith("/apis/")]


def element_query(spec: dict, name: str = "itl_p99") -> dict:
    return spec["elements"][name]["spec"]["data"]["spec"]["queries"][0]["spec"]["query"]["spec"]


def test_auto_picks_v2_where_apis_lists_it(grafana):
    chosen = backend(grafana)
    assert isinstance(chosen, ResourceApi) and chosen.api_version == "v2" and chosen.schema == "v2"


def test_a_server_without_v2_gets_v1_as_today(start_grafana):
    fake = start_grafana(version="13.0.0", resource_versions=("v1", "v1beta1", "v2beta1"))
    chosen = backend(fake)
    assert chosen.api_version == "v1" and chosen.schema == "v1"
    code, out = run(fake)
    assert code == EXIT_OK, out
    assert [r.path for r in dashboard_writes(fake)] == ["/apis/dashboard.grafana.app/v1/namespaces/default/dashboards"]
    assert "panels" in fake.dashboards["llmdash-vllm"].model


def test_schema_v2_is_refused_where_it_cannot_be_published(start_grafana):
    fake = start_grafana(version="13.0.0", resource_versions=("v1", "v2beta1"))
    with pytest.raises(LlmdashError) as error:
        backend(fake, schema="v2")
    assert error.value.exit_code == EXIT_USAGE and "offers only v1, v2beta1" in str(error.value)
    with pytest.raises(LlmdashError, match="--schema v2 needs the resource API") as error:
        backend(fake, api="legacy", schema="v2")
    assert fake.writes == []


def test_first_publish_creates_the_v2_resource(grafana):
    code, out = run(grafana, built("vllm", "fleet"))
    assert code == EXIT_OK, out
    assert [(r.method, r.path) for r in grafana.writes] == [
        ("POST", "/api/folders"), ("POST", V2_COLLECTION), ("POST", V2_COLLECTION)]
    for request in dashboard_writes(grafana):
        assert request.body["apiVersion"] == "dashboard.grafana.app/v2" and request.body["kind"] == "Dashboard"
        assert request.body["metadata"]["annotations"]["grafana.app/folder"] == "llm-serving"
        spec = request.body["spec"]
        assert "uid" not in spec and "panels" not in spec and spec["layout"]["kind"] == "RowsLayout"
        assert any(tag.startswith("llmdash-sha:") for tag in spec["tags"])
    assert "itl_p99" in grafana.dashboards["llmdash-vllm"].model["elements"]
    assert "in schema v2" in out and "2 created" in out


def test_republishing_makes_zero_writes(grafana):
    run(grafana)
    writes = len(grafana.writes)
    code, out = run(grafana)
    assert code == EXIT_OK and "unchanged" in out
    assert len(grafana.writes) == writes and grafana.dashboards["llmdash-vllm"].saves == 1


def test_a_ui_save_that_only_restamps_the_plugin_versions_is_not_an_edit(grafana):
    run(grafana)

    def restamp(spec):
        for element in spec["elements"].values():
            element["spec"]["vizConfig"]["version"] = "13.0.0"

    grafana.ui_save("llmdash-vllm", restamp)
    writes = len(grafana.writes)
    code, out = run(grafana)
    assert code == EXIT_OK and "unchanged" in out and len(grafana.writes) == writes


def test_ui_edit_is_refused_naming_the_element(grafana):
    run(grafana)
    grafana.ui_save("llmdash-vllm", lambda spec: element_query(spec).update(expr="edited_during_incident"))
    writes = len(grafana.writes)
    code, out = run(grafana)
    assert code == EXIT_DRIFT
    assert "edited in Grafana since the last llmdash publish" in out
    assert 'row "Throughput vs latency" / panel "ITL p99"' in out and "- edited_during_incident" in out
    assert len(grafana.writes) == writes
    assert element_query(grafana.dashboards["llmdash-vllm"].model)["expr"] == "edited_during_incident"


def test_force_overwrites_the_ui_edit(grafana):
    run(grafana)
    grafana.ui_save("llmdash-vllm", lambda spec: element_query(spec).update(expr="edited_during_incident"))
    code, out = run(grafana, force=True)
    assert code == EXIT_OK and "--force: overwrote edits made in Grafana" in out
    (update,) = [r for r in dashboard_writes(grafana) if r.method == "PUT"]
    assert update.path == f"{V2_COLLECTION}/llmdash-vllm" and update.body["metadata"]["resourceVersion"]
    assert element_query(grafana.dashboards["llmdash-vllm"].model)["expr"] != "edited_during_incident"
    assert run(grafana)[0] == EXIT_OK and "unchanged" in run(grafana)[1]


def test_a_v1_dashboard_published_as_v2_is_refused_then_replaced_never_duplicated(grafana):
    assert run(grafana, schema="v1")[0] == EXIT_OK
    code, out = run(grafana)
    assert code == EXIT_DRIFT
    assert "stored in Grafana as schema v1 (dashboard.grafana.app/v1)" in out and "--schema v1" in out
    code, out = run(grafana, force=True)
    assert code == EXIT_OK and "--force: replaced the schema v1 dashboard with schema v2" in out
    assert list(grafana.dashboards) == ["llmdash-vllm"]
    assert grafana.dashboards["llmdash-vllm"].stored_version == "v2"
    assert "unchanged" in run(grafana)[1]


def test_a_v2_dashboard_published_as_v1_is_refused(grafana):
    run(grafana)
    writes = len(grafana.writes)
    code, out = run(grafana, schema="v1")
    assert code == EXIT_DRIFT and "stored in Grafana as schema v2 (dashboard.grafana.app/v2)" in out
    assert "--schema v2" in out and len(grafana.writes) == writes


def test_cli_schema_option(grafana):
    env = {"GRAFANA_URL": grafana.url, "GRAFANA_TOKEN": TOKEN, "GRAFANA_USER": "", "GRAFANA_PASSWORD": ""}
    result = CliRunner().invoke(publish_command, ["--retry-backoff", "0.01", "vllm"], env=env)
    assert result.exit_code == EXIT_OK, result.output
    assert "dashboard API: /apis/dashboard.grafana.app/v2 (namespace default, schema v2)" in result.output
    result = CliRunner().invoke(publish_command, ["--retry-backoff", "0.01", "--schema", "v1", "vllm"], env=env)
    assert result.exit_code == EXIT_DRIFT and "stored in Grafana as schema v2" in result.output


# Issue 28: publish decides "unedited" and writes from what the GET answered; Kubernetes' API conventions say a
# GET by name answers that object (metadata.name) with its resourceVersion, which a conditional update sends back.
def _edit(spec):
    element_query(spec).update(expr="edited_during_incident")


def _object_as_served(fake, name: str) -> dict:
    return requests.get(f"{fake.url}{V2_COLLECTION}/{name}", headers={"Authorization": f"Bearer {TOKEN}"},
                        timeout=10).json()


@pytest.mark.parametrize("answer", ["another dashboard", "no name", "no resourceVersion"])
def test_a_read_answered_with_another_object_is_refused_before_any_write(start_grafana, answer):
    fake = start_grafana(version="13.0.0", resource_versions=GRAFANA_13, ignores_resource_version=True)
    assert run(fake, built("vllm", "sglang"))[0] == EXIT_OK
    fake.ui_save("llmdash-vllm", _edit)
    served = _object_as_served(fake, "llmdash-sglang" if answer == "another dashboard" else "llmdash-vllm")
    if answer == "no name":
        del served["metadata"]["name"]
    if answer == "no resourceVersion":
        served["metadata"]["resourceVersion"] = ""
    fake.fail("GET", f"{V2_COLLECTION}/llmdash-vllm", status=200, payload=served, times=10)
    writes = len(fake.writes)
    expected = {"another dashboard": "with object 'llmdash-sglang'; refusing to write over it",
                "no name": "with an object without metadata.name; refusing to write over it",
                "no resourceVersion": "without a metadata.resourceVersion"}[answer]
    with pytest.raises(LlmdashError, match=expected) as refused:
        run(fake, built("vllm"))
    assert refused.value.exit_code == 3
    assert len(fake.writes) == writes
    assert element_query(fake.dashboards["llmdash-vllm"].model)["expr"] == "edited_during_incident"
