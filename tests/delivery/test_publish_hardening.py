"""Issue 20: what a hostile or broken Grafana, or a careless flag, could still do to `llmdash publish`.

Every test runs the real command against a server on 127.0.0.1 (the fake Grafana, or a bare
socket server for answers no HTTP library would send) and checks what an operator sees: the
documented exit code, one `error:` line, no traceback, nothing raw from the server.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
import time
import tracemalloc

import pytest
from click.testing import CliRunner

from tests.support.builds import default_dashboards
from llmdash.cli.delivery import publish_command
from llmdash.delivery.transport import MAX_BODY_BYTES
from llmdash.errors import EXIT_OK, EXIT_REMOTE, EXIT_USAGE
from tests.support.fake_grafana import FakeGrafana, RawServer

pytestmark = pytest.mark.publish

TOKEN = "glsa_" + "4e1b7c9d2a6f8035" * 2
USER, PASSWORD = "deployer", "tr0ub4dor&3/purple+monkey"
# (Grafana version, dashboard.grafana.app versions under /apis): a Grafana 11 (/api) and a 13 (/apis v1)
LEGACY, RESOURCE = ("11.6.0", ()), ("13.0.0", ("v1", "v1beta1"))


def fake(release=LEGACY) -> FakeGrafana:
    version, offered = release
    return FakeGrafana(tokens={TOKEN: "Editor"}, users={USER: (PASSWORD, "Admin")}, version=version,
                       resource_versions=offered).start()


@pytest.fixture
def grafana():
    server = fake()
    yield server
    server.stop()


def publish_cli(url: str, *args: str, token: str = TOKEN, **env: str):
    environment = {"GRAFANA_URL": url, "GRAFANA_TOKEN": token, "GRAFANA_USER": "", "GRAFANA_PASSWORD": "",
                   "REQUESTS_CA_BUNDLE": "", "CURL_CA_BUNDLE": "", **env}
    return CliRunner().invoke(publish_command, ["--retry-backoff", "0.01", *args], env=environment)


def assert_one_error_line(result, exit_code: int) -> None:
    shown = result.stdout + result.stderr
    assert result.exit_code == exit_code, shown
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in shown
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr


def changed(stem: str = "vllm") -> dict:
    """The built dashboard with a generator change in it (a new panel description)."""
    model = copy.deepcopy(default_dashboards()[stem])
    next(p for p in model["panels"] if p["type"] != "row")["description"] = "a generator change"
    return model


# ------------------------------------------------------------------ bodies are capped, redirects included


def redirect_with_endless_body(budget: int):
    """Each connection: a 302 back to /api/health whose body goes on until `budget` bytes in all were sent."""
    sent = [0]

    def serve(conn, stop):
        conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /api/health\r\nContent-Type: text/plain\r\n"
                     b"Connection: close\r\n\r\n")
        chunk = b"x" * 65536
        while sent[0] < budget and not stop.is_set():
            conn.sendall(chunk)
            sent[0] += len(chunk)

    return serve, sent


def test_a_redirects_endless_body_is_not_read_past_the_cap():
    serve, sent = redirect_with_endless_body(budget=10 * MAX_BODY_BYTES)
    server = RawServer(serve)
    tracemalloc.start()
    try:
        result = publish_cli(server.url, "vllm", "--retries", "0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        server.close()
    # what the server got out: the cap plus what loopback socket buffers hold, not the whole budget
    assert sent[0] < 2 * MAX_BODY_BYTES, f"{sent[0] / 2**20:.0f} MiB were read"
    assert peak < 4 * MAX_BODY_BYTES, f"peak {peak / 2**20:.0f} MiB"
    assert_one_error_line(result, EXIT_REMOTE)
    assert "more than 16 MiB" in result.stderr


# ------------------------------------------------------------------ a token file that never ends


def publish_process(url: str, token_file: str) -> subprocess.CompletedProcess:
    """`llmdash publish` in its own process, so a hang is a failed test (killed after 20 s), not a stuck suite."""
    env = {**os.environ, "GRAFANA_URL": url, "GRAFANA_TOKEN": "", "GRAFANA_USER": "", "GRAFANA_PASSWORD": ""}
    return subprocess.run([sys.executable, "-m", "llmdash.cli.main", "publish", "--token-file", token_file, "vllm"],
                          env=env, capture_output=True, text=True, timeout=20)


def test_token_file_that_is_a_fifo_without_a_writer_is_refused_at_once(grafana, tmp_path):
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = publish_process(grafana.url, str(fifo))
    assert result.returncode == EXIT_USAGE, result.stderr
    assert result.stderr.startswith("error: --token-file") and result.stderr.count("\n") == 1, result.stderr
    assert time.monotonic() - started < 15 and grafana.requests == []


def test_token_file_that_is_a_pipe_whose_writer_never_writes_times_out(grafana, tmp_path):
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    silent_writer = os.open(fifo, os.O_RDWR)          # holds the write end open (Linux), writes nothing
    try:
        result = publish_process(grafana.url, str(fifo))
    finally:
        os.close(silent_writer)
    assert result.returncode == EXIT_USAGE, result.stderr
    assert result.stderr.startswith("error: --token-file") and "sent no token within 5s" in result.stderr
    assert result.stderr.count("\n") == 1 and grafana.requests == []


# ------------------------------------------------------------------ answers of the wrong type


@pytest.mark.parametrize("apis, args, exit_code, expected", [
    ({"kind": "APIGroupList", "groups": 5}, (), EXIT_REMOTE, "answered /apis with groups as a int"),
    ({"groups": [{"name": "dashboard.grafana.app", "versions": 7}]}, (), EXIT_REMOTE, "versions as a int"),
    ({"groups": [{"name": "dashboard.grafana.app", "versions": [{"version": 5}]}]}, ("--api", "resource"),
     EXIT_USAGE, "offers no resource API"),
], ids=["groups-a-number", "versions-a-number", "version-a-number"])
def test_discovery_answer_of_the_wrong_type_is_one_line(apis, args, exit_code, expected):
    server = fake(RESOURCE)
    server.fail("GET", "/apis", status=200, payload=apis)
    try:
        result = publish_cli(server.url, "vllm", *args)
    finally:
        server.stop()
    assert_one_error_line(result, exit_code)
    assert expected in result.stderr


def test_health_version_that_is_not_a_number_counts_as_unknown(grafana):
    grafana.fail("GET", "/api/health", status=200, payload={"database": "ok", "version": "²"}, times=2)
    result = publish_cli(grafana.url, "vllm")
    assert result.exit_code == EXIT_OK, result.output
    assert "Grafana ²: publishing" in result.stdout and "Traceback" not in result.output


@pytest.mark.parametrize("release", [LEGACY, RESOURCE], ids=["api", "apis"])
@pytest.mark.parametrize("key, value", [("y", "3"), ("x", None), ("h", [1])])
def test_live_dashboard_with_a_non_numeric_grid_position_is_one_line(release, key, value):
    server = fake(release)
    try:
        assert publish_cli(server.url, "vllm").exit_code == EXIT_OK
        server.dashboards["llmdash-vllm"].model["panels"][1]["gridPos"][key] = value
        result = publish_cli(server.url, "vllm")
    finally:
        server.stop()
    assert_one_error_line(result, EXIT_REMOTE)
    assert f"malformed dashboard llmdash-vllm: panels[1].gridPos.{key} is not a number" in result.stderr


@pytest.mark.parametrize("url", ["http://a..b/", "http://[::1/", "http://grafana:99999/", "http://[::1/x@y"])
def test_malformed_grafana_url_is_a_usage_error(url):
    result = publish_cli("", "vllm", GRAFANA_URL=url)
    assert_one_error_line(result, EXIT_USAGE)
    assert "Grafana URL" in result.stderr and "malformed" in result.stderr


# ------------------------------------------------------------------ terminal escapes from Grafana


def test_escape_sequences_in_a_live_title_are_shown_escaped(grafana):
    assert publish_cli(grafana.url, "vllm").exit_code == EXIT_OK
    hostile = "vLLM \x1b]0;owned\x07\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\ \x1b[2J\x9b31m"
    grafana.dashboards["llmdash-vllm"].model["title"] = hostile
    result = publish_cli(grafana.url, "vllm")
    shown = result.stdout + result.stderr
    assert result.exit_code == 1 and "refused" in result.stdout, shown
    assert not any(char in shown for char in "\x1b\x07\x9b"), repr(shown)
    assert "\\x1b]0;owned\\x07" in shown                      # the reviewer still sees what is there


# ------------------------------------------------------------------ a save stored, then answered 502


@pytest.mark.parametrize("release, path", [(LEGACY, "/api/dashboards/db"), (RESOURCE, "/apis/")], ids=["api", "apis"])
@pytest.mark.parametrize("first", [True, False], ids=["create", "update"])
def test_save_stored_then_answered_502_reports_the_502(release, path, first):
    server = fake(release)
    try:
        if not first:
            assert publish_cli(server.url, "vllm").exit_code == EXIT_OK
        method = "PUT" if path == "/apis/" and not first else "POST"
        server.fail(method, path, status=502, payload={"message": "Bad Gateway"}, applied=True)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("llmdash.cli.delivery.build_dashboards", lambda config, names=None: {"vllm": changed()})
            result = publish_cli(server.url, "vllm")
        stored = json.dumps(server.dashboards["llmdash-vllm"].model)
    finally:
        server.stop()
    assert result.exit_code == EXIT_OK, result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("[1/1] vllm"))
    assert line.startswith(f"[1/1] vllm (llmdash-vllm): {'created v1' if first else 'updated v2'} - saved")
    assert "502" in line and "Bad Gateway" in line and "re-reading" in line
    assert "412" not in result.output and "409" not in result.output     # the retry met our own first attempt
    assert "a generator change" in stored


# ------------------------------------------------------------------ credentials a server echoes back


def echo_request(request) -> dict:
    """An error body quoting the request as a careless proxy would: header, decoded credentials, URL."""
    authorization = request.headers.get("Authorization", "")
    decoded = base64.b64decode(authorization[6:]).decode() if authorization.startswith("Basic ") else ""
    host = request.headers.get("Host", "")
    return {"message": f"denied {authorization} ({decoded}) for http://{decoded}@{host}{request.path}",
            "status": f"Authorization: {authorization}", "reason": authorization}


ECHOED_FAILURES = [
    ("GET", "/api/health", 503), ("GET", "/api/folders/", 401), ("GET", "/api/folders/", 403),
    ("POST", "/api/folders", 400), ("GET", "/api/dashboards/uid/", 500), ("POST", "/api/dashboards/db", 400),
    ("POST", "/api/dashboards/db", 412),
]


@pytest.mark.parametrize("auth", ["token", "basic"])
@pytest.mark.parametrize("method, path, status", ECHOED_FAILURES,
                         ids=[f"{m}-{p.strip('/').replace('/', '-')}-{s}" for m, p, s in ECHOED_FAILURES])
def test_credentials_echoed_in_error_bodies_never_reach_the_output(grafana, auth, method, path, status):
    grafana.fail(method, path, status=status, payload=echo_request, times=10)
    credentials = {"token": TOKEN} if auth == "token" else {"token": "", "GRAFANA_USER": USER,
                                                            "GRAFANA_PASSWORD": PASSWORD}
    result = publish_cli(grafana.url, "vllm", "--retries", "1", **credentials)
    shown = result.stdout + result.stderr
    assert result.exit_code != EXIT_OK and "Traceback" not in shown, shown
    assert grafana.requests and "denied" in shown                # the echo was printed, scrubbed
    secret = TOKEN if auth == "token" else PASSWORD
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    for form in (secret, secret[:8], basic, basic[:12]):
        assert form not in shown, f"{form!r} leaked: {shown}"


def test_credentials_in_the_grafana_url_are_refused_without_being_shown(grafana):
    url = grafana.url.replace("http://", f"http://{USER}:{PASSWORD}@")
    result = publish_cli(url, "vllm", token="")
    assert_one_error_line(result, EXIT_USAGE)
    assert PASSWORD not in result.output and PASSWORD[:8] not in result.output and grafana.requests == []
