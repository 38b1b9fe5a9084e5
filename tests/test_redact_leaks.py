"""Issue 28's secret leaks, one row each: what a server, a page or a config said, and what must not be printed.

The first table runs the one redaction path on the exact text; the second sends the same text over a real
loopback socket (or a config file) to the real command and reads what it printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from llmdash.cli.delivery import publish_command
from llmdash.redact import error_line, safe_line
from tests.doctor.servers import Routes, doctor

LLMDASH = Path(sys.executable).with_name("llmdash")
TOKEN = "glsa_4e1b7c9d2a6f80354e1b7c9d2a6f8035"
PASSWORD = "pa&ss<wo>rd"
# (row, text as it arrived, the secrets the command knows, fragments that must not be printed)
LEAKS = [
    ("token split across a line break in a 400 body", f"invalid {TOKEN[:14]}\n{TOKEN[14:]} for this org",
     (TOKEN,), (TOKEN[:14] + TOKEN[14:], TOKEN[14:], TOKEN[:14])),
    ("token split across an escaped line break", f'{{"error": "{TOKEN[:10]}\\n{TOKEN[10:]}"}}',
     (TOKEN,), (TOKEN[10:], TOKEN[:10])),
    ("password in Go's JSON escaping in a 401 body",
     '{"message":"invalid login pa\\u0026ss\\u003cwo\\u003erd"}', (PASSWORD,), ("pa\\u0026ss", "ss\\u003cwo")),
    ("URL userinfo in a config error",
     "alerts.runbook_url_template: must contain {alertname}, got 'https://ops:Wiki-PW-9@wiki.example/x'", (),
     ("Wiki-PW-9", "ops:")),
    ("URL userinfo in a rules.target error",
     "rules.target: unknown ruler 'https://ops:Ruler-PW-7@ruler.example' (known: prometheus)", (),
     ("Ruler-PW-7",)),
    ("password split by an escaped newline in a label value",
     'model_name="Se\\ncret-77"', ("Secret-77",), ("Se\\ncret", "cret-77")),
    ("password split by a real newline in a label value", "model_name=Se\ncret-77", ("Secret-77",), ("cret-77",)),
    *[(f"credential query parameter {name}", f"http://127.0.0.1:9/metrics?{name}=Q-{n}-value&x=1", (),
       (f"Q-{n}-value",))
      for n, name in enumerate(("auth", "key", "sig", "X-Amz-Signature", "access_key", "pwd"))],
]


@pytest.mark.parametrize("text, secrets, forbidden", [row[1:] for row in LEAKS], ids=[row[0] for row in LEAKS])
def test_each_leak_is_masked_by_the_one_path(text, secrets, forbidden):
    for shown in (safe_line(text, secrets, limit=10_000), error_line(text, secrets)):
        assert [fragment for fragment in forbidden if fragment in shown] == [], shown
        assert "***" in shown


def test_what_is_not_a_secret_stays_readable():
    line = error_line("alerts.runbook_url_template: got 'https://wiki.example/x?page=1&monkey=ok'")
    assert line == "error: alerts.runbook_url_template: got 'https://wiki.example/x?page=1&monkey=ok'"
    assert safe_line(r'{"message": "C:\\dir\\n"}') == r'{"message": "C:\\dir\\n"}'   # shown as it came


# ------------------------------------------------------------------ over loopback sockets and files


def _publish(url: str, **env: str):
    environment = {"GRAFANA_URL": url, "GRAFANA_TOKEN": TOKEN, "GRAFANA_USER": "", "GRAFANA_PASSWORD": "",
                   "REQUESTS_CA_BUNDLE": "", "CURL_CA_BUNDLE": "", **env}
    return CliRunner().invoke(publish_command, ["--retries", "0", "vllm"], env=environment)


@pytest.mark.publish
def test_a_token_split_across_lines_in_a_400_body_is_not_printed():
    body = f"bad request: token {TOKEN[:14]}\r\n{TOKEN[14:]} is not valid here".encode()
    with Routes(lambda *_: (400, body, {"Content-Type": "text/plain"})) as server:
        result = _publish(f"http://127.0.0.1:{server.port}")
    assert result.exit_code != 0 and "bad request" in result.output, result.output
    assert TOKEN[14:] not in result.output and TOKEN[:14] not in result.output, result.output


@pytest.mark.publish
def test_a_password_in_gos_json_escaping_in_a_401_body_is_not_printed():
    body = b'{"error":"invalid credentials for deployer:pa\\u0026ss\\u003cwo\\u003erd"}'   # no "message"
    with Routes(lambda *_: (401, body, {"Content-Type": "application/json"})) as server:
        result = _publish(f"http://127.0.0.1:{server.port}", GRAFANA_TOKEN="", GRAFANA_USER="deployer",
                          GRAFANA_PASSWORD=PASSWORD)
    assert result.exit_code != 0 and "invalid credentials" in result.output, result.output
    assert "pa\\u0026ss" not in result.output and "\\u003cwo" not in result.output, result.output


@pytest.mark.process
@pytest.mark.parametrize("key, value", [("alerts", {"runbook_url_template": "https://ops:Wiki-PW-9@wiki.example/x"}),
                                        ("rules", {"target": "https://ops:Ruler-PW-7@ruler.example"})])
def test_a_config_error_never_quotes_a_urls_password(tmp_path, key, value):
    (tmp_path / "llmdash.yaml").write_text(yaml.safe_dump({key: value}))
    result = subprocess.run([str(LLMDASH), "build", "--out", str(tmp_path / "out")], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "PW" not in result.stderr and "ops:" not in result.stderr, result.stderr
    assert "***@" in result.stderr


@pytest.mark.process
def test_doctor_never_prints_a_password_split_by_a_newline_in_a_label_value():
    page = 'vllm:num_requests_running{model_name="Se\\ncret-77",engine="vllm"} 1\n'.encode()
    with Routes(lambda *_: (200, page, {"Content-Type": "text/plain; version=0.0.4"})) as server:
        result = doctor("--metrics", f"http://ops:Secret-77@127.0.0.1:{server.port}/metrics")
    shown = result.stdout + result.stderr
    assert "Traceback" not in shown and server.seen, shown
    assert "cret-77" not in shown and "Se\\ncret" not in shown and "Secret-77" not in shown, shown


@pytest.mark.process
def test_doctor_never_prints_a_credential_query_parameter():
    query = "auth=Q0-value&key=Q1-value&sig=Q2-value&X-Amz-Signature=Q3-value&access_key=Q4-value&pwd=Q5-value"
    with Routes(lambda *_: (404, b"no")) as server:
        result = doctor("--metrics", f"http://127.0.0.1:{server.port}/metrics?{query}")
    shown = result.stdout + result.stderr
    assert result.returncode == 3 and "HTTP 404" in shown, shown
    assert [f"Q{n}-value" for n in range(6) if f"Q{n}-value" in shown] == [], shown
