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
QUERY_CHARS = 6000                   # of one query in a GET's URL (proxies refuse long request lines)
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
    """GET-only access to a Prometheus HTTP API: which series exist in the last `window_s` seconds.
    `replica_label` (e.g. instance) tells the replicas apart, which the checks count for some names."""

    def __init__(self, url: str, selectors: dict[str, str], client: Client, replica_label: str = "",
                 window_s: float = WINDOW_S):
        self.base = checked_url(url, "--prometheus").rstrip("/")
        self.shown = printing.url(self.base)
        self.secrets = printing.secrets_of(url)
        self.client = client
        self.budget = MAX_PROMETHEUS_BYTES
        self.matchers = tuple(Matcher(label, "=", value) for label, value in sorted(selectors.items()))
        self.replica_label = replica_label
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

    def inventory(self, wanted: dict[str, set[str]], counted: dict[str, set[str]] | None = None) -> Inventory:
        """The label sets of every series named in `wanted` under the configured selectors, each cut to the
        labels `wanted` keeps for its name: the rest, such as a pod's target labels and the replica label, tell
        replicas apart, which only the checks that count replicas need. `counted` maps a name to the names whose
        replicas are counted when it is present (an SLO's series; a native histogram and its classic count):
        those keep the replica label too.

        Prometheus does the cutting: a `count by (__name__, kept labels)` answers with one label set per kind of
        series instead of one per replica (a thousand replicas' series are tens of MB); see `_kinds`."""
        scope = {"match[]": "{" + ", ".join(m.render() for m in self.matchers) + "}"} if self.matchers else {}
        names = sorted(set(wanted).intersection(self._get("label/__name__/values", scope, _is_list_of(str))))
        replica = {self.replica_label} if self.replica_label else set()
        counting = {c for name in names for c in (counted or {}).get(name, ())}
        # Names that keep the same labels are asked together; a histogram's buckets (each as many series as all
        # the other names) and a name counted by replica alone, so that each answers within a read timeout.
        questions: dict[tuple, list[str]] = {}     # (labels kept, the name asked alone or "") -> names asked
        for name in names:
            if name in counting:
                questions[(frozenset(wanted[name] | replica), name)] = [name]
            else:
                alone = name if name.endswith("_bucket") else ""
                questions.setdefault((frozenset(wanted[name]), alone), []).append(name)
        found: dict[str, list[dict[str, str]]] = {}
        for (kept, alone), asked in questions.items():
            for metric in self._kinds(asked, set(kept), by_bucket=alone.endswith("_bucket") and alone not in counting):
                found.setdefault(metric.get("__name__", ""), []).append({k: v for k, v in metric.items() if k in kept})
        inventory = Inventory(self.shown, self.secrets)
        for name in names:
            for labels in found.get(name, []):
                inventory.add(name, labels)
        return self._found(inventory)

    def _kinds(self, names: list[str], kept: set[str], by_bucket: bool) -> list[dict[str, str]]:
        """The label sets (with __name__ and `kept`) of the series of `names` with a sample in the window: a range
        query stepped at the lookback, so every such series is counted.

        Except classic histograms' buckets (`by_bucket`: most of a large fleet's series, each kind of them carrying
        the same bounds on every replica), whose every series the range query would read at every step: they are
        read once, at the window's end, and the window adds what the end lacks, asked by what the end holds: the
        kinds seen in it (by their +Inf bucket, which every classic histogram has), and of each kind, the series
        with a bound the end does not list, usually none."""
        count = f"count by ({', '.join(sorted(kept | {'__name__'}))})"
        every = self._selector(names)
        if not by_bucket:
            return self._range(f"{count} ({every})")
        at_end = [item["metric"] for item in self._get(
            "query", {"query": f"{count} ({every})", "time": f"{self.end:.3f}"}, _is_vector)["result"]]
        bounds: dict[tuple, set[str]] = {}     # (name, kind: labels but le) -> its bounds at the end
        for metric in at_end:
            bounds.setdefault(_kind(metric), set()).add(metric.get("le", ""))
        for metric in self._range(f"{count} ({self._selector(names, Matcher('le', '=', '+Inf'))})"):
            bounds.setdefault(_kind(metric), set())
        others = [selector(name, self.matchers + _exactly(dict(kind), kept - {"le"})
                           + tuple(Matcher("le", "!=", le) for le in sorted(les)))
                  for (name, kind), les in bounds.items()]
        queries = [""]
        for other in others:        # as few queries as fit in a URL
            joined = f"{queries[-1]} or {other}" if queries[-1] else other
            if queries[-1] and len(joined) > QUERY_CHARS:
                queries.append(other)
            else:
                queries[-1] = joined
        return at_end + [metric for query in queries if query for metric in self._range(f"{count} ({query})")]

    def _selector(self, names: list[str], *matchers: Matcher) -> str:
        """The series of `names` under the selectors (and `matchers`)."""
        if len(names) == 1:
            return selector(names[0], self.matchers + matchers)
        return selector("", (Matcher("__name__", "=~", "|".join(map(re.escape, names))),) + self.matchers + matchers)

    def _range(self, query: str) -> list[dict[str, str]]:
        """The label sets of a range query's answer over the window, stepped at the lookback."""
        return [item["metric"] for item in
                self._get("query_range", {"query": query, "step": f"{LOOKBACK_S:g}"}, _is_matrix)["result"]]

    def _found(self, inventory: Inventory) -> Inventory:
        if not inventory.series:
            raise LlmdashError(f"prometheus at {self.shown}: no series of any engine catalog in the last "
                               f"{WINDOW_S / 60:g} min{' under the selectors' if self.matchers else ''}")
        return inventory


