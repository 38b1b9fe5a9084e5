"""Every redaction shape of llmdash.redact, one literal input and its literal output each, chosen so that each
row is caught by one scrub alone: removing the Bearer/Basic, URL-userinfo or key=value scrub, or one encoding
of a known secret, fails the rows that name it."""

from __future__ import annotations

import pytest

from llmdash.redact import safe_line, scrub, url_without_credentials

# (shape, input, expected): credential-shaped strings, masked without being known
SHAPES = [
    # Bearer/Basic: the scheme kept, the credential (8+ token characters) masked
    ("bearer token", "upstream said: Bearer eyJhbGciOiJIUzI1NiJ9.cGF5bG9hZA.c2ln rejected",
     "upstream said: Bearer *** rejected"),
    ("bearer lowercase", "sent bearer abcdefgh12 twice", "sent bearer *** twice"),
    ("basic credentials", "challenge Basic dXNlcjpwYXNzd29yZA== failed", "challenge Basic *** failed"),
    ("bearer too short to be a token", "Bearer short", "Bearer short"),
    # user:password@ in a URL: the scheme and host kept
    ("url user and password", "fetch http://alice:hunter2@grafana:3000/api failed",
     "fetch http://***@grafana:3000/api failed"),
    ("url user only", "clone https://ghp_abcdef123@github.com/o/r.git", "clone https://***@github.com/o/r.git"),
    ("url compound scheme", "git+https://u:p@example.com/x", "git+https://***@example.com/x"),
    ("url without userinfo unchanged", "see http://grafana:3000/d/abc?x=1", "see http://grafana:3000/d/abc?x=1"),
    # key=value / key: value forms of a token, password or secret
    ("token query parameter", "GET /api?access_token=abc123&orgId=1", "GET /api?access_token=***&orgId=1"),
    ("api key header", "api_key: xyz789", "api_key: ***"),
    ("apikey", "apikey=Q1w2E3", "apikey=***"),
    ("password quoted", 'password="hunter2" rejected', 'password="***" rejected'),
    ("passwd", "passwd=letmein", "passwd=***"),
    ("secret in json", '{"secret": "abc", "name": "x"}', '{"secret": "***", "name": "x"}'),
    ("token colon", "token:deadbeef", "token:***"),
    ("authorization bearer header", "Authorization: Bearer eyJhbGciOi", "Authorization: ***"),
    ("authorization basic header", "authorization=Basic dXNlcjpwYXNz", "authorization=***"),
    # signed URLs' parameters: the name after `-` is the credential-shaped one
    ("signed url parameters",
     "GET /o?X-Amz-Credential=AKIA1%2F&X-Amz-Security-Token=FwoG1&X-Goog-Signature=9f1e&X-Amz-Date=20261202",
     "GET /o?X-Amz-Credential=***&X-Amz-Security-Token=***&X-Goog-Signature=***&X-Amz-Date=20261202"),
    ("nothing secret unchanged", "HTTP 502 from grafana: bad gateway", "HTTP 502 from grafana: bad gateway"),
]


@pytest.mark.parametrize("shape, text, expected", SHAPES, ids=[s[0] for s in SHAPES])
def test_credential_shapes(shape, text, expected):
    assert scrub(text) == expected


SECRET = "s3cr3t/pw+="
# (encoding, input, expected): a known secret as a server may echo it back
KNOWN = [
    ("as is", "echo s3cr3t/pw+= end", "echo *** end"),
    ("percent-encoded", "echo s3cr3t%2Fpw%2B%3D end", "echo *** end"),
    ("base64", "echo czNjcjN0L3B3Kz0= end", "echo *** end"),
    ("base64 unpadded", "echo czNjcjN0L3B3Kz0 end", "echo *** end"),
    ("case-insensitive", "echo S3CR3T/PW+= end", "echo *** end"),
]


@pytest.mark.parametrize("encoding, text, expected", KNOWN, ids=[k[0] for k in KNOWN])
def test_known_secret(encoding, text, expected):
    assert scrub(text, [SECRET]) == expected


def test_known_secret_json_escaped():
    assert scrub('{"error": "bad key a\\"b"}', ['a"b']) == '{"error": "bad key ***"}'


def test_known_secret_json_escaped_above_the_basic_plane():
    # an encoder escaping non-ASCII (Python's json by default) writes U+1F600 as its UTF-16 surrogate pair
    assert scrub('{"error": "bad key p\\ud83d\\ude00w"}', ["p\U0001f600w"]) == '{"error": "bad key ***"}'


def test_known_secret_json_escaped_form_feed():
    # JSON's \f (and \b) short escapes: only the JSON-escaped form of the secret matches them
    assert scrub('{"error": "bad key a\\fb"}', ["a\fb"]) == '{"error": "bad key ***"}'


def test_known_secret_percent_encoded_space():
    # the one form where quote and quote_plus differ: a space is %20 in a path, + in a form
    assert scrub("/p/my%20pass%20word/x", ["my pass word"]) == "/p/***/x"


def test_known_secret_form_encoded_space():
    assert scrub("q=my+pass+word&x", ["my pass word"]) == "q=***&x"


def test_known_secret_urlsafe_base64():
    # b"??>>" is "Pz8+Pg==" in standard base64 and "Pz8-Pg" in the URL-safe alphabet, unpadded
    assert scrub("echo Pz8+Pg== and Pz8-Pg end", ["??>>"]) == "echo *** and *** end"


URLS = [
    ("http://u:p%40ss@[::1]:9090/api/v1/query", "http://***@[::1]:9090/api/v1/query"),
    ("https://admin:admin@grafana.example:3000/", "https://***@grafana.example:3000/"),
    ("https://token@grafana.example/api?x=1#f", "https://***@grafana.example/api?x=1#f"),
    ("http://prometheus:9090/", "http://prometheus:9090/"),
]


@pytest.mark.parametrize("url, expected", URLS, ids=[u[1] for u in URLS])
def test_url_without_credentials(url, expected):
    assert url_without_credentials(url) == expected


LINES = [
    ("one line", "first\nsecond\tthird", "first second third"),
    ("escape shown", "title \x1b[2J end", "title \\x1b[2J end"),
    ("bel shown", "a\x07b", "a\\x07b"),
    ("bidi override shown", "x\u202ey", "x\\u202ey"),
    ("scrubbed before cut", "Bearer abcdefghijklmnop " + "z" * 10, "Bearer *** zzzzzzzzzz"),
]


@pytest.mark.parametrize("case, text, expected", LINES, ids=[c[0] for c in LINES])
def test_safe_line(case, text, expected):
    assert safe_line(text) == expected


def test_safe_line_cuts_at_the_limit_with_an_ellipsis():
    assert safe_line("abcdefghij", limit=5) == "abcd…"
    assert safe_line("abcde", limit=5) == "abcde"
