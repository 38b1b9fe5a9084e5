"""Attacks on `llmdash publish` from the Grafana side and from hostile input around it (issue 12).

Each test runs the real command against a server on 127.0.0.1 (the fake Grafana or a small
purpose-built socket server) and checks what an operator sees: the documented exit code, at most
one `error:` line, no traceback, and no secret in any encoding on stdout or stderr.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import ssl
import subprocess
import time
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from llmdash.cli.delivery import publish_command
from llmdash.delivery.transport import MAX_BODY_BYTES
from llmdash.errors import EXIT_OK, EXIT_REMOTE, EXIT_USAGE
from tests.support.fake_grafana import RawServer
from tests.support.publishing import make_dashboard, panel_in

pytestmark = pytest.mark.publish

# --- Grafana and network

TOKEN = "glsa_" + "7f3c9a1e5b2d4f60" * 2          # long enough that any 8-character piece is telling
USER, PASSWORD = "admin", "correct horse/battery+staple"


@pytest.fixture
def grafana(start_grafana):
    return start_grafana(tokens={TOKEN: "Editor"}, users={USER: (PASSWORD, "Admin")})


def publish_cli(url: str, *args: str, token: str = TOKEN, **env: str):
    environment = {"GRAFANA_URL": url, "GRAFANA_TOKEN": token, "GRAFANA_USER": "", "GRAFANA_PASSWORD": "",
                   "REQUESTS_CA_BUNDLE": "", "CURL_CA_BUNDLE": "", **env}
    return CliRunner().invoke(publish_command, ["--retry-backoff", "0.01", *args], env=environment)


def secret_forms(*secrets: str) -> list[str]:
    forms = []
    for secret in secrets:
        forms += [secret, quote(secret, safe=""), base64.b64encode(secret.encode()).decode(), secret[:8]]
    return forms


def assert_clean(result, exit_code: int, *secrets: str) -> None:
    """The documented code, no traceback, one `error:` line when failing, and no secret anywhere."""
    shown = result.stdout + result.stderr
    assert result.exit_code == exit_code, shown
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in shown
    if exit_code != EXIT_OK:
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for form in secret_forms(*secrets):
        assert form not in shown, f"{form!r} leaked: {shown}"


def changed(stem: str = "vllm") -> dict:
    model = make_dashboard(stem)
    panel_in(model, "Throughput vs latency", "ITL p99")["description"] = "a generator change"
    return model


# ------------------------------------------------------------------ reflected secrets


def test_token_reflected_in_health_version_is_not_printed(grafana):
    # asked twice: once by API discovery, once by publish itself
    grafana.fail("GET", "/api/health", status=200, payload={"database": "ok", "version": f"11.6.0 {TOKEN}"}, times=2)
    result = publish_cli(grafana.url, "vllm")
    assert_clean(result, EXIT_OK, TOKEN)
    assert "Grafana 11.6.0 ***" in result.stdout


def test_token_reflected_in_health_database_is_not_printed(grafana):
    grafana.fail("GET", "/api/health", status=200, payload={"database": f"down, token={TOKEN}", "version": "11"})
    result = publish_cli(grafana.url, "vllm")
    assert_clean(result, EXIT_REMOTE, TOKEN)
    assert "reports database" in result.stderr


def test_token_reflected_in_created_folder_title_is_not_printed(grafana):
    grafana.fail("POST", "/api/folders", status=200, applied=True,
                 payload={"uid": "llm-serving", "title": f"LLM serving ({TOKEN})"})
    result = publish_cli(grafana.url, "vllm")
    assert_clean(result, EXIT_OK, TOKEN)
    assert "folder 'llm-serving' (LLM serving (***)) ready" in result.stdout


@pytest.mark.parametrize("reflected", [
    "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(),     # the Authorization header
    f"user={quote(USER)}&password={quote(PASSWORD, safe='')}",                 # a URL-encoded form
    f"{USER}:{PASSWORD}",
])
def test_basic_auth_credentials_reflected_in_an_error_are_not_printed(grafana, reflected):
    grafana.fail("GET", "/api/folders/", status=401, payload={"message": f"bad credentials {reflected}"})
    result = publish_cli(grafana.url, "vllm", token="", GRAFANA_USER=USER, GRAFANA_PASSWORD=PASSWORD)
    assert_clean(result, EXIT_REMOTE, PASSWORD, f"{USER}:{PASSWORD}")
    assert "401" in result.stderr


def test_token_straddling_the_truncation_cut_is_not_printed_in_part(grafana):
    grafana.fail("GET", "/api/folders/", status=400, payload={"message": "x" * 180 + TOKEN})
    result = publish_cli(grafana.url, "vllm")
    assert_clean(result, EXIT_REMOTE, TOKEN)
    for length in range(6, len(TOKEN)):
        assert TOKEN[:length] not in result.stderr


# ------------------------------------------------------------------ slow and endless servers


def trickle_headers(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    while not stop.wait(0.3):
        conn.sendall(b"X-Slow: x\r\n")          # every read succeeds, so a read timeout never fires


def trickle_body(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{")
    while not stop.wait(0.3):
        conn.sendall(b" ")


def endless_body(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[")
    chunk = b"0," * 32768
    for _ in range(4 * MAX_BODY_BYTES // len(chunk)):   # bounded, so a broken client cannot eat the machine
        if stop.is_set():
            return
        conn.sendall(chunk)


@pytest.mark.parametrize("serve", [trickle_headers, trickle_body], ids=["headers", "body"])
def test_trickling_server_fails_at_the_deadline(serve):
    server = RawServer(serve)
    try:
        started = time.monotonic()
        result = publish_cli(server.url, "vllm", "--deadline", "2", "--read-timeout", "5")
        elapsed = time.monotonic() - started
    finally:
        server.close()
    assert_clean(result, EXIT_REMOTE, TOKEN)
    assert "within the 2s deadline" in result.stderr
    assert elapsed < 2 + 3


def test_endless_body_stops_at_the_size_cap():
    server = RawServer(endless_body)
    try:
        result = publish_cli(server.url, "vllm")
    finally:
        server.close()
    assert_clean(result, EXIT_REMOTE, TOKEN)
    assert "more than 16 MiB" in result.stderr


# ------------------------------------------------------------------ TLS choices the environment cannot override


def self_signed(directory, name: str) -> str:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return str(cert)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.fail("the TLS tests need the openssl command to make throw-away certificates")
    directory = tmp_path_factory.mktemp("tls")
    return {"grafana": self_signed(directory, "grafana"), "other": self_signed(directory, "other")}


@pytest.fixture
def tls_grafana(certificates, start_grafana):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert = certificates["grafana"]
    context.load_cert_chain(cert, cert.replace(".pem", ".key"))
    return start_grafana(tls=context, tokens={TOKEN: "Editor"})


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_env_ca_bundle_does_not_override_ca_cert(tls_grafana, certificates, variable):
    result = publish_cli(tls_grafana.url, "vllm", "--dry-run", "--ca-cert", certificates["grafana"],
                         **{variable: certificates["other"]})
    assert_clean(result, EXIT_OK, TOKEN)


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_env_ca_bundle_does_not_override_insecure(tls_grafana, certificates, variable):
    result = publish_cli(tls_grafana.url, "vllm", "--dry-run", "--insecure", **{variable: certificates["other"]})
    assert_clean(result, EXIT_OK, TOKEN)
    assert "warning: TLS verification is off" in result.stderr


def test_env_ca_bundle_still_applies_when_llmdash_has_no_tls_setting(tls_grafana, certificates):
    assert_clean(publish_cli(tls_grafana.url, "vllm", "--dry-run", REQUESTS_CA_BUNDLE=certificates["grafana"]),
                 EXIT_OK, TOKEN)
    refused = publish_cli(tls_grafana.url, "vllm", "--dry-run", "--retries", "0",
                          REQUESTS_CA_BUNDLE=certificates["other"])
    assert_clean(refused, EXIT_REMOTE, TOKEN)
    assert "TLS verification failed" in refused.stderr


def test_tls_failure_with_insecure_does_not_suggest_insecure(grafana):
    result = publish_cli(grafana.url.replace("http://", "https://"), "vllm", "--insecure", "--retries", "0")
    assert result.exit_code == EXIT_REMOTE
    error = result.stderr.splitlines()[-1]
    assert error.startswith("error: TLS handshake") and "--insecure" not in error


# ------------------------------------------------------------------ a save Grafana applied but did not confirm


@pytest.mark.parametrize("lose_answer", [
    lambda fake: fake.fail("POST", "/api/dashboards/db", status=500, applied=True),
    lambda fake: fake.fail("POST", "/api/dashboards/db", status=502, applied=True, times=10),
    lambda fake: fake.reset("POST", "/api/dashboards/db"),
], ids=["500-then-412", "502-every-time", "reset"])
def test_save_applied_then_answered_with_an_error_is_reported_saved(grafana, lose_answer):
    first = publish_cli(grafana.url, "vllm")
    assert first.exit_code == EXIT_OK, first.output
    lose_answer(grafana)
    with pytest.MonkeyPatch.context() as patch:                 # a generator change to publish
        patch.setattr("llmdash.cli.delivery.build_dashboards", lambda config, names=None: {"vllm": changed()})
        result = publish_cli(grafana.url, "vllm", "--retries", "2")
    assert_clean(result, EXIT_OK, TOKEN)
    assert ("vllm (llmdash-vllm): updated v2" in result.stdout
            and "saved (re-reading Grafana shows this build)" in result.stdout)
    assert "llmdash-vllm): refused" not in result.stdout and "1 refused" not in result.stdout
    # only our own first attempt caused one
    assert not re.search(r"\b412\b(?!\d)", result.stdout.replace(grafana.url, "GRAFANA"))
    assert "a generator change" in json.dumps(grafana.dashboards["llmdash-vllm"].model)


def test_first_save_applied_then_reset_is_reported_created(grafana):
    grafana.add_folder("llm-serving", "LLM serving")
    grafana.reset("POST", "/api/dashboards/db")
    result = publish_cli(grafana.url, "vllm")
    assert_clean(result, EXIT_OK, TOKEN)
    assert "vllm (llmdash-vllm): created v1" in result.stdout


# ------------------------------------------------------------------ input that used to end in a traceback


def test_non_latin1_token_is_a_usage_error(grafana):
    result = publish_cli(grafana.url, "vllm", token="glsa_ключ_" + "a" * 20)
    assert_clean(result, EXIT_USAGE, "glsa_ключ_" + "a" * 20)
    assert "HTTP header" in result.stderr and grafana.requests == []


def test_non_latin1_password_is_sent_as_utf8(grafana):
    grafana.users["пользователь"] = ("пароль-ключ", "Admin")
    result = publish_cli(grafana.url, "vllm", token="", GRAFANA_USER="пользователь", GRAFANA_PASSWORD="пароль-ключ")
    assert_clean(result, EXIT_OK, "пароль-ключ")


@pytest.mark.parametrize("flag, value", [
    *[(flag, value) for flag in ("--read-timeout", "--connect-timeout", "--deadline")
      for value in ("nan", "inf", "-1", "0")],
    ("--retry-backoff", "nan"),              # click's 0-60 range lets NaN through (every comparison is false)
])
def test_non_finite_or_non_positive_seconds_are_usage_errors(grafana, flag, value):
    result = publish_cli(grafana.url, "vllm", flag, value)
    assert_clean(result, EXIT_USAGE, TOKEN)
    assert grafana.requests == []


def test_non_finite_timeout_in_config_is_a_usage_error(grafana, tmp_path):
    config = tmp_path / "llmdash.yaml"
    config.write_text("grafana:\n  read_timeout: .nan\n")
    result = publish_cli(grafana.url, "vllm", "--config", str(config))
    assert result.exit_code == EXIT_USAGE and "Traceback" not in result.output
    assert result.stderr.startswith("error: ") and "read_timeout" in result.stderr
    assert grafana.requests == []


@pytest.mark.parametrize("method, path, payload, expected", [
    ("GET", "/api/health", ["ok"], "did not answer JSON"),
    ("GET", "/api/health", {"database": "ok", "version": 12}, None),
    ("GET", "/api/health", {"database": ["ok"], "version": "11"}, "reports database"),
    ("GET", "/api/dashboards/uid/", {"dashboard": {"version": "abc", "panels": []}, "meta": {}},
     "should be an integer"),
    ("GET", "/api/dashboards/uid/", {"dashboard": {"version": 3}, "meta": ["folder"]}, "no dashboard model"),
    ("GET", "/api/dashboards/uid/", {"dashboard": {"version": 3, "panels": {"a": 1}}, "meta": {}},
     "panels is not a list"),
    ("GET", "/api/dashboards/uid/", {"dashboard": {"version": 3, "tags": "x"}, "meta": {}}, "tags is not a list"),
    ("POST", "/api/dashboards/db", {"version": {"n": 1}, "uid": 7}, "should be an integer"),
    ("GET", "/api/folders/", [{"uid": "llm-serving"}], "did not answer JSON"),
])
def test_server_json_of_unexpected_types_is_one_line(grafana, method, path, payload, expected):
    # /api/health is asked twice: once by API discovery, once by publish itself
    grafana.fail(method, path, status=200, payload=payload, times=2 if path == "/api/health" else 1)
    result = publish_cli(grafana.url, "vllm", "--retries", "0")
    if expected is None:
        assert_clean(result, EXIT_OK, TOKEN)
        assert "Grafana 12:" in result.stdout
    else:
        assert_clean(result, EXIT_REMOTE, TOKEN)
        assert expected in result.stderr


def test_non_utf8_token_file_is_a_usage_error(grafana, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_bytes(b"glsa_\xff\xfe" + TOKEN.encode())
    result = publish_cli(grafana.url, "vllm", "--token-file", str(token_file), token="")
    assert_clean(result, EXIT_USAGE, TOKEN)
    assert "not UTF-8" in result.stderr and grafana.requests == []


def test_endless_token_file_is_refused_without_reading_it_all(grafana):
    started = time.monotonic()
    result = publish_cli(grafana.url, "vllm", "--token-file", "/dev/zero", token="")
    assert_clean(result, EXIT_USAGE, TOKEN)
    assert "larger than 64 KiB" in result.stderr and grafana.requests == []
    assert time.monotonic() - started < 5


def test_token_file_with_a_control_character_is_refused_without_echoing_it(grafana, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\x00\n")
    result = publish_cli(grafana.url, "vllm", "--token-file", str(token_file), token="")
    assert_clean(result, EXIT_USAGE, TOKEN)
    assert grafana.requests == []