def _is_list_of(kind):
    return lambda data: isinstance(data, list) and all(isinstance(v, kind) for v in data)


def _exactly(labels: dict[str, str], kept: set[str]) -> tuple[Matcher, ...]:
    """Matchers of exactly `labels` among `kept` (an absent one as "", which PromQL matches where it is absent)."""
    return tuple(Matcher(k, "=", labels.get(k, "")) for k in sorted(kept))


def _kind(metric: dict[str, str]) -> tuple[str, tuple]:
    """A bucket series' name, and its labels but `__name__` and `le`: which kind of series of its histogram it is."""
    return metric.get("__name__", ""), tuple(sorted((k, v) for k, v in metric.items() if k not in ("__name__", "le")))


def _is_vector(data) -> bool:
    """An instant query's answer: {"resultType": "vector", "result": [{"metric": {...}, "value": [t, "v"]}]}."""
    return isinstance(data, dict) and data.get("resultType") == "vector" and isinstance(data.get("result"), list) \
        and all(isinstance(item, dict) and _is_label_set(item.get("metric")) for item in data["result"])


def _is_matrix(data) -> bool:
    """A range query's answer: {"resultType": "matrix", "result": [{"metric": {...}, "values": [[t, "v"]]}]}."""
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        return False
    return all(
        isinstance(item, dict) and _is_label_set(item.get("metric"))
        and isinstance(item.get("values"), list)
        and all(isinstance(p, list) and len(p) == 2 and isinstance(p[1], str) for p in item["values"])
        for item in data["result"])


def catalog_series(specs, selectors: dict[str, str]) -> dict[str, set[str]]:
    """Every series name an engine catalog lists (a histogram's native one under its base name too) -> the labels
    the doctor judges on it: the catalogs' labels of that series (every version's), `le` and `quantile`, and the
    labels selectors match on (the config's, and each catalog's defaults such as job). Not the replica label:
    which replicas carry a series is asked only where a check counts them (`PrometheusReader.inventory`)."""
    always = {"le", "quantile", *selectors, *(label for spec in specs for label, _ in spec.selectors)}
    wanted: dict[str, set[str]] = {}
    for spec in specs:
        for metric in spec.metrics.values():
            for series in metric.stored_series:
                wanted.setdefault(series, set(always)).update(metric.labels)
    return wanted
