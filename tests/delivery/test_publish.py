"""Publish against a fake Grafana over real sockets (tests/support/fake_grafana.py names what each answer follows)."""

from __future__ import annotations

import copy
import socket
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from llmdash.cli.delivery import publish_command
from llmdash.delivery.backend import GrafanaError
from llmdash.delivery.credentials import Connection, resolve_connection
from llmdash.delivery.legacy_api import LegacyApi
from llmdash.delivery.transport import Transport
from llmdash.delivery.publish import PublishOptions, content_hash, publish, stamp_of
from llmdash.errors import EXIT_DRIFT, EXIT_OK, EXIT_REMOTE, EXIT_USAGE, LlmdashError
from tests.support.fake_grafana import FakeGrafana
from tests.support.publishing import FOLDER, TOKEN, RacesAnEdit, built, edit_itl_query, itl_query, make_dashboard

pytestmark = pytest.mark.publish

def api(fake: FakeGrafana, token: str = TOKEN, **settings) -> LegacyApi:
    connection = Connection(url=fake.url, token=token, retries=settings.pop("retries", 2),
                            backoff_base=0.01, **settings)
    return LegacyApi(Transport(connection))


def run(fake, dashboards, options=FOLDER, **client):
    lines: list[str] = []
    code = publish(dashboards, api(fake, **client), options, echo=lines.append)
    return code, "\n".join(lines)


def dashboard_writes(fake) -> list:
    return [r for r in fake.writes if r.path == "/api/dashboards/db"]


# ------------------------------------------------------------------ idempotence


def test_first_publish_creates_folder_then_dashboards(grafana):
    code, out = run(grafana, built("vllm", "sglang"))
    assert code == EXIT_OK
    assert [r.path for r in grafana.writes] == ["/api/folders", "/api/dashboards/db", "/api/dashboards/db"]
    for request in dashboard_writes(grafana):
        assert request.body["dashboard"]["id"] is None
        assert request.body["overwrite"] is False
        assert request.body["folderUid"] == "llm-serving"
    assert grafana.dashboards["llmdash-vllm"].folder_uid == "llm-serving"
    assert "[1/2] sglang (llmdash-sglang): created v1" in out
    assert "2 created" in out


def test_second_publish_makes_zero_writes_and_no_new_versions(grafana):
    run(grafana, built("vllm", "sglang"))
    writes_before = len(grafana.writes)
    code, out = run(grafana, built("vllm", "sglang"))
    assert code == EXIT_OK
    assert len(grafana.writes) == writes_before
    assert {uid: d.version for uid, d in grafana.dashboards.items()} == {"llmdash-vllm": 1, "llmdash-sglang": 1}
    assert "2 unchanged" in out


def test_published_dashboard_carries_stamp_of_its_content(grafana):
    run(grafana, built("vllm"))
    stored = grafana.dashboards["llmdash-vllm"].model
    assert stamp_of(stored) == content_hash(make_dashboard("vllm"))


def test_generator_change_updates_with_live_version_and_no_overwrite(grafana):
    run(grafana, built("vllm"))
    changed = {"vllm": make_dashboard("vllm", itl_description="p99 over the last 5 minutes")}
    code, out = run(grafana, changed)
    assert code == EXIT_OK
    update = dashboard_writes(grafana)[-1].body
    assert update["dashboard"]["version"] == 1 and update["overwrite"] is False and update["dashboard"]["id"] is None
    assert grafana.dashboards["llmdash-vllm"].version == 2
    assert "updated v2" in out and 'panel "ITL p99"' in out


# ------------------------------------------------------------------ UI edits are never silently lost


