"""The credentials in a doctor URL never reach its output: not in a URL it prints, not in a Prometheus
error that repeats them, not in a line of a page it quotes."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest

from tests.doctor.servers import Routes, assert_one_line, closed_port, doctor, page

pytestmark = pytest.mark.process   # runs the llmdash command in a fresh interpreter, as a user does

USER, PASSWORD = "alice", "p@ss:w/rd s3cret"
USERINFO = f"{USER}:{quote(PASSWORD, safe='')}"


def forms(*secrets: str) -> list[str]:
    """What a server may echo a secret as: itself, URL-encoded, base64 (alone and in Basic auth)."""
    out = []
    for secret in secrets:
        out += [secret, quote(secret, safe=""), base64.b64encode(secret.encode()).decode()]
    return out + [base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()]


def assert_clean(result) -> None:
    shown = result.stdout + result.stderr
    leaked = [form for form in forms(PASSWORD, "s3cret") if form in shown]
    assert leaked == [], shown


def echoing(status: int, body_of):
    """A server answering every request with `status` and `body_of(what it was sent)`."""
    def answer(path, query, headers):
        sent = headers.get("Authorization", "")
        decoded = base64.b64decode(sent.split()[-1]).decode() if sent else ""
        return status, body_of(f"{sent} {decoded} {path}?{query}")
    return answer


def test_a_prometheus_error_repeating_the_credentials_is_scrubbed():
    with Routes(echoing(422, lambda sent: {"status": "error", "errorType": "bad_data",
                                           "error": f"user {USER} password {PASSWORD} sent {sent}"})) as server:
        result = doctor("--prometheus", f"http://{USERINFO}@127.0.0.1:{server.port}")
    assert_one_line(result, 3, "GET /api/v1/label/__name__/values failed (HTTP 422: user ***")
    assert "Basic ***" in result.stderr
    assert_clean(result)


def test_a_line_of_a_metrics_page_repeating_the_credentials_is_scrubbed():
    good = page("vllm").splitlines()[0]
    with Routes(echoing(200, lambda sent: f"{good}\nnot a sample: {PASSWORD} {sent}\n".encode())) as server:
        result = doctor("--metrics", f"http://{USERINFO}@127.0.0.1:{server.port}/metrics")
    assert_one_line(result, 2, "line 2: not Prometheus exposition text: not a sample: ***")
    assert_clean(result)


def test_a_page_with_the_credentials_in_a_label_value_reports_them_scrubbed():
    # Triton's waiting gauge is one value of a label: a page without that value quotes the values it has
    text = page("tensorrt-llm-triton").replace('request_type="waiting"', f'request_type="{PASSWORD}"')
    with Routes(lambda *_: (200, text.encode())) as server:
        result = doctor("--metrics", f"http://{USERINFO}@127.0.0.1:{server.port}/metrics")
    assert result.returncode == 1, result.stderr
    [quoted, *_] = [line for line in result.stdout.splitlines()
                    if 'label request_type="waiting" (values present: ' in line]
    assert '"***"' in quoted
    assert_clean(result)


def test_every_url_the_doctor_prints_is_without_credentials():
    port = closed_port()
    with Routes(lambda *_: (404, b"no")) as server:
        missing = doctor("--metrics", f"http://{USERINFO}@127.0.0.1:{server.port}/nope?token=s3cret")
    unreachable = doctor("--prometheus", f"http://{USERINFO}@127.0.0.1:{port}/")
    malformed = doctor("--prometheus", f"http://{USERINFO}@127.0.0.1:99999/")
    assert_one_line(missing, 3, f"http://***@127.0.0.1:{server.port}/nope?token=***: HTTP 404")
    assert_one_line(unreachable, 3, f"prometheus at http://***@127.0.0.1:{port}: unreachable")
    assert_one_line(malformed, 2, "--prometheus http://***@127.0.0.1:99999/: not a valid URL")
    for result in (missing, unreachable, malformed):
        assert_clean(result)
        assert USER not in result.stderr
