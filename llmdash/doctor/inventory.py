"""What series exist: read from a scraped /metrics text or asked of a Prometheus (read-only).

Both sources end as the same `Inventory` (series name -> the label sets seen), so deciding
whether a selector matches is one piece of code whatever the source. The exposition parser
is deliberately minimal: names, labels, a numeric value, an optional timestamp and OpenMetrics
exemplar; anything else on a sample line means the text is not a /metrics page, a one-line
error (exit 2). It reads in time and memory linear in the page, whatever its label values hold,
and a page is at most MAX_METRICS_BYTES. Reaching the server is `fetch`'s job (exit 3 when it
fails); an answer of Prometheus that is not the JSON its API documents is exit 3 too.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import requests

from llmdash.doctor import printing
from llmdash.doctor.fetch import AnswerTooLarge, Client
from llmdash.errors import EXIT_REMOTE, LlmdashError
from llmdash.inputs import read_text
from llmdash.panels.promql import Matcher, selector

# A large multi-model /metrics page is a few MiB; a page of this size with a distinct series on every
# line is about 800 000 series, which stay within a few hundred MB.
MAX_METRICS_BYTES = 16 << 20
MAX_PROMETHEUS_BYTES = 32 << 20      # every answer of one Prometheus together
LINE_CHARS = 80                      # a page's line quoted in an error
WINDOW_S = 3600.0                    # Prometheus: series seen in the last hour
LOOKBACK_S = 300.0                   # Prometheus' default lookback: a range query stepped at it sees every series
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# possessive: a backtracking repeat would keep state for every character of a megabyte-long value
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"\\]*+(?:\\.[^"\\]*+)*+)"\s*(,?)')
UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass
class Inventory:
    """Series name -> the label sets seen (without __name__); `source` names where they came from,
    `secrets` are its credentials, to scrub from anything of it that is printed."""

    source: str
    secrets: tuple[str, ...] = ()
    series: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    _strings: dict[str, str] = field(default_factory=dict, repr=False)

    def add(self, name: str, labels: dict[str, str]) -> None:
        """Strings are kept once: every line of a page repeats the same model, engine and bucket bounds."""
        keep = self._strings.setdefault
        self.series.setdefault(keep(name, name), []).append({keep(k, k): keep(v, v) for k, v in labels.items()})


def checked_url(url: str, what: str) -> str:
    """`url` when the HTTP stack can request it; else one line naming it, exit 2."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        raise LlmdashError(f"{what} {printing.url(url)}: not a valid URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise LlmdashError(f"{what} {printing.url(url)}: expected an http:// or https:// URL")
    try:
        requests.Request("GET", url).prepare()   # the parsing requests does before it connects
        host.encode("idna")                      # and what connecting does: an empty or overlong label fails
    except (requests.RequestException, ValueError, UnicodeError):
        raise LlmdashError(f"{what} {printing.url(url)}: not a valid URL") from None
    return url


def _unescape(value: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: UNESCAPE[m.group(0)], value) if "\\" in value else value


def _labels(text: str) -> tuple[dict[str, str], str] | None:
    """The label set `text` opens with ("{...}"), and what follows it; None when it is not one."""
    labels, position = {}, 1
    while True:
        label = LABEL.match(text, position)
        if not label:
            break
        labels[label.group(1)] = _unescape(label.group(2))
        position = label.end()
        if not label.group(3):
            break
    closing = text[position:].lstrip()
    return (labels, closing[1:]) if closing.startswith("}") else None


def _lines(text: str):
    """(number, line) at every "\\n", the exposition formats' only line end (str.splitlines would also
    split inside a label value holding \\x85 or \\u2028), without a list of all of them."""
    start, number = 0, 1
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield number, text[start:end]
        start, number = end + 1, number + 1


def _is_sample(rest: str) -> bool:
    """`rest` (after name and labels) is " value [timestamp]", optionally followed by an OpenMetrics
    exemplar "# {labels} value [timestamp]", which is checked and ignored."""
    sample, hashed, exemplar = rest.partition("#")
    fields = sample.split()
    if not 1 <= len(fields) <= 3 or not sample[:1].isspace() or not _is_number(fields[0]):
        return False
    if not hashed:
        return True
    parsed = _labels(exemplar.lstrip()) if exemplar.lstrip().startswith("{") else None
    if parsed is None:
        return False
    values = parsed[1].split()
    return 1 <= len(values) <= 2 and all(_is_number(v) for v in values)