def test_ui_edit_is_refused_with_a_diff_naming_the_panel(grafana):
    run(grafana, built("vllm", "sglang"))
    grafana.ui_save("llmdash-vllm", edit_itl_query)
    writes_before = len(grafana.writes)
    changed = {s: make_dashboard(s, itl_description="new description") for s in ("vllm", "sglang")}

    code, out = run(grafana, changed)

    assert code == EXIT_DRIFT
    saved_uids = [r.body["dashboard"]["uid"] for r in grafana.writes[writes_before:]]
    assert saved_uids == ["llmdash-sglang"]               # the untouched one still goes out
    assert itl_query(grafana.dashboards["llmdash-vllm"].model)["expr"] == "edited_during_incident"
    assert "edited in Grafana since the last llmdash publish" in out
    assert 'panel "ITL p99"' in out and "edited_during_incident" in out
    assert "--force" in out


def test_force_overwrites_a_ui_edit(grafana):
    run(grafana, built("vllm"))
    grafana.ui_save("llmdash-vllm", edit_itl_query)
    code, out = run(grafana, built("vllm"), PublishOptions("llm-serving", "LLM serving", force=True))
    assert code == EXIT_OK
    assert dashboard_writes(grafana)[-1].body["overwrite"] is True
    assert grafana.dashboards["llmdash-vllm"].version == 3
    assert "edited_during_incident" not in str(grafana.dashboards["llmdash-vllm"].model)
    assert "overwrote edits made in Grafana" in out


def test_edit_reverted_in_ui_counts_as_unchanged(grafana, default_build):
    run(grafana, built("vllm"))
    grafana.ui_save("llmdash-vllm", edit_itl_query)
    original = itl_query(default_build["vllm"])["expr"]
    grafana.ui_save("llmdash-vllm", lambda model: itl_query(model).update(expr=original))
    writes_before = len(grafana.writes)
    code, _ = run(grafana, built("vllm"))
    assert code == EXIT_OK and len(grafana.writes) == writes_before


def test_dashboard_without_stamp_is_not_overwritten(grafana):
    grafana.add_folder("llm-serving", "LLM serving")
    foreign = make_dashboard("vllm", itl_description="someone else's dashboard")
    api(grafana).save_dashboard(foreign, folder_uid="llm-serving", version=0, overwrite=False, message="by hand")
    code, out = run(grafana, built("vllm"))
    assert code == EXIT_DRIFT
    assert "not published by llmdash" in out
    assert len(dashboard_writes(grafana)) == 1


def test_dashboard_moved_to_another_folder_is_refused(grafana):
    run(grafana, built("vllm"))
    grafana.add_folder("incident", "Incident")
    grafana.dashboards["llmdash-vllm"].folder_uid = "incident"
    code, out = run(grafana, built("vllm"))
    assert code == EXIT_DRIFT
    assert "moved to another folder" in out and "'Incident'" in out


class RacingApi(RacesAnEdit, LegacyApi):
    """Someone saves in the UI right after our GET: only Grafana's 412 can notice."""


def test_edit_during_publish_gets_412_and_is_refused(grafana):
    run(grafana, built("vllm"))
    changed = {"vllm": make_dashboard("vllm", itl_description="new description")}
    lines: list[str] = []
    code = publish(changed, RacingApi(grafana, Transport(Connection(url=grafana.url, token=TOKEN))), FOLDER,
                   lines.append)
    assert code == EXIT_DRIFT
    assert "412 version-mismatch" in "\n".join(lines)
    assert "edited_during_incident" in str(grafana.dashboards["llmdash-vllm"].model)


def test_provisioned_dashboard_is_refused_with_a_clear_message(grafana):
    grafana.add_folder("llm-serving", "LLM serving")
    grafana.provision(make_dashboard("vllm", itl_description="from files"), folder_uid="llm-serving")
    code, out = run(grafana, built("vllm"))
    assert code == EXIT_DRIFT
    assert "provisioned from files" in out
    assert dashboard_writes(grafana) == []


