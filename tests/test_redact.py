"""llmdash.redact: the one path every command prints server or file text through."""

from __future__ import annotations

import base64

from llmdash.redact import safe_line, url_without_credentials


def test_known_secrets_are_masked_in_every_encoding_and_credential_shapes_without_being_known():
    secret = "s3cr3t/pw+="
    echoed = " ".join([secret, base64.b64encode(secret.encode()).decode(), "s3cr3t%2Fpw%2B%3D",
                       "http://alice:other@grafana:3000/api", "token=abc123def", "Authorization: Bearer eyJhbGciOi"])
    line = safe_line(echoed, [secret], limit=10_000)
    assert secret not in line and "s3cr3t" not in line.lower()
    assert "alice" not in line and "other" not in line and "abc123def" not in line and "eyJhbGciOi" not in line
    assert "grafana:3000/api" in line        # where it happened stays readable


def test_escape_sequences_are_shown_never_sent_and_the_result_is_one_line():
    line = safe_line("title \x1b]0;owned\x07 \x1b[2J \u202e gnp.exe\nsecond line")
    assert "\x1b" not in line and "\x07" not in line and "\u202e" not in line and "\n" not in line
    assert "\\x1b]0;owned\\x07" in line and "second line" in line


def test_a_url_keeps_host_port_and_path_without_user_or_password():
    assert url_without_credentials("http://u:p%40ss@[::1]:9090/api/v1/query") == "http://***@[::1]:9090/api/v1/query"
    assert url_without_credentials("http://prometheus:9090/") == "http://prometheus:9090/"


def test_long_text_without_any_url_is_scrubbed_whole():
    text = "a" * 200_000 + " http://bob:pw@h/ " + "b://" * 50_000
    line = safe_line(text, limit=10**7)
    assert "bob" not in line and line.startswith("a" * 1000)
