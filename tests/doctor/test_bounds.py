"""The doctor's work is bounded whatever it reads: a megabytes-long label value, a page at its size cap,
an endless answer, a server trickling a byte at a time, tens of thousands of unknown names. Each run
stays under PEAK_MB and finishes within its deadline, with one line and exit 2 or 3 where it refuses."""

from __future__ import annotations

import base64
import json
import time

import pytest

from llmdash.doctor.inventory import MAX_METRICS_BYTES, MAX_PROMETHEUS_BYTES
from tests.doctor.servers import PEAK_MB, Routes, assert_one_line, measured, page
from tests.support.fake_grafana import RawServer

pytestmark = pytest.mark.process   # runs the llmdash command in a fresh interpreter, as a user does

DEFAULT_DEADLINE_S = 60


def within_bounds(result: dict) -> None:
    assert result["peak_mb"] < PEAK_MB, result
    assert result["seconds"] < DEFAULT_DEADLINE_S, result


@pytest.mark.parametrize("after, code", [("} 1\n", 1), ("} 1 2 3 4\n", 2)], ids=["sample", "not-a-sample"])
def test_a_five_megabyte_label_value_is_read_in_linear_memory(tmp_path, after, code):
    """The value is the label value Triton's waiting gauge is told apart by, so it is also quoted (cut) in the
    report, or in the error."""
    value = "x\\\"y" * 1_250_000
    kept = "".join(line + "\n" for line in page("tensorrt-llm-triton").splitlines()
                   if 'request_type="waiting"' not in line)
    text = kept + 'nv_trt_llm_request_metrics{request_type="' + value + '"' + after
    (tmp_path / "metrics.txt").write_text(text)
    result = measured("--metrics", str(tmp_path / "metrics.txt"))
    within_bounds(result)
    if code == 2:
        assert_one_line(result, 2, "not Prometheus exposition text: nv_trt_llm_request_metrics{request_type=\"x\\\"y")
    else:
        assert result["returncode"] == 1, result["stderr"]
        assert 'has no series with label request_type="waiting" (values present: ' in result["stdout"]
        assert '"x"yx"y' in result["stdout"]
        assert max(map(len, result["stdout"].splitlines())) < 300


def test_a_page_of_distinct_series_up_to_the_cap_is_read_and_one_byte_more_is_refused(tmp_path):
    head = page("vllm")
    lines, size, i = [head], len(head), 0
    while True:
        line = f'vllm:num_requests_running{{pod="p{i}"}} 1\n'
        if size + len(line) > MAX_METRICS_BYTES:
            break
        lines.append(line)
        size, i = size + len(line), i + 1
    lines.append("#" * (MAX_METRICS_BYTES - size - 1) + "\n")
    (tmp_path / "full.txt").write_text("".join(lines))
    (tmp_path / "over.txt").write_text("".join(lines) + "\n")
    assert (tmp_path / "full.txt").stat().st_size == MAX_METRICS_BYTES

    full = measured("--metrics", str(tmp_path / "full.txt"))
    within_bounds(full)
    assert full["returncode"] == 0, full["stderr"]
    over = measured("--metrics", str(tmp_path / "over.txt"))
    assert_one_line(over, 2, f"more than the {MAX_METRICS_BYTES} allowed")