def test_title_clash_on_grafana_11_2_is_refused(grafana, default_build):
    grafana.version = "11.2.0"
    grafana.add_folder("llm-serving", "LLM serving")
    other = {**make_dashboard("sglang"), "title": default_build["vllm"]["title"]}
    api(grafana).save_dashboard(other, folder_uid="llm-serving", version=0, overwrite=False, message="")
    code, out = run(grafana, built("vllm"))
    assert code == EXIT_DRIFT
    assert f"titled {default_build['vllm']['title']!r}" in out


# ------------------------------------------------------------------ dry run


def test_dry_run_reports_each_action_and_writes_nothing(grafana):
    run(grafana, built("vllm", "sglang"))
    grafana.ui_save("llmdash-sglang", edit_itl_query)
    writes_before = len(grafana.writes)
    dashboards = {"vllm": make_dashboard("vllm", itl_description="new description"), "sglang": make_dashboard("sglang"),
                  "lmdeploy": make_dashboard("lmdeploy")}

    code, out = run(grafana, dashboards, PublishOptions("llm-serving", "LLM serving", dry_run=True))

    assert len(grafana.writes) == writes_before
    assert "lmdeploy (llmdash-lmdeploy): would create" in out
    assert "vllm (llmdash-vllm): would update" in out and "new description" in out
    assert "sglang (llmdash-sglang): would refuse" in out
    assert code == EXIT_DRIFT


def test_dry_run_does_not_create_the_folder(grafana):
    code, out = run(grafana, built("vllm"), PublishOptions("llm-serving", "LLM serving", dry_run=True))
    assert code == EXIT_OK and grafana.writes == [] and grafana.folders == {}
    assert "would be created" in out and "would create" in out


def test_unchanged_dashboard_is_reported_in_dry_run(grafana):
    run(grafana, built("vllm"))
    _, out = run(grafana, built("vllm"), PublishOptions("llm-serving", "LLM serving", dry_run=True))
    assert "vllm (llmdash-vllm): unchanged" in out


# ------------------------------------------------------------------ zero writes on bad input


def test_one_invalid_dashboard_means_zero_requests(grafana):
    dashboards = built("vllm", "sglang")
    dashboards["sglang"]["panels"][2]["id"] = dashboards["sglang"]["panels"][1]["id"]   # duplicate panel id
    with pytest.raises(LlmdashError) as error:
        run(grafana, dashboards)
    assert error.value.exit_code == EXIT_USAGE
    assert "sglang is invalid" in str(error.value) and "nothing was written" in str(error.value)
    assert grafana.requests == []


def test_bad_folder_uid_is_a_usage_error_before_any_request(grafana):
    with pytest.raises(LlmdashError) as error:
        run(grafana, built("vllm"), PublishOptions("no spaces allowed", "LLM serving"))
    assert error.value.exit_code == EXIT_USAGE and grafana.requests == []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_grafana_is_one_line_exit_3():
    connection = Connection(url=f"http://127.0.0.1:{free_port()}", token=TOKEN, retries=2, backoff_base=0.01)
    with pytest.raises(GrafanaError) as error:
        publish(built("vllm"), LegacyApi(Transport(connection)), FOLDER, echo=lambda line: None)
    assert error.value.exit_code == EXIT_REMOTE
    message = str(error.value)
    assert "cannot reach Grafana" in message and "3 attempts" in message and "\n" not in message


# ------------------------------------------------------------------ Grafana errors


def test_wrong_token_is_401_without_leaking_it(grafana):
    secret = "glsa_wrong_9f8e7d6c5b4a"
    with pytest.raises(GrafanaError) as error:
        run(grafana, built("vllm"), token=secret)
    assert error.value.exit_code == EXIT_REMOTE
    assert "401" in str(error.value) and secret not in str(error.value)
    assert grafana.writes == []


def test_viewer_token_gets_a_403_line(grafana):
    grafana.tokens["glsa_viewer"] = "Viewer"
    grafana.add_folder("llm-serving", "LLM serving")
    with pytest.raises(GrafanaError) as error:
        run(grafana, built("vllm"), token="glsa_viewer")
    assert error.value.exit_code == EXIT_REMOTE
    assert "403" in str(error.value) and "Editor" in str(error.value)
    assert grafana.dashboards == {}


