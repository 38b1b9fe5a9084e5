"""What the doctor asks a Prometheus: a count by the labels it judges, one query a name, not every replica's
series; each replica's series only for a histogram whose replicas carry different buckets."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs

from llmdash.doctor.fetch import Client
from llmdash.doctor.inventory import PrometheusReader, catalog_series
from llmdash.engines.catalog import load_engine
from tests.doctor.servers import Routes

NAME = "vllm:inter_token_latency_seconds_bucket"


def replica(pod: str, les: list[str]) -> list[dict[str, str]]:
    return [{"__name__": NAME, "model_name": "m", "engine": "0", "pod": pod, "le": le} for le in les] + \
        [{"__name__": "vllm:num_requests_running", "model_name": "m", "engine": "0", "pod": pod}]


def prometheus(series: list[dict[str, str]]):
    """Label values, series, and a range query's `count by (...)` over `series`, as Prometheus answers them."""
    def answer(path, query, headers):
        params = {k: v[0] for k, v in parse_qs(query).items()}
        if path.endswith("/label/__name__/values"):
            data = sorted({s["__name__"] for s in series})
        elif path.endswith("/series"):
            wanted = params["match[]"].split("{")[0]
            data = [s for s in series if s["__name__"] == wanted]
        else:
            found = re.fullmatch(r"count by \(([^)]*)\) \(([^{)]*)\)", params["query"])
            kept, name = found.group(1).split(", "), found.group(2)
            counts: dict[tuple, int] = {}
            for s in (s for s in series if s["__name__"] == name):
                key = tuple((k, s[k]) for k in kept if k in s)
                counts[key] = counts.get(key, 0) + 1
            data = {"resultType": "matrix",
                    "result": [{"metric": dict(k), "values": [[1, str(n)], [301, str(n)]]} for k, n in counts.items()]}
        return 200, json.dumps({"status": "success", "data": data}).encode()
    return answer


def read(series):
    wanted = catalog_series([load_engine("vllm")], {})
    with Routes(prometheus(series)) as server:
        client = Client(30)
        try:
            inventory = PrometheusReader(f"http://127.0.0.1:{server.port}", {}, client).inventory(wanted)
        finally:
            client.close()
    return inventory, [path for path, _ in server.seen]


def test_replicas_alike_are_one_label_set_from_one_count():
    inventory, paths = read(replica("a", ["0.1", "0.5", "+Inf"]) + replica("b", ["0.1", "0.5", "+Inf"]))
    assert paths == ["/api/v1/label/__name__/values", "/api/v1/query_range", "/api/v1/query_range"]   # a name each
    assert inventory.series["vllm:num_requests_running"] == [{"model_name": "m", "engine": "0"}]
    assert sorted(s["le"] for s in inventory.series[NAME]) == ["+Inf", "0.1", "0.5"]


def test_replicas_with_different_buckets_are_read_series_by_series():
    inventory, paths = read(replica("a", ["0.1", "0.5", "+Inf"]) + replica("b", ["0.1", "0.2", "0.5", "+Inf"]))
    assert paths == ["/api/v1/label/__name__/values", "/api/v1/query_range", "/api/v1/query_range",
                     "/api/v1/series"]
    assert len(inventory.series[NAME]) == 7 and {s["pod"] for s in inventory.series[NAME]} == {"a", "b"}
    assert inventory.series["vllm:num_requests_running"] == [{"model_name": "m", "engine": "0"}]


def test_the_labels_judged_are_the_catalogs_the_buckets_and_the_selectors():
    wanted = catalog_series([load_engine("vllm"), load_engine("nim")], {"namespace": "prod"})
    assert wanted["vllm:request_success_total"] >= {"model_name", "engine", "finished_reason", "le", "quantile",
                                                    "namespace", "job"}          # job: NIM's default selector
    assert "pod" not in wanted["vllm:request_success_total"] and "instance" not in wanted[NAME]
