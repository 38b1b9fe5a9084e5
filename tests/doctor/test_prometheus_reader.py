"""What the doctor asks a Prometheus: a `count by` the labels it judges, so the answers hold one label set per kind
of series whatever the number of replicas; the replica label only for the series whose replicas a check counts;
never a list of series. The fake below answers as Prometheus documents its API and PromQL (parsed by
promql-parser): a matcher on an absent label sees "", `=~`/`!~` are anchored, an instant query sees a series with
a sample in the 5 minutes before its time, a range query a series seen so at any of its steps."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from urllib.parse import parse_qs

import promql_parser as pp

from llmdash.config import Config, Objective, Slo
from llmdash.doctor.diagnose import counted_series
from llmdash.doctor.fetch import Client
from llmdash.doctor.inventory import QUERY_CHARS, PrometheusReader, catalog_series
from llmdash.engines.catalog import load_engine
from tests.doctor.servers import Routes

TTFT = "vllm:time_to_first_token_seconds_bucket"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
LOOKBACK_S = 300      # Prometheus' default --query.lookback-delta


@dataclass(frozen=True)
class Stored:
    """One series and the span it has samples in (seconds since the epoch, a sample every 15 s)."""

    labels: dict
    first: float
    last: float

    def seen_at(self, t: float) -> bool:
        return self.first <= t and self.last >= t - LOOKBACK_S


def _matches(selector: pp.VectorSelector, labels: dict) -> bool:
    if selector.name and labels["__name__"] != selector.name:
        return False
    for m in selector.matchers.matchers:
        value, op = labels.get(m.name, ""), str(m.op).split(".")[-1]
        if op in ("Equal", "NotEqual"):
            ok = (value == m.value) == (op == "Equal")
        else:
            ok = (re.fullmatch(m.value, value) is not None) == (op == "Re")
        if not ok:
            return False
    return True


def _selected(node, stored: list[Stored]) -> list[Stored]:
    """The series of a vector selector, or of selectors joined by `or`."""
    if isinstance(node, pp.ParenExpr):
        return _selected(node.expr, stored)
    if isinstance(node, pp.BinaryExpr):
        assert str(node.op) == "or", node
        left = _selected(node.lhs, stored)
        return left + [s for s in _selected(node.rhs, stored) if s not in left]
    assert isinstance(node, pp.VectorSelector), node
    return [s for s in stored if _matches(node, s.labels)]


class FakePrometheus:
    """Label values and `count by (...) (selectors)`, instant and range, over `stored`; what it was asked and how
    many result rows it answered are in `asked`."""

    def __init__(self, stored: list[Stored]):
        self.stored = stored
        self.asked: list[tuple[str, dict, int]] = []      # (path, params, result rows)

    def __call__(self, path, query, headers):
        params = {k: v[0] for k, v in parse_qs(query).items()}
        if path == "/api/v1/label/__name__/values":
            data = sorted({s.labels["__name__"] for s in self.stored})
            rows = len(data)
        elif path in ("/api/v1/query", "/api/v1/query_range"):
            tree = pp.parse(params["query"])
            assert isinstance(tree, pp.AggregateExpr) and str(tree.op) == "count", params["query"]
            by = tree.modifier.labels
            if path.endswith("_range"):
                start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
                steps = [start + k * step for k in range(int((end - start) // step) + 1)]
            else:
                steps = [float(params["time"])]
            groups: dict[tuple, dict[float, int]] = {}
            for s in _selected(tree.expr, self.stored):
                key = tuple((k, s.labels[k]) for k in by if k in s.labels)
                for t in steps:
                    if s.seen_at(t):
                        groups.setdefault(key, {}).setdefault(t, 0)
                        groups[key][t] += 1
            result = [{"metric": dict(key), **({"values": [[t, str(n)] for t, n in sorted(counts.items())]}
                                               if path.endswith("_range") else
                                               {"value": [steps[0], str(counts[steps[0]])]})}
                      for key, counts in groups.items()]
            data = {"resultType": "matrix" if path.endswith("_range") else "vector", "result": result}
            rows = len(result)
        else:
            return 404, b'{"status": "error", "error": "not asked of this fake"}'
        self.asked.append((path, params, rows))
        return 200, json.dumps({"status": "success", "data": data}).encode()


def fleet(replicas: int, now: float, bounds=("0.1", "0.5", "+Inf")) -> list[Stored]:
    """`replicas` vLLM replicas of model "m" scraped for the last hour, each with its own pod and instance (and a
    job, which the doctor does not judge on vLLM's series)."""
    out = []
    for r in range(replicas):
        target = {"job": "llm/vllm", "pod": f"vllm-{r}", "instance": f"10.0.0.{r}:8000", "engine": "0",
                  "model_name": "m"}
        out += [Stored({"__name__": TTFT, **target, "le": le}, now - 3600, now) for le in bounds]
        out += [Stored({"__name__": name, **target}, now - 3600, now) for name in (RUNNING, WAITING)]
    return out


def read(stored: list[Stored], counted=None):
    wanted = catalog_series([load_engine("vllm")], {})
    fake = FakePrometheus(stored)
    with Routes(fake) as server:
        client = Client(30)
        try:
            inventory = PrometheusReader(f"http://127.0.0.1:{server.port}", {}, client, "instance").inventory(
                wanted, counted)
        finally:
            client.close()
    assert [path for path, _ in server.seen] == [path for path, _, _ in fake.asked]   # the fake answered them all
    return inventory, fake.asked


def rows(label_sets: list[dict]) -> list[list[tuple]]:
    """Label sets in one order, repeats kept."""
    return sorted(sorted(labels.items()) for labels in label_sets)


def kinds(inventory, name: str) -> list[list[tuple]]:
    return rows(inventory.series[name])


def test_the_answers_hold_a_label_set_per_kind_whatever_the_replicas():
    """Two replicas or sixty: the same label sets, asked with the same questions, answered with the same rows."""
    now = time.time()
    answers = []
    for replicas in (2, 60):
        inventory, asked = read(fleet(replicas, now))
        assert kinds(inventory, TTFT) == rows([{"engine": "0", "model_name": "m", "le": le}
                                               for le in ("+Inf", "0.1", "0.5")])
        assert inventory.series[RUNNING] == inventory.series[WAITING] == [{"engine": "0", "model_name": "m"}]
        answers.append([(path, n) for path, _, n in asked])
    assert answers[0] == answers[1]
    assert [n for _, n in answers[1]] == [3, 2, 3, 1, 0]   # names; a kind a gauge; 3 bucket kinds; +Inf; none new


def test_every_question_names_catalog_series_and_none_lists_series():
    """No /api/v1/series (a list of every replica's series), and each selector names the series the doctor
    judges: a catalog name, or a regex of catalog names."""
    wanted = catalog_series([load_engine("vllm")], {})
    _, asked = read(fleet(3, time.time()))
    assert {path for path, _, _ in asked} == {"/api/v1/label/__name__/values", "/api/v1/query",
                                             "/api/v1/query_range"}
    for path, params, _ in asked[1:]:
        tree = pp.parse(params["query"])
        stack = [tree.expr]
        while stack:
            node = stack.pop()
            if isinstance(node, pp.BinaryExpr):
                stack += [node.lhs, node.rhs]
                continue
            named = [node.name] if node.name else \
                next(m.value for m in node.matchers.matchers if m.name == "__name__").split("|")
            assert named and set(named) <= set(wanted), params["query"]


def test_the_whole_window_is_read_not_only_its_end():
    """A model gone 40 minutes ago, and the 0.25 s bound a replica exported until it was restarted with other
    buckets half an hour ago, are in the last hour; a series last sampled 70 minutes ago is not."""
    now = time.time()
    gone = {"job": "llm/vllm", "instance": "10.0.0.9:8000", "engine": "0", "model_name": "gone"}
    stored = fleet(2, now) + [
        Stored({"__name__": TTFT, **gone, "le": le}, now - 3600, now - 2400) for le in ("0.1", "+Inf")] + [
        Stored({"__name__": TTFT, "job": "llm/vllm", "instance": "10.0.0.0:8000", "engine": "0", "model_name": "m",
                "le": "0.25"}, now - 3600, now - 1800),
        Stored({"__name__": TTFT, "job": "llm/vllm", "instance": "10.0.0.0:8000", "engine": "0", "model_name": "old",
                "le": "0.1"}, now - 7200, now - 4200)]
    inventory, _ = read(stored)
    assert kinds(inventory, TTFT) == rows([
        {"engine": "0", "model_name": model, "le": le}
        for model, le in (("gone", "+Inf"), ("gone", "0.1"), ("m", "+Inf"), ("m", "0.1"), ("m", "0.25"),
                          ("m", "0.5"))])


def test_the_series_whose_replicas_are_counted_keep_the_replica_label():
    inventory, _ = read(fleet(2, time.time()), counted={TTFT: {TTFT}})
    assert kinds(inventory, TTFT) == rows([
        {"engine": "0", "model_name": "m", "instance": f"10.0.0.{r}:8000", "le": le}
        for r in (0, 1) for le in ("+Inf", "0.1", "0.5")])
    assert inventory.series[RUNNING] == [{"engine": "0", "model_name": "m"}]


def test_many_kinds_are_asked_in_queries_that_fit_in_a_url():
    """Thirty models with twenty bounds each: the question for the bounds the window adds is split, each query at
    most QUERY_CHARS long, and every kind is read."""
    now = time.time()
    bounds = tuple(f"{k / 10:g}" for k in range(1, 20)) + ("+Inf",)
    stored = [Stored({**s.labels, "model_name": f"model-{m}"}, s.first, s.last)
              for m in range(30) for s in fleet(1, now, bounds)]
    inventory, asked = read(stored)
    assert len(inventory.series[TTFT]) == 30 * 20
    assert all(len(params["query"]) <= QUERY_CHARS + 200 for _, params, _ in asked[1:])   # + the count by
    assert len([p for p, params, _ in asked if " or " in params.get("query", "")]) >= 2


def test_the_labels_judged_are_the_catalogs_the_buckets_and_the_selectors():
    wanted = catalog_series([load_engine("vllm"), load_engine("nim")], {"namespace": "prod"})
    assert wanted["vllm:request_success_total"] >= {"model_name", "engine", "finished_reason", "le", "quantile",
                                                    "namespace", "job"}          # job: NIM's default selector
    assert "pod" not in wanted["vllm:request_success_total"] and "instance" not in wanted[TTFT]


def test_the_replicas_are_counted_for_the_slos_series_and_the_native_histograms():
    """A TTFT objective counts vLLM's TTFT buckets and counts by replica; availability (vLLM exports its failed
    requests from the start) its request_success_total; a native TTFT histogram, its replicas and the classic
    count's (which tell the replicas stored only as native histograms apart)."""
    config = Config(engines=("vllm",), slo=Slo(objectives=(Objective(name="ttft", target_seconds=1.0),
                                                            Objective(name="availability", sli="availability"))))
    counted = counted_series([load_engine("vllm")], config)
    assert counted["vllm:time_to_first_token_seconds_bucket"] == {"vllm:time_to_first_token_seconds_bucket"}
    assert counted["vllm:time_to_first_token_seconds_count"] == {"vllm:time_to_first_token_seconds_count"}
    assert counted["vllm:request_success_total"] == {"vllm:request_success_total"}
    assert counted["vllm:time_to_first_token_seconds"] == {"vllm:time_to_first_token_seconds",
                                                           "vllm:time_to_first_token_seconds_count"}
    assert "vllm:inter_token_latency_seconds_bucket" not in counted
    assert not {name for name in counted_series([load_engine("vllm")], Config(engines=("vllm",)))
                if name.endswith(("_bucket", "_total"))}