def test_basic_auth_publishes(grafana):
    connection = Connection(url=grafana.url, user="admin", password="s3cret")
    assert publish(built("vllm"), LegacyApi(Transport(connection)), FOLDER, echo=lambda line: None) == EXIT_OK
    assert "llmdash-vllm" in grafana.dashboards


def test_unknown_folder_on_save_is_a_clear_error(grafana):
    with pytest.raises(GrafanaError) as error:
        api(grafana).save_dashboard(make_dashboard("vllm"), folder_uid="gone", version=0, overwrite=False,
                                    message="")
    assert error.value.exit_code == EXIT_REMOTE
    assert "folder 'gone' does not exist" in str(error.value)


@pytest.mark.parametrize("version, status", [("11.6.0", 409), ("12.1.0", 412)])
def test_folder_created_concurrently_is_read_back(grafana, version, status):
    grafana.version = version
    grafana.add_folder("llm-serving", "LLM serving")
    folder = api(grafana).create_folder("llm-serving", "LLM serving")
    assert folder["uid"] == "llm-serving"
    assert [r.path for r in grafana.requests] == ["/api/folders", "/api/folders/llm-serving"]


def test_transient_5xx_is_retried(grafana):
    grafana.fail("GET", "/api/dashboards/uid/", status=503, times=2)
    code, _ = run(grafana, built("vllm"))
    assert code == EXIT_OK
    gets = [r for r in grafana.requests if r.path.startswith("/api/dashboards/uid/")]
    assert len(gets) == 3


def test_persistent_5xx_gives_up_after_bounded_retries(grafana):
    grafana.fail("GET", "/api/dashboards/uid/", status=500, times=100)
    with pytest.raises(GrafanaError) as error:
        run(grafana, built("vllm"), retries=2)
    assert error.value.exit_code == EXIT_REMOTE and "gave up after 3 attempts" in str(error.value)
    assert len([r for r in grafana.requests if r.path.startswith("/api/dashboards/uid/")]) == 3
    assert dashboard_writes(grafana) == []


def test_retries_stop_at_the_time_budget(grafana):
    grafana.fail("GET", "/api/health", status=503, times=100)
    connection = Connection(url=grafana.url, token=TOKEN, retries=10, backoff_base=0.05, retry_budget=0.2)
    with pytest.raises(GrafanaError):
        LegacyApi(Transport(connection)).health()
    assert len(grafana.requests) < 5                      # 0.05 + 0.1 fit in 0.2 s, 0.2 more does not


def test_failing_database_is_reported(grafana):
    grafana.database = "failing"
    with pytest.raises(GrafanaError) as error:
        run(grafana, built("vllm"), retries=0)
    assert "503" in str(error.value)


def test_slow_read_times_out_and_is_retried(grafana):
    grafana.slow("GET", "/api/dashboards/uid/", delay=1.0, times=1)
    code, _ = run(grafana, built("vllm"), read_timeout=0.3)
    assert code == EXIT_OK


def test_slow_save_is_not_retried_because_it_may_have_landed(grafana):
    grafana.add_folder("llm-serving", "LLM serving")
    grafana.slow("POST", "/api/dashboards/db", delay=1.0, times=5)
    with pytest.raises(GrafanaError) as error:
        run(grafana, built("vllm"), read_timeout=0.3)
    assert error.value.exit_code == EXIT_REMOTE
    assert "did not answer POST /api/dashboards/db within 0.3s" in str(error.value)
    assert len(dashboard_writes(grafana)) == 1


# ------------------------------------------------------------------ annotation


