"""What series exist: read from a scraped /metrics text or asked of a Prometheus (read-only).

Both sources end as the same `Inventory` (series name -> the label sets seen), so deciding
whether a selector matches is one piece of code whatever the source. The exposition parser
is deliberately minimal: names, labels, a numeric value; anything else on a sample line means
the text is not a /metrics page, and that is a one-line error (exit 2), as is every failure
to fetch or read.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests

from llmdash.errors import LlmdashError
from llmdash.inputs import read_text, shorten
from llmdash.panels.promql import Matcher, selector

MAX_METRICS_BYTES = 64 << 20          # a large multi-model /metrics page is a few MiB
TIMEOUT_S = 10.0
WINDOW_S = 3600.0                     # Prometheus: series seen in the last hour
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,?)')
UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass
class Inventory:
    """Series name -> distinct label sets (without __name__); `source` names where they came from."""

    source: str
    series: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    _seen: set = field(default_factory=set, repr=False)

    def add(self, name: str, labels: dict[str, str]) -> None:
        key = (name, frozenset(labels.items()))
        if key not in self._seen:
            self._seen.add(key)
            self.series.setdefault(name, []).append(labels)


def display_url(url: str) -> str:
    """`url` without user:password@, so credentials never reach output."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _checked_url(url: str, what: str) -> str:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a non-numeric port
    except ValueError:
        raise LlmdashError(f"{what} {shorten(display_url(url) if '://' in url else url)}: not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LlmdashError(f"{what} {shorten(display_url(url))}: expected an http:// or https:// URL")
    return url


def _unescape(value: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: UNESCAPE[m.group(0)], value)


def parse_exposition(text: str, source: str) -> Inventory:
    """The series of a Prometheus text-format (or OpenMetrics) page; a line that is neither a comment
    nor a sample is an error naming its line number."""
    inventory = Inventory(source)
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name_match = NAME.match(line)
        if not name_match:
            raise _not_exposition(source, number, raw)
        name, rest, labels = name_match.group(0), line[name_match.end():], {}
        if rest.startswith("{"):
            position = 1
            while True:
                label = LABEL.match(rest, position)
                if not label:
                    break
                labels[label.group(1)] = _unescape(label.group(2))
                position = label.end()
                if not label.group(3):
                    break
            closing = rest[position:].lstrip()
            if not closing.startswith("}"):
                raise _not_exposition(source, number, raw)
            rest = closing[1:]
        fields = rest.split()
        if not 1 <= len(fields) <= 3 or not rest[:1].isspace() or not _is_number(fields[0]):
            raise _not_exposition(source, number, raw)
        inventory.add(name, labels)
    if not inventory.series:
        raise LlmdashError(f"{source}: no samples: not a Prometheus /metrics page")
    return inventory


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _not_exposition(source: str, number: int, line: str) -> LlmdashError:
    return LlmdashError(f"{source}: line {number}: not Prometheus exposition text: {shorten(line)}")


def read_metrics(location: str) -> Inventory:
    """The series of a /metrics page at an http(s) URL or in a file."""
    if "://" not in location:
        return parse_exposition(read_text(Path(location), "metrics text", MAX_METRICS_BYTES), location)
    shown = display_url(_checked_url(location, "--metrics"))
    try:
        with requests.get(location, timeout=TIMEOUT_S, stream=True, headers={"Accept": "text/plain"}) as response:
            if response.status_code != 200:
                raise LlmdashError(f"{shown}: HTTP {response.status_code}, expected 200 with a /metrics page")
            raw = response.raw.read(MAX_METRICS_BYTES + 1, decode_content=True)
    except requests.RequestException as exc:
        raise LlmdashError(f"{shown}: unreachable ({exc.__class__.__name__})") from None
    if len(raw) > MAX_METRICS_BYTES:
        raise LlmdashError(f"{shown}: more than the {MAX_METRICS_BYTES} bytes allowed")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LlmdashError(f"{shown}: not UTF-8 text") from None
    return parse_exposition(text, shown)


class PrometheusReader:
    """GET-only access to a Prometheus HTTP API: which series exist in the last `window_s` seconds."""

    def __init__(self, url: str, selectors: dict[str, str], window_s: float = WINDOW_S):
        self.base = _checked_url(url, "--prometheus").rstrip("/")
        self.shown = display_url(self.base)
        self.matchers = tuple(Matcher(label, "=", value) for label, value in sorted(selectors.items()))
        self.end = time.time()
        self.start = self.end - window_s
        self.session = requests.Session()

    def _get(self, path: str, params: dict) -> list:
        params = params | {"start": f"{self.start:.3f}", "end": f"{self.end:.3f}"}
        try:
            response = self.session.get(f"{self.base}/api/v1/{path}", params=params, timeout=TIMEOUT_S)
        except requests.RequestException as exc:
            raise LlmdashError(f"prometheus at {self.shown}: unreachable ({exc.__class__.__name__})") from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("status") != "success" or not isinstance(body.get("data"), list):
            error = body.get("error") if isinstance(body, dict) else None
            raise LlmdashError(f"prometheus at {self.shown}: GET /api/v1/{path} failed "
                               f"(HTTP {response.status_code}{': ' + shorten(error) if error else ''})")
        return body["data"]

    def inventory(self, wanted: set[str]) -> Inventory:
        """The label sets of every series named in `wanted` under the configured selectors."""
        scope = {"match[]": "{" + ", ".join(m.render() for m in self.matchers) + "}"} if self.matchers else {}
        names = set(self._get("label/__name__/values", scope)) & wanted
        inventory = Inventory(self.shown)
        for name in sorted(names):
            for labels in self._get("series", {"match[]": selector(name, self.matchers)}):
                labels.pop("__name__", None)
                inventory.add(name, labels)
        if not inventory.series:
            raise LlmdashError(f"prometheus at {self.shown}: no series of any engine catalog in the last "
                               f"{WINDOW_S / 60:g} min{' under the selectors' if self.matchers else ''}")
        return inventory
