"""One way to print what a server or a file said: secrets removed, escapes shown, one line.

Every command that quotes server or file content (publish, doctor, diff) goes through
`safe_line`, so a credential echoed by a server, a token in a URL, or a terminal escape
sequence in a scraped label value never reaches the user's terminal or CI log as it came.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Iterable
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

MESSAGE_CHARS = 200     # server or file text quoted in one error line
MASK = "***"

# user:password@ in any URL-looking text, and the usual token/password query or header forms
# Quantifiers bounded so a long line without "://" or "@" costs linear time, not quadratic.
_URL_USERINFO = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]{0,31}://)[^/\s@]{0,1024}@")
_KEY_VALUE = re.compile(
    r"(?i)((?:access_?token|api_?key|token|password|passwd|secret|authorization)[\"']?\s*[=:]\s*[\"']?)"
    r"(?:bearer\s+|basic\s+)?[^\s\"'&,;]+")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")


def encodings(secret: str) -> tuple[str, ...]:
    """The forms a server may echo a secret in: as is, URL-, JSON- and base64-encoded."""
    raw = secret.encode()
    return (secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1],
            base64.b64encode(raw).decode(), base64.b64encode(raw).decode().rstrip("="),
            base64.urlsafe_b64encode(raw).decode().rstrip("="))


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known secret (in every encoding) and every credential-shaped string masked."""
    forms = {form for secret in secrets if secret for form in encodings(secret)}
    if forms:
        pattern = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
        text = re.sub(pattern, MASK, text, flags=re.IGNORECASE)
    text = _URL_USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return _KEY_VALUE.sub(lambda m: m.group(1) + MASK, text)


def url_without_credentials(url: str) -> str:
    """A URL fit to print: user and password removed (the rest kept, so the user sees where)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return scrub(url)
    if parts.username is None and parts.password is None:
        return url
    host = f"[{host}]" if ":" in host else host
    return urlunsplit((parts.scheme, f"{MASK}@{host}{port}", parts.path, parts.query, parts.fragment))


def escape_controls(text: str) -> str:
    """Control and escape characters (ESC, BEL, C1, bidi overrides) shown as \\xNN / \\uNNNN, never sent raw."""
    out = []
    for char in text:
        if char.isprintable() or char == " ":
            out.append(char)
        elif ord(char) < 0x100:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(f"\\u{ord(char):04x}")
    return "".join(out)


def safe_line(text: Any, secrets: Iterable[str] = (), limit: int = MESSAGE_CHARS) -> str:
    """Server- or file-supplied text made safe to print: scrubbed whole first, then on one line,
    escapes shown, cut to `limit` characters."""
    flat = " ".join(scrub(str(text), secrets).split())
    flat = escape_controls(flat)
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"