def test_annotation_marks_a_publish_that_wrote_something(grafana):
    options = PublishOptions("llm-serving", "LLM serving", annotate=True, revision="abc123def456")
    run(grafana, built("vllm"), options)
    assert len(grafana.annotations) == 1
    assert "abc123def456" in grafana.annotations[0]["tags"]
    assert "vllm created" in grafana.annotations[0]["text"]
    run(grafana, built("vllm"), options)
    assert len(grafana.annotations) == 1                  # nothing changed, nothing to mark


# ------------------------------------------------------------------ connection settings


SETTINGS = SimpleNamespace(url="https://config.example", folder_uid="llm-serving", folder_title="LLM serving",
                           connect_timeout=5.0, read_timeout=30.0, verify_tls=True, ca_cert=None)


def test_env_overrides_config_and_flag_overrides_env():
    env = {"GRAFANA_URL": "https://env.example", "GRAFANA_TOKEN": "glsa_env"}
    assert resolve_connection(SETTINGS, env).url == "https://env.example"
    assert resolve_connection(SETTINGS, env, url="https://flag.example/").url == "https://flag.example"
    assert resolve_connection(SETTINGS, {"GRAFANA_TOKEN": "t"}).url == "https://config.example"


def test_token_file_wins_over_env(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("glsa_from_file\n")
    connection = resolve_connection(SETTINGS, {"GRAFANA_TOKEN": "glsa_env"}, token_file=str(token_file))
    assert connection.token == "glsa_from_file"


def test_basic_auth_needs_both_halves():
    with pytest.raises(LlmdashError) as error:
        resolve_connection(SETTINGS, {"GRAFANA_USER": "admin"})
    assert error.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize("env, flags, expected", [
    ({}, {}, "no Grafana credentials"),
    ({"GRAFANA_TOKEN": "  \n"}, {}, "no Grafana credentials"),
    ({"GRAFANA_TOKEN": "t", "GRAFANA_URL": "ftp://x"}, {}, "must look like"),
    ({"GRAFANA_TOKEN": "t", "GRAFANA_URL": "https://admin:hunter2@grafana.example"}, {}, "must not contain"),
    ({"GRAFANA_TOKEN": "t"}, {"insecure": True, "ca_cert": "/etc/ssl/ca.pem"}, "contradict"),
    ({"GRAFANA_TOKEN": "t"}, {"ca_cert": "/nonexistent/ca.pem"}, "does not exist"),
    ({"GRAFANA_TOKEN": "t"}, {"token_file": "/nonexistent/token"}, "cannot read --token-file"),
    ({"GRAFANA_TOKEN": "t"}, {"read_timeout": 0}, "must be positive"),
])
def test_bad_connection_settings_are_usage_errors(env, flags, expected):
    with pytest.raises(LlmdashError) as error:
        resolve_connection(SETTINGS, env, **flags)
    assert error.value.exit_code == EXIT_USAGE and expected in str(error.value)
    assert "hunter2" not in str(error.value)


def test_tls_verification_is_on_unless_opted_out(tmp_path):
    env = {"GRAFANA_TOKEN": "t"}
    assert resolve_connection(SETTINGS, env).verify is True
    assert resolve_connection(SETTINGS, env, insecure=True).verify is False
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    assert resolve_connection(SETTINGS, env, ca_cert=str(ca)).verify == str(ca)


def test_secrets_stay_out_of_repr():
    connection = resolve_connection(SETTINGS, {"GRAFANA_USER": "admin", "GRAFANA_PASSWORD": "hunter2"})
    assert "hunter2" not in repr(connection)
    assert "glsa_secret" not in repr(resolve_connection(SETTINGS, {"GRAFANA_TOKEN": "glsa_secret"}))


def test_publish_leaves_caller_dashboards_untouched(grafana):
    dashboards = built("vllm")
    snapshot = copy.deepcopy(dashboards)
    run(grafana, dashboards)
    assert dashboards == snapshot


# ------------------------------------------------------------------ command line


def cli(fake_url: str, *args: str, token: str = TOKEN, **env: str):
    environment = {"GRAFANA_URL": fake_url, "GRAFANA_TOKEN": token, "GRAFANA_USER": "", "GRAFANA_PASSWORD": "",
                   **env}
    return CliRunner().invoke(publish_command, ["--retry-backoff", "0.01", *args], env=environment)


def test_cli_publishes_then_second_run_writes_nothing(grafana):
    first = cli(grafana.url, "vllm", "sglang")
    assert first.exit_code == EXIT_OK, first.output
    writes = len(grafana.writes)
    second = cli(grafana.url, "vllm", "sglang")
    assert second.exit_code == EXIT_OK and len(grafana.writes) == writes
    assert "2 unchanged" in second.output


def test_cli_refuses_ui_edit_with_exit_1(grafana):
    cli(grafana.url, "vllm")
    grafana.ui_save("llmdash-vllm", edit_itl_query)
    result = cli(grafana.url, "vllm")
    assert result.exit_code == EXIT_DRIFT
    assert 'panel "ITL p99"' in result.output
    assert cli(grafana.url, "vllm", "--force").exit_code == EXIT_OK


def test_cli_wrong_token_never_appears_in_output(grafana):
    secret = "glsa_wrong_0123456789abcdef"
    result = cli(grafana.url, "vllm", token=secret)
    assert result.exit_code == EXIT_REMOTE
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: Grafana rejected the credentials (401")
    assert secret not in result.output
    assert grafana.writes == []


def test_cli_wrong_password_never_appears_in_output(grafana):
    result = cli(grafana.url, "vllm", token="", GRAFANA_USER="admin", GRAFANA_PASSWORD="wrong-horse-battery")
    assert result.exit_code == EXIT_REMOTE and "401" in result.output
    assert "wrong-horse-battery" not in result.output


def test_cli_unreachable_grafana_is_exit_3_with_one_line():
    result = cli(f"http://127.0.0.1:{free_port()}", "vllm", "--retries", "1")
    assert result.exit_code == EXIT_REMOTE
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "cannot reach Grafana" in result.stderr


def test_cli_bad_config_is_exit_2_before_any_request(grafana, tmp_path):
    config = tmp_path / "llmdash.yaml"
    config.write_text("grafana:\n  read_timeout: soon\n")
    result = cli(grafana.url, "--config", str(config))
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.startswith("error: ") and "grafana.read_timeout" in result.stderr
    assert grafana.requests == []


def test_cli_missing_credentials_is_exit_2(grafana):
    result = cli(grafana.url, "vllm", token="")
    assert result.exit_code == EXIT_USAGE and "no Grafana credentials" in result.stderr
    assert grafana.requests == []


def test_cli_unknown_dashboard_name_is_exit_2(grafana):
    result = cli(grafana.url, "vlm")
    assert result.exit_code == EXIT_USAGE and "unknown dashboard vlm" in result.stderr
    assert grafana.requests == []


def test_cli_token_file_is_sent_as_bearer(grafana, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    result = cli(grafana.url, "vllm", "--token-file", str(token_file), token="")
    assert result.exit_code == EXIT_OK, result.output
    assert all(r.headers.get("Authorization") == f"Bearer {TOKEN}" for r in grafana.requests
               if r.path != "/api/health")


def test_cli_dry_run_writes_nothing(grafana, default_build):
    result = cli(grafana.url, "--dry-run")
    assert result.exit_code == EXIT_OK, result.output
    assert grafana.writes == []
    assert result.output.count("): would create") == len(default_build)


def test_cli_warns_when_tls_verification_is_off(grafana, tmp_path):
    config = tmp_path / "llmdash.yaml"
    config.write_text("grafana:\n  verify_tls: false\n")
    result = cli(grafana.url, "vllm", "--config", str(config), "--dry-run")
    assert result.exit_code == EXIT_OK
    assert "warning: TLS verification is off" in result.stderr
    assert "warning" not in cli(grafana.url, "vllm", "--dry-run").stderr
