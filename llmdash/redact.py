"""One way to print what a server or a file said: secrets removed, escapes shown, one line.

Every command that quotes server or file content (publish, doctor, diff) goes through
`safe_line`, and every error line the CLI prints through `error_line`, so a credential echoed by
a server, a token in a URL, or a terminal escape sequence in a scraped label value never reaches
the user's terminal or CI log as it came.

Secrets are looked for in the whole message after it is unwrapped: JSON and Go string escapes
decoded (Go writes `&` as `\u0026`), line breaks (real or escaped) dropped, so a token a server
split across lines or escaped is still found; what is found is masked in the text as it is.
"""

from __future__ import annotations

import base64
import bisect
import json
import re
from typing import Any, Iterable
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

MESSAGE_CHARS = 200     # server or file text quoted in one error line
MASK = "***"

# user:password@ in any URL-looking text, and the usual token/password query or header forms
# Quantifiers bounded so a long line without "://" or "@" costs linear time, not quadratic.
_URL_USERINFO = re.compile(r"(?i)(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,31}://(?P<value>[^/\s@]{0,1024})@")
_KEY_VALUE = re.compile(
    r"(?i)(?:(?:access_?token|api_?key|token|password|passwd|secret|authorization)[\"']?\s*[=:]\s*[\"']?"
    # query-parameter names that carry a credential (signed URLs, API keys), only as `name=`; a name after `-`
    # counts, so X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token and X-Goog-Signature are matched too
    r"|(?<![a-z0-9])(?:auth|key|sig|signature|pwd|access_?key|secret_?key|client_?secret|credential)=)"
    r"(?!\*\*\*)(?P<value>(?:bearer\s+|basic\s+)?[^\s\"'&,;]+)")   # (?!***): scrubbing twice changes nothing
_BEARER = re.compile(r"(?i)\b(?:bearer|basic)\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})")
# What the unwrapped view decodes: \uXXXX (a surrogate pair as the one character it encodes: JSON encoders that
# escape non-ASCII write one above U+FFFF so) and the short escapes of a JSON (or Go) string, and line breaks.
_WRAPPING = re.compile(r'\\u((?:[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})|[0-9a-fA-F]{4})'
                       r'|\\([nrt"/\\])|[\r\n\x0b\x0c\x85\u2028\u2029]')
_SHORT_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "/": "/", "\\": "\\"}
_LINE_BREAKS = "\r\n\x0b\x0c\x85\u2028\u2029"


def encodings(secret: str) -> tuple[str, ...]:
    """The forms a server may echo a secret in: as is, URL-, JSON- and base64-encoded."""
    raw = secret.encode()
    return (secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1],
            base64.b64encode(raw).decode(), base64.b64encode(raw).decode().rstrip("="),
            base64.urlsafe_b64encode(raw).decode().rstrip("="))


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known secret (in every encoding) and every credential-shaped string masked, each
    found in the unwrapped view of the whole text (escapes decoded, line breaks dropped)."""
    view = _Unwrapped(text)
    spans = []
    forms = {form for secret in secrets if secret for form in encodings(secret)}
    if forms:
        pattern = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
        spans += [m.span() for m in re.finditer(pattern, view.text, flags=re.IGNORECASE)]
    for shape in (_URL_USERINFO, _BEARER, _KEY_VALUE):
        spans += [m.span("value") for m in shape.finditer(view.text) if m.end("value") > m.start("value")]
    return view.masked(spans)


class _Unwrapped:
    """`text` as a reader (or a JSON decoder) would join it, with the way back to `text`: each character of
    the view comes from one run of `text`, a plain character or a whole escape."""

    def __init__(self, text: str):
        self.original = text
        self.text, self._view_starts, self._starts, self._widths = text, [0], [0], [0]   # width 0: 1:1 run
        if not _WRAPPING.search(text):
            return
        parts, view_starts, starts, widths = [], [], [], []
        at = size = 0
        for match in _WRAPPING.finditer(text):
            if match.start() > at:
                view_starts.append(size)
                starts.append(at)
                widths.append(0)
                parts.append(text[at:match.start()])
                size += match.start() - at
            hexa, short = match.group(1), match.group(2)
            char = json.loads(f'"{match.group(0)}"') if hexa else _SHORT_ESCAPES[short] if short else match.group(0)
            if char not in _LINE_BREAKS:
                view_starts.append(size)
                starts.append(match.start())
                widths.append(match.end() - match.start())
                parts.append(char)
                size += 1
            at = match.end()
        if at < len(text):
            view_starts.append(size)
            starts.append(at)
            widths.append(0)
            parts.append(text[at:])
        self.text, self._view_starts, self._starts, self._widths = "".join(parts), view_starts, starts, widths

    def _source(self, index: int) -> tuple[int, int]:
        """Where in the original the view's character `index` comes from: [start, end)."""
        segment = bisect.bisect_right(self._view_starts, index) - 1
        width = self._widths[segment]
        if width == 0:
            start = self._starts[segment] + index - self._view_starts[segment]
            return start, start + 1
        return self._starts[segment], self._starts[segment] + width

    def masked(self, spans: list[tuple[int, int]]) -> str:
        """The original with the text behind each view span (and any line break within it) replaced by MASK."""
        if not spans:
            return self.original
        cuts: list[list[int]] = []
        for start, end in sorted(spans):
            first, last = self._source(start)[0], self._source(end - 1)[1]
            if cuts and first <= cuts[-1][1]:
                cuts[-1][1] = max(cuts[-1][1], last)
            else:
                cuts.append([first, last])
        out, at = [], 0
        for first, last in cuts:
            out += [self.original[at:first], MASK]
            at = last
        out.append(self.original[at:])
        return "".join(out)


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


def error_line(message: Any, secrets: Iterable[str] = ()) -> str:
    """An error as the CLI prints it, whichever command raised it: scrubbed whole, on one line, escapes
    shown (a path with a newline in it must not split the line; a URL in a config value keeps no password)."""
    return "error: " + escape_controls(scrub(str(message), secrets))


def safe_line(text: Any, secrets: Iterable[str] = (), limit: int = MESSAGE_CHARS) -> str:
    """Server- or file-supplied text made safe to print: scrubbed whole first, then on one line,
    escapes shown, cut to `limit` characters."""
    flat = " ".join(scrub(str(text), secrets).split())
    flat = escape_controls(flat)
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"
