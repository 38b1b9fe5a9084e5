"""Publish through Grafana 12/13's resource API (/apis/dashboard.grafana.app), discovered or chosen,
against the fake Grafana with and without /apis (tests/support/fake_grafana.py names what each answer follows)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from llmdash.cli.delivery import publish_command
from llmdash.delivery.credentials import Connection
from llmdash.delivery.discovery import connect
from llmdash.delivery.legacy_api import LegacyApi
from llmdash.delivery.resource_api import ResourceApi
from llmdash.delivery.transport import Transport
from llmdash.delivery.publish import PublishOptions, publish
from llmdash.errors import EXIT_DRIFT, EXIT_OK, EXIT_USAGE, LlmdashError
from tests.support.publishing import FOLDER, TOKEN, RacesAnEdit, built, edit_itl_query, itl_query, make_dashboard

pytestmark = pytest.mark.publish

# (Grafana version, dashboard.grafana.app versions its /apis lists, the one llmdash must pick)
RELEASES = [("12.2.0", ("v1beta1", "v0alpha1"), "v1beta1"), ("13.0.0", ("v2beta1", "v1", "v1beta1"), "v1")]


@pytest.fixture(params=RELEASES, ids=["grafana-12", "grafana-13"])
def grafana(request, start_grafana):
    version, offered, expected = request.param
    fake = start_grafana(version=version, resource_versions=offered)
    fake.expected_api = expected
    return fake


def connection(fake) -> Connection:
    return Connection(url=fake.url, token=TOKEN, retries=1, backoff_base=0.01)


def backend(fake, api="auto", namespace=None):
    return connect(connection(fake), api, namespace)


def run(fake, dashboards, options=FOLDER, api="auto"):
    lines: list[str] = []
    code = publish(dashboards, backend(fake, api), options, echo=lines.append)
    return code, "\n".join(lines)


def collection(fake, namespace="default") -> str:
    return f"/apis/dashboard.grafana.app/{fake.expected_api}/namespaces/{namespace}/dashboards"


def dashboard_writes(fake) -> list:
    return [r for r in fake.writes if r.path.startswith("/apis/")]


def test_auto_picks_the_classic_model_version_the_server_lists(grafana):
    chosen = backend(grafana)
    assert isinstance(chosen, ResourceApi) and chosen.api_version == grafana.expected_api
    assert chosen.namespace == "default"


def test_first_publish_creates_through_the_resource_api(grafana):
    code, out = run(grafana, built("vllm", "sglang"))
    assert code == EXIT_OK, out
    assert [(r.method, r.path) for r in grafana.writes] == [
        ("POST", "/api/folders"), ("POST", collection(grafana)), ("POST", collection(grafana))]
    for request in dashboard_writes(grafana):
        metadata = request.body["metadata"]
        assert metadata["annotations"]["grafana.app/folder"] == "llm-serving"
        assert "resourceVersion" not in metadata
        assert request.body["spec"]["uid"] == metadata["name"] and "id" not in request.body["spec"]
        assert request.body["apiVersion"] == f"dashboard.grafana.app/{grafana.expected_api}"
    assert grafana.dashboards["llmdash-vllm"].folder_uid == "llm-serving"
    assert "2 created" in out
    assert not [r for r in grafana.writes if r.path == "/api/dashboards/db"]


def test_second_publish_makes_zero_writes(grafana):
    run(grafana, built("vllm", "sglang"))
    writes = len(grafana.writes)
    code, out = run(grafana, built("vllm", "sglang"))
    assert code == EXIT_OK and len(grafana.writes) == writes
    assert "2 unchanged" in out


def test_generator_change_is_a_put_with_the_resource_version_read(grafana):
    run(grafana, built("vllm"))
    read = grafana.dashboards["llmdash-vllm"].resource_version
    code, out = run(grafana, {"vllm": make_dashboard("vllm", itl_description="p99 over 5 minutes")})
    assert code == EXIT_OK, out
    put = dashboard_writes(grafana)[-1]
    assert put.method == "PUT" and put.path == f"{collection(grafana)}/llmdash-vllm"
    assert put.body["metadata"]["resourceVersion"] == str(read)
    assert "updated v2" in out


def test_ui_edit_is_refused_with_exit_1_naming_the_panel(grafana):
    run(grafana, built("vllm"))
    grafana.ui_save("llmdash-vllm", edit_itl_query)          # moves resourceVersion, like a UI save
    writes = len(grafana.writes)
    code, out = run(grafana, {"vllm": make_dashboard("vllm", itl_description="new description")})
    assert code == EXIT_DRIFT
    assert len(grafana.writes) == writes
    assert 'panel "ITL p99"' in out and "edited_during_incident" in out and "--force" in out


def test_force_overwrites_a_ui_edit(grafana):
    run(grafana, built("vllm"))
    grafana.ui_save("llmdash-vllm", edit_itl_query)
    code, out = run(grafana, built("vllm"), PublishOptions("llm-serving", "LLM serving", force=True))
    assert code == EXIT_OK, out
    assert itl_query(grafana.dashboards["llmdash-vllm"].model)["expr"] != "edited_during_incident"
    assert "overwrote edits made in Grafana" in out


class RacingResourceApi(RacesAnEdit, ResourceApi):
    """Someone saves in the UI right after our GET: only the stale resourceVersion can tell."""


def test_edit_during_publish_gets_409_and_is_refused(grafana):
    run(grafana, built("vllm"))
    racing = RacingResourceApi(grafana, Transport(connection(grafana)), api_version=grafana.expected_api,
                               namespace="default")
    lines: list[str] = []
    code = publish({"vllm": make_dashboard("vllm", itl_description="new")}, racing, FOLDER, lines.append)
    assert code == EXIT_DRIFT
    assert "409 Conflict" in "\n".join(lines)
    assert itl_query(grafana.dashboards["llmdash-vllm"].model)["expr"] == "edited_during_incident"


def test_force_does_not_overwrite_an_edit_made_during_the_publish(grafana):
    run(grafana, built("vllm"))
    grafana.ui_save("llmdash-vllm", edit_itl_query)
    racing = RacingResourceApi(grafana, Transport(connection(grafana)), api_version=grafana.expected_api,
                               namespace="default")
    code = publish(built("vllm"), racing, PublishOptions("llm-serving", "LLM serving", force=True), lambda _: None)
    assert code == EXIT_DRIFT


def test_dashboard_created_during_publish_gets_409_and_is_refused(grafana):
    class CreatingRace(ResourceApi):
        def get_dashboard(self, uid):
            remote = super().get_dashboard(uid)
            grafana.provision(make_dashboard("vllm", itl_description="someone else's"), "")
            grafana.dashboards[uid].provisioned = False
            return remote

    lines: list[str] = []
    api = CreatingRace(Transport(connection(grafana)), api_version=grafana.expected_api, namespace="default")
    assert publish(built("vllm"), api, FOLDER, lines.append) == EXIT_DRIFT
    assert "409 AlreadyExists" in "\n".join(lines)


def test_provisioned_dashboard_is_refused(grafana):
    grafana.add_folder("llm-serving", "LLM serving")
    grafana.provision(make_dashboard("vllm", itl_description="from files"), folder_uid="llm-serving")
    code, out = run(grafana, built("vllm"))
    assert code == EXIT_DRIFT and "provisioned" in out
    assert dashboard_writes(grafana) == []


def test_dashboard_published_through_api_reads_back_unchanged_through_apis(grafana):
    """Grafana 12/13 serve both APIs over one store: switching --api must not look like an edit."""
    run(grafana, built("vllm"), api="legacy")
    writes = len(grafana.writes)
    code, out = run(grafana, built("vllm"), api="resource")
    assert code == EXIT_OK and len(grafana.writes) == writes, out


def test_org_2_uses_namespace_org_2_and_an_override_wins(grafana):
    grafana.org_id = 2
    assert backend(grafana).namespace == "org-2"
    run(grafana, built("vllm"))
    assert dashboard_writes(grafana)[0].path == collection(grafana, "org-2")
    grafana.namespace_override = "stacks-4242"
    stack = backend(grafana, namespace="stacks-4242")
    assert stack.namespace == "stacks-4242"
    assert stack.get_dashboard("llmdash-vllm") is not None


def test_wrong_namespace_is_a_clear_error(grafana):
    with pytest.raises(LlmdashError) as error:
        run_with(grafana, namespace="org-9")
    assert "403" in str(error.value)


def run_with(fake, namespace):
    return publish(built("vllm"), backend(fake, namespace=namespace), FOLDER, echo=lambda _: None)


# ------------------------------------------------------------------ Grafana 11 / no /apis


@pytest.fixture
def grafana11(start_grafana):
    return start_grafana(version="11.6.0")


def test_auto_on_grafana_11_is_legacy_without_asking_for_apis(grafana11):
    assert type(backend(grafana11)) is LegacyApi
    assert not [r for r in grafana11.requests if r.path.startswith("/apis")]


def test_auto_without_apis_falls_back_to_legacy(grafana11):
    grafana11.version = "12.0.0"                  # a 12.0 with the resource API switched off
    assert type(backend(grafana11)) is LegacyApi
    assert [r.path for r in grafana11.requests if r.path.startswith("/apis")] == ["/apis"]


def test_resource_on_grafana_11_is_a_usage_error(grafana11):
    with pytest.raises(LlmdashError) as error:
        backend(grafana11, api="resource")
    assert error.value.exit_code == EXIT_USAGE and "--api legacy" in str(error.value)


def test_legacy_forced_on_grafana_13_uses_api(grafana):
    code, _ = run(grafana, built("vllm"), api="legacy")
    assert code == EXIT_OK
    assert [r.path for r in grafana.writes] == ["/api/folders", "/api/dashboards/db"]


# ------------------------------------------------------------------ command line


def cli(fake, *args):
    env = {"GRAFANA_URL": fake.url, "GRAFANA_TOKEN": TOKEN, "GRAFANA_USER": "", "GRAFANA_PASSWORD": ""}
    return CliRunner().invoke(publish_command, ["--retry-backoff", "0.01", *args], env=env)


def test_cli_publishes_through_the_resource_api_and_refuses_ui_edit(grafana):
    first = cli(grafana, "vllm")
    assert first.exit_code == EXIT_OK, first.output
    assert f"dashboard API: /apis/dashboard.grafana.app/{grafana.expected_api} (namespace default)" in first.output
    grafana.ui_save("llmdash-vllm", edit_itl_query)
    refused = cli(grafana, "vllm")
    assert refused.exit_code == EXIT_DRIFT and 'panel "ITL p99"' in refused.output
    assert cli(grafana, "vllm", "--force").exit_code == EXIT_OK


def test_cli_api_legacy_and_bad_namespace(grafana):
    result = cli(grafana, "vllm", "--api", "legacy")
    assert result.exit_code == EXIT_OK and "dashboard API: /api (legacy" in result.output
    bad = cli(grafana, "vllm", "--namespace", "Org_2")
    assert bad.exit_code == EXIT_USAGE and bad.stderr.startswith("error: --namespace 'Org_2'")


@pytest.mark.parametrize("text, key", [("grafana:\n  api: apis\n", "grafana.api"),
                                       ("grafana:\n  namespace: Stacks_1\n", "grafana.namespace")])
def test_bad_api_settings_are_one_line_errors(tmp_path, text, key):
    from llmdash.config import load_config
    path = tmp_path / "llmdash.yaml"
    path.write_text(text)
    with pytest.raises(LlmdashError) as error:
        load_config(path)
    assert error.value.exit_code == EXIT_USAGE and key in str(error.value)


def test_config_chooses_the_api_and_namespace(grafana, tmp_path):
    grafana.namespace_override = "stacks-77"
    config = tmp_path / "llmdash.yaml"
    config.write_text("grafana:\n  api: resource\n  namespace: stacks-77\n")
    result = cli(grafana, "vllm", "--config", str(config))
    assert result.exit_code == EXIT_OK, result.output
    assert "(namespace stacks-77)" in result.output
    assert dashboard_writes(grafana)[0].path == collection(grafana, "stacks-77")