def endless(head: bytes, item: bytes):
    """An answer of `head` then `item` over and over, 4 times the Prometheus cap (bounded, so a broken
    client cannot eat the machine)."""
    def serve(conn, stop):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + head)
        chunk = item * (65536 // len(item))
        for _ in range(4 * MAX_PROMETHEUS_BYTES // len(chunk)):
            if stop.is_set():
                return
            conn.sendall(chunk)
    return serve


@pytest.mark.parametrize("flag, head, item, message", [
    ("--prometheus", b'{"status":"success","data":[', b'"vllm:a_metric_name",',
     f"its answers are more than the {MAX_PROMETHEUS_BYTES} bytes allowed in all"),
    ("--metrics", b"", b'vllm:num_requests_running{pod="p"} 1\n', f"more than the {MAX_METRICS_BYTES} bytes"),
], ids=["prometheus", "metrics"])
def test_an_endless_answer_stops_at_the_cap(flag, head, item, message):
    with RawServer(endless(head, item)) as server:
        result = measured(flag, f"http://127.0.0.1:{server.port}/metrics")
    within_bounds(result)
    assert_one_line(result, 3, message)


def answers_filling_the_cap(kind: str) -> tuple[bytes, bytes]:
    """(names answer, label sets answer: the count by labels), one of them just under MAX_PROMETHEUS_BYTES of
    distinct items."""
    item = (lambda i: f"vllm:a_name_nobody_exports_{i:012d}") if kind == "names" else \
        (lambda i: {"metric": {"__name__": "vllm:num_requests_running", "model_name": f"m-{i:017d}"},
                    "values": [[1, "1"]]})
    items = [item(i) for i in range((MAX_PROMETHEUS_BYTES - 100) // len(json.dumps([item(0)] * 2)) * 2)]
    if kind == "names":
        return json.dumps({"status": "success", "data": items}).encode(), b'{"status":"success","data":[]}'
    return (b'{"status":"success","data":["vllm:num_requests_running"]}',
            json.dumps({"status": "success", "data": {"resultType": "matrix", "result": items}}).encode())


@pytest.mark.parametrize("kind", ["names", "series"])
def test_prometheus_answers_up_to_the_cap_are_read(kind):
    names, series = answers_filling_the_cap(kind)
    assert MAX_PROMETHEUS_BYTES * 0.9 < len(names) + len(series) <= MAX_PROMETHEUS_BYTES
    with Routes(lambda path, *_: (200, names if path.endswith("/values") else series)) as server:
        result = measured("--prometheus", f"http://127.0.0.1:{server.port}")
    within_bounds(result)
    if kind == "names":
        assert_one_line(result, 2, "no series of any engine catalog")
    else:
        assert result["returncode"] == 1, result["stderr"]


def redirect_with_an_endless_body(conn, stop):
    """A redirect whose body never ends: requests reads a redirect's whole body before following it."""
    conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nConnection: close\r\n\r\n")
    chunk = b"x" * 65536
    for _ in range(4 * MAX_PROMETHEUS_BYTES // len(chunk)):
        if stop.is_set():
            return
        conn.sendall(chunk)


def test_a_redirect_is_followed_without_reading_its_body():
    with RawServer(redirect_with_an_endless_body) as server:
        url = f"http://127.0.0.1:{server.port}/metrics"
        result = measured("--metrics", url)
    within_bounds(result)
    assert_one_line(result, 3, f"{url}: more than 5 redirects")


def test_a_redirect_on_the_same_server_keeps_the_credentials():
    text = page("vllm").encode()

    def answer(path, query, headers):
        if headers.get("Authorization") != "Basic " + base64.b64encode(b"u:pw").decode():
            return 401, b"who?"
        return (200, text) if path == "/metrics/" else (301, b"", {"Location": "/metrics/"})

    with Routes(answer) as server:
        result = measured("--metrics", f"http://u:pw@127.0.0.1:{server.port}/metrics")
    assert result["returncode"] == 0, result["stderr"]
    assert [path for path, _ in server.seen] == ["/metrics", "/metrics/"]


def trickle_headers(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    while not stop.wait(0.3):
        conn.sendall(b"X-Slow: x\r\n")          # every read succeeds, so a read timeout never fires


def trickle_body(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n{")
    while not stop.wait(0.3):
        conn.sendall(b" ")


@pytest.mark.parametrize("flag", ["--metrics", "--prometheus"])
@pytest.mark.parametrize("serve", [trickle_headers, trickle_body], ids=["headers", "body"])
def test_a_trickling_server_fails_at_the_deadline(flag, serve):
    with RawServer(serve) as server:
        started = time.monotonic()
        result = measured(flag, f"http://127.0.0.1:{server.port}/metrics", "--deadline", "2")
        elapsed = time.monotonic() - started
    assert_one_line(result, 3, "no complete answer within the 2s deadline (--deadline)")
    assert elapsed < 2 + 5


def test_the_deadline_is_documented_and_checked():
    result = measured("--help")
    assert "--deadline" in result["stdout"] and "default: 60" in result["stdout"]
    assert_one_line(measured("--metrics", "x.txt", "--deadline", "inf"), 2, "--deadline")


def test_fifty_thousand_unknown_names_are_compared_within_a_bound(tmp_path):
    """Every absent catalog series is compared with the names the catalog does not know (a rename?);
    against 50 000 of them, each close to the absent names, that took minutes of CPU."""
    kept = "".join(line + "\n" for line in page("vllm").splitlines() if "generation_tokens" in line)
    unknown = "".join(f"vllm:time_to_first_token_secondz_{i}_bucket 1\n" for i in range(50_000))
    (tmp_path / "metrics.txt").write_text(kept + unknown)
    result = measured("--metrics", str(tmp_path / "metrics.txt"))
    within_bounds(result)
    assert result["returncode"] == 1, result["stderr"]
    assert result["cpu_seconds"] < 10, result
