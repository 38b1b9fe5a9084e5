"""An answer that is not the JSON the Prometheus API documents, or a URL the HTTP stack cannot request,
is one line, never a traceback: exit 3 for the server's answer, exit 2 for the user's URL."""

from __future__ import annotations

import json

import pytest

from tests.doctor.servers import Routes, assert_one_line, doctor

pytestmark = pytest.mark.process   # runs the llmdash command in a fresh interpreter, as a user does

NAMES = {"status": "success", "data": ["vllm:generation_tokens_total", "vllm:num_requests_running"]}
SERIES = {"status": "success", "data": [{"__name__": "vllm:num_requests_running", "model_name": "m"}]}


def prometheus(names, series):
    """A Prometheus answering the names request with `names`, the range query's count by labels with one sample
    for each label set of `series` (a /api/v1/series answer; as it is when it does not hold label sets), and an
    instant query (of a histogram's buckets) with `series` as it is."""
    def answer(path, query, headers):
        body = names if path.endswith("/values") else as_matrix(series) if path.endswith("/query_range") else series
        return 200, body if isinstance(body, bytes) else json.dumps(body).encode()
    return answer


def as_matrix(series):
    data = series.get("data") if isinstance(series, dict) else None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        return series
    return {**series, "data": {"resultType": "matrix", "result": [{"metric": s, "values": [[1, "1"]]} for s in data]}}


@pytest.mark.parametrize("names, series", [
    ({"status": "success", "data": 5}, SERIES),
    ({"status": "success", "data": "vllm:num_requests_running"}, SERIES),
    ({"status": "success", "data": [{"name": "vllm:num_requests_running"}]}, SERIES),
    ({"status": "success", "data": {"result": "a string"}}, SERIES),
    ({"status": ["success"], "data": []}, SERIES),
    ([1, 2], SERIES),
    (b"[" * 100_000 + b"]" * 100_000, SERIES),
    (b"\xff\xfe not json", SERIES),
    (NAMES, {"status": "success", "data": [5]}),
    (NAMES, {"status": "success", "data": [None]}),
    (NAMES, {"status": "success", "data": [["vllm:num_requests_running", "1"]]}),
    (NAMES, {"status": "success", "data": [{"__name__": "vllm:num_requests_running", "model_name": 5}]}),
    (NAMES, {"status": "success", "data": [{"__name__": "vllm:num_requests_running", "engine": {"a": 1}}]}),
    (NAMES, {"status": "error", "error": {"message": "not a string"}}),
    ({"status": "success", "data": ["vllm:time_to_first_token_seconds_bucket"]}, SERIES),
], ids=["data-number", "data-string", "names-objects", "data-object", "status-list", "body-list", "deep",
        "not-utf8", "series-number", "series-null", "series-pair", "label-number", "label-object", "error-object",
        "instant-not-vector"])
def test_an_answer_of_the_wrong_shape_is_one_line_exit_3(names, series):
    with Routes(prometheus(names, series)) as server:
        result = doctor("--prometheus", f"http://127.0.0.1:{server.port}")
    assert_one_line(result, 3, f"prometheus at http://127.0.0.1:{server.port}: GET /api/v1/")
    assert "Traceback" not in result.stderr


def test_a_well_formed_answer_is_read():
    """The counterpart of the malformed answers: the same server with the right shapes works."""
    with Routes(prometheus(NAMES, SERIES)) as server:
        result = doctor("--prometheus", f"http://127.0.0.1:{server.port}", "--format", "json")
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["engines"][0]["engine"] == "vllm"


@pytest.mark.parametrize("flag", ["--metrics", "--prometheus"])
@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/", "http://127.0.0.1:port/", "http://a..b/metrics",
                                 "http://[::1/metrics", "http://[::1]x/", "http://user:pw@[::1", "http://%zz/"])
def test_a_malformed_url_is_one_line_exit_2(flag, url):
    result = doctor(flag, url)
    assert_one_line(result, 2, f"{flag} ", "not a valid URL")
    assert "pw" not in result.stderr