def parse_exposition(text: str, source: str, secrets: tuple[str, ...] = ()) -> Inventory:
    """The series of a Prometheus text-format (or OpenMetrics) page; a line that is neither a comment
    nor a sample is an error naming its line number."""
    inventory = Inventory(source, secrets)
    for number, raw in _lines(text):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name_match = NAME.match(line)
        if not name_match:
            raise _not_exposition(source, number, raw, secrets)
        name, rest, labels = name_match.group(0), line[name_match.end():], {}
        if rest.startswith("{"):
            parsed = _labels(rest)
            if parsed is None:
                raise _not_exposition(source, number, raw, secrets)
            labels, rest = parsed
        if not _is_sample(rest):
            raise _not_exposition(source, number, raw, secrets)
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


def _not_exposition(source: str, number: int, line: str, secrets: tuple[str, ...]) -> LlmdashError:
    return LlmdashError(f"{source}: line {number}: not Prometheus exposition text: "
                        f"{printing.text(line, secrets, LINE_CHARS)}")


def read_metrics(location: str, client: Client) -> Inventory:
    """The series of a /metrics page at an http(s) URL or in a file."""
    if "://" not in location:
        shown = printing.text(location)
        return parse_exposition(read_text(Path(location), "metrics text", MAX_METRICS_BYTES), shown)
    shown, secrets = printing.url(checked_url(location, "--metrics")), printing.secrets_of(location)
    try:
        status, raw = client.get(location, shown, MAX_METRICS_BYTES, accept="text/plain")
    except AnswerTooLarge:
        raise LlmdashError(f"{shown}: more than the {MAX_METRICS_BYTES} bytes allowed for a /metrics page",
                           EXIT_REMOTE) from None
    if status != 200:
        raise LlmdashError(f"{shown}: HTTP {status}, expected 200 with a /metrics page", EXIT_REMOTE)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LlmdashError(f"{shown}: not UTF-8 text") from None
    return parse_exposition(text, shown, secrets)


def _is_label_set(value) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


class PrometheusReader:
    """GET-only access to a Prometheus HTTP API: which series exist in the last `window_s` seconds."""

    def __init__(self, url: str, selectors: dict[str, str], client: Client, window_s: float = WINDOW_S):
        self.base = checked_url(url, "--prometheus").rstrip("/")
        self.shown = printing.url(self.base)
        self.secrets = printing.secrets_of(url)
        self.client = client
        self.budget = MAX_PROMETHEUS_BYTES
        self.matchers = tuple(Matcher(label, "=", value) for label, value in sorted(selectors.items()))
        self.end = time.time()
        self.start = self.end - window_s

    def _get(self, path: str, params: dict, valid):
        """The `data` of GET /api/v1/`path`, which `valid` must accept."""
        where = f"prometheus at {self.shown}: GET /api/v1/{path}"
        params = params | {"start": f"{self.start:.3f}", "end": f"{self.end:.3f}"}
        try:
            status, raw = self.client.get(f"{self.base}/api/v1/{path}", f"prometheus at {self.shown}", self.budget,
                                          params, "application/json")
        except AnswerTooLarge:
            raise LlmdashError(f"{where}: its answers are more than the {MAX_PROMETHEUS_BYTES} bytes allowed in "
                               "all; narrow them with the config's selectors", EXIT_REMOTE) from None
        self.budget -= len(raw)
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            body = None
        data = body.get("data") if isinstance(body, dict) else None
        if status == 200 and data is not None and body.get("status") == "success" and valid(data):
            return data
        error = body.get("error") if isinstance(body, dict) else None
        if status == 200 and error is None:
            raise LlmdashError(f"{where}: not the JSON the Prometheus API answers", EXIT_REMOTE)
        shown = f": {printing.text(error, self.secrets)}" if isinstance(error, str) else ""
        raise LlmdashError(f"{where} failed (HTTP {status}{shown})", EXIT_REMOTE)

    def inventory(self, wanted: dict[str, set[str]]) -> Inventory:
        """The label sets of every series named in `wanted` under the configured selectors, each cut to the
        labels `wanted` keeps for its name (the rest, such as a pod's target labels, tell replicas apart,
        which no check needs).

        Prometheus does the cutting: a `count by (__name__, kept labels)` range query a name over the window,
        stepped at the lookback so every series with a sample in it is counted, answers with one label set
        per kind of series instead of one per replica (a thousand replicas' series would be tens of MB).
        Only a histogram whose replicas do not all carry the same buckets (a count per `le` that differs
        within one label set) is read series by series, so each replica's layout is seen as it is."""
        scope = {"match[]": "{" + ", ".join(m.render() for m in self.matchers) + "}"} if self.matchers else {}
        names = sorted(set(wanted).intersection(self._get("label/__name__/values", scope, _is_list_of(str))))
        inventory = Inventory(self.shown, self.secrets)
        if not names:
            return self._found(inventory)
        matrix = []
        for name in names:          # one query a name: each answers within a read timeout on a large fleet
            query = f"count by ({', '.join(sorted(wanted[name] | {'__name__'}))}) ({selector(name, self.matchers)})"
            matrix += self._get("query_range", {"query": query, "step": f"{LOOKBACK_S:g}"}, _is_matrix)["result"]
        counts: dict[str, dict[tuple, dict[str, set[str]]]] = {}   # name -> labels but le -> le -> counts seen
        for item in matrix:
            labels = {k: v for k, v in item["metric"].items() if k in wanted.get(item["metric"].get("__name__"), ())}
            name = item["metric"].get("__name__")
            if name not in wanted:
                continue
            inventory.add(name, labels)
            if "le" in labels:
                rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
                per_le = counts.setdefault(name, {}).setdefault(rest, {})
                per_le.setdefault(labels["le"], set()).update(f"{t}={v}" for t, v in item["values"])
        for name, groups in counts.items():
            if any(len({frozenset(seen) for seen in per_le.values()}) > 1 for per_le in groups.values()):
                inventory.series[name] = []         # replicas with different buckets: read each one's
                for labels in self._get("series", {"match[]": selector(name, self.matchers)}, _is_list_of_labels):
                    inventory.add(name, {k: v for k, v in labels.items() if k != "__name__"})
        return self._found(inventory)

    def _found(self, inventory: Inventory) -> Inventory:
        if not inventory.series:
            raise LlmdashError(f"prometheus at {self.shown}: no series of any engine catalog in the last "
                               f"{WINDOW_S / 60:g} min{' under the selectors' if self.matchers else ''}")
        return inventory


def _is_list_of(kind):
    return lambda data: isinstance(data, list) and all(isinstance(v, kind) for v in data)


def _is_list_of_labels(data) -> bool:
    return isinstance(data, list) and all(map(_is_label_set, data))


def _is_matrix(data) -> bool:
    """A range query's answer: {"resultType": "matrix", "result": [{"metric": {...}, "values": [[t, "v"]]}]}."""
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        return False
    return all(
        isinstance(item, dict) and _is_label_set(item.get("metric"))
        and isinstance(item.get("values"), list)
        and all(isinstance(p, list) and len(p) == 2 and isinstance(p[1], str) for p in item["values"])
        for item in data["result"])


def catalog_series(specs, selectors: dict[str, str], replica: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """Every series name an engine catalog lists (a histogram's native one under its base name too) -> the labels
    the doctor judges on it: the catalogs' labels of that series (every version's), `le` and `quantile`, the labels
    selectors match on (the config's, and each catalog's defaults such as job) and `replica` (what tells the
    replicas stored only as native histograms apart)."""
    always = {"le", "quantile", *selectors, *replica, *(label for spec in specs for label, _ in spec.selectors)}
    wanted: dict[str, set[str]] = {}
    for spec in specs:
        for metric in spec.metrics.values():
            for series in metric.stored_series:
                wanted.setdefault(series, set(always)).update(metric.labels)
    return wanted
