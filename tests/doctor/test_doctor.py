"""`llmdash doctor`: on the simulator's /metrics every query has data; remove or relabel a series and it
names what goes empty and why; against a real Prometheus it reports per engine; bad input is one line, exit 2
(a server or network failure exit 3)."""

from __future__ import annotations

import itertools
import json
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from llmdash.engines.catalog import load_all, load_engine
from llmdash.lab.emitters import simulated_engines
from llmdash.lab.scenarios import build, scrapes
from tests.doctor.servers import doctor, page as metrics_page
from tests.support.paths import ROOT

pytestmark = pytest.mark.process   # runs the llmdash command in a fresh interpreter, as a user does

SIMULATED = simulated_engines(load_all())
COLLAPSE = "kv-collapse"


def report(tmp_path: Path, text: str, *extra: str):
    page = tmp_path / "metrics.txt"
    page.write_text(text)
    result = doctor("--metrics", str(page), "--format", "json", *extra)
    return result, (json.loads(result.stdout) if result.stdout else None)


def empty_checks(body: dict, engine: str) -> dict[str, list[str]]:
    """'kind title [ref]' -> problems, for every check of `engine` that will be empty."""
    (found,) = [e for e in body["engines"] if e["engine"] == engine]
    return {f"{c['kind']} {c['title']}{' ' + c['ref'] if c['ref'] else ''}": c["problems"]
            for c in found["checks"] if not c["filled"]}


@pytest.mark.parametrize("engine", SIMULATED)
def test_every_query_has_data_on_the_simulated_metrics_page(tmp_path, engine):
    result, body = report(tmp_path, metrics_page(engine, COLLAPSE))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert [e["engine"] for e in body["engines"]] == [engine]
    (found,) = body["engines"]
    kinds = {c["kind"] for c in found["checks"]}
    assert {"panel", "annotation", "alert", "record"} <= kinds
    assert found["empty"] == 0 and all(c["filled"] for c in found["checks"])
    assert found["versions"]["catalog"] == load_engine(engine).versions


def test_a_removed_counter_names_the_panels_and_alert_left_empty(tmp_path):
    text = "".join(line + "\n" for line in metrics_page("vllm", COLLAPSE).splitlines()
                   if "vllm:num_preemptions_total" not in line)
    result, body = report(tmp_path, text)
    assert result.returncode == 1
    empty = empty_checks(body, "vllm")
    assert "panel Preemptions/s A" in empty and "annotation Preemption" in empty
    assert "alert LLMServingPreemptionsHigh" in empty
    assert all("vllm:num_preemptions_total absent" in " ".join(problems) for problems in empty.values())
    assert "panel KV-cache usage A" not in empty and "panel ITL p99 A" not in empty
    text_out = doctor("--metrics", str(tmp_path / "metrics.txt")).stdout
    assert "EMPTY Preemptions/s" in text_out and "- vllm:num_preemptions_total absent" in text_out


def test_a_series_renamed_by_a_newer_release_is_named_beside_the_panels_it_empties(tmp_path):
    text = metrics_page("vllm", COLLAPSE).replace("vllm:num_preemptions_total", "vllm:num_preemption_events_total")
    result, body = report(tmp_path, text)
    assert result.returncode == 1
    empty = empty_checks(body, "vllm")
    assert "panel Preemptions/s A" in empty and "alert LLMServingPreemptionsHigh" in empty
    assert all("vllm:num_preemption_events_total is present but not in the catalog" in " ".join(problems)
               for problems in empty.values())


def test_the_old_kv_name_alone_still_fills_the_kv_panels_through_the_fallback(tmp_path):
    text = metrics_page("vllm", COLLAPSE).replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    result, body = report(tmp_path, text)
    assert result.returncode == 0, result.stdout[-2000:]
    (found,) = body["engines"]
    assert "vllm:gpu_cache_usage_perc" in found["present"] and "vllm:kv_cache_usage_perc" in found["missing"]
    assert found["versions"]["text"].startswith("mixed")  # 0.30+ histograms beside a name gone in 0.11


OLD_RELEASE_EMPTY = {
    # no ITL before 0.4.4, no per-request TPOT before 0.5.22, no retraction counters before 0.5.7
    "sglang": {"ITL p99", "TPOT p99", "Preemptions/s", "Retracted tokens/s: prompt vs generated",
               "Latency vs throughput divergence", "Top instances by preemption", "Top instances by ITL p99",
               "ITL under 0.1s", "Preemption", "Divergence: ITL p99 up, throughput flat"},
    # no per-request TPOT before 0.11, no preemptions-per-request histogram before 0.30
    "vllm": {"TPOT p99", "Preemptions per finished request"},
}


@pytest.mark.parametrize("engine, release, versions, absent", [
    ("sglang", "0.4.1", "0.4.0 to before 0.4.4",      # gauges without engine_type: before 0.4.4
     "sglang:inter_token_latency_seconds_bucket absent: not exported by sglang 0.4.0 to before 0.4.4 "
     "(exported from 0.4.4)"),
    ("vllm", "0.7.3", "0.6.0 to before 0.8.0",        # V0 series without the engine label
     "vllm:request_time_per_output_token_seconds_bucket absent: not exported by vllm 0.6.0 to before 0.8.0 "
     "(exported from 0.11.0)"),
])
def test_an_old_release_is_dated_by_its_series_and_labels_and_only_its_gaps_are_empty(
        tmp_path, engine, release, versions, absent):
    result, body = report(tmp_path, metrics_page(engine, COLLAPSE, era=release))
    assert result.returncode == 1, result.stderr
    (found,) = body["engines"]
    assert found["versions"]["text"] == versions and found["notes"] == []
    dashboard = [c for c in found["checks"] if c["kind"] in ("panel", "annotation")]
    assert {c["title"] for c in dashboard if not c["filled"]} == OLD_RELEASE_EMPTY[engine]
    assert any(absent in problem for c in dashboard for problem in c["problems"])


def test_a_series_present_on_one_tp_rank_only_still_fills_the_panels(tmp_path):
    """Ranks are deduplicated, not filtered (issue 19): without tp_rank 0, tp_rank 1 carries the same count."""
    text = "".join(line + "\n" for line in metrics_page("sglang", COLLAPSE).splitlines() if 'tp_rank="0"' not in line)
    assert 'tp_rank="1"' in text
    result, body = report(tmp_path, text)
    empty = empty_checks(body, "sglang")
    assert "panel Preemptions/s A" not in empty and "alert LLMServingPreemptionsHigh" not in empty


def test_an_engine_page_without_the_model_label_its_relabeling_adds_is_not_judged_on_it(tmp_path):
    """TGI exports no model label; on its own /metrics page (before relabeling) every query still has data
    (the dashboards match the model by regex, and All is .*, which an absent label matches)."""
    text = re.sub(r'model_name="[^"]*",?', "", metrics_page("tgi", "steady")).replace("{}", "")
    assert "model_name" not in text and "tgi_queue_size " in text
    result, body = report(tmp_path, text)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert body["engines"][0]["empty"] == 0


def test_a_missing_gauge_outside_the_detected_versions_says_so(tmp_path):
    text = "".join(line + "\n" for line in metrics_page("vllm", COLLAPSE).splitlines()
                   if "kv_cache_usage_perc" not in line)
    result, body = report(tmp_path, text)
    assert result.returncode == 1
    problems = empty_checks(body, "vllm")["panel KV-cache usage A"]
    assert problems[0] == "vllm:kv_cache_usage_perc absent"
    assert problems[1].startswith("vllm:gpu_cache_usage_perc absent: not exported by vllm 0.30.0 or later")


def _backfill(path: Path, engines: list[str], minutes: int = 10) -> None:
    """`minutes` of the steady scenario for `engines`, ending now, as OpenMetrics for promtool."""
    scenario = build("steady")
    start = time.time() - minutes * 60
    declared: set[str] = set()
    with open(path, "w") as out:
        for t, batch in itertools.islice(scrapes(scenario, {e: load_engine(e) for e in engines}, 1), minutes * 4):
            for _engine, _model, emitter in batch:
                out.write("".join(line + "\n" for line in emitter.render(emitter.target, start + t, declared)))
        out.write("# EOF\n")


@pytest.mark.e2e
def test_against_a_real_prometheus_with_a_mixed_fleet_it_reports_per_engine(tmp_path):
    from llmdash.lab.promserver import PrometheusServer

    server = PrometheusServer()
    try:
        _backfill(tmp_path / "fleet.om", ["vllm", "sglang"])
        server.backfill(tmp_path / "fleet.om")
        server.start()
        result = doctor("--prometheus", server.url, "--format", "json")
        text = doctor("--prometheus", server.url)
    finally:
        server.stop()
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    body = json.loads(result.stdout)
    assert sorted(e["engine"] for e in body["engines"]) == ["sglang", "vllm"]
    assert all(e["empty"] == 0 and len(e["checks"]) > 40 for e in body["engines"])
    assert text.returncode == 0 and "\nvllm (vLLM):" in text.stdout and "\nsglang (SGLang):" in text.stdout


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("args, message, code", [
    (["--metrics", "/nonexistent/metrics.txt"], "cannot read metrics text", 2),
    (["--metrics", "README.md"], "not Prometheus exposition text", 2),
    (["--prometheus", "ftp://127.0.0.1/"], "expected an http:// or https:// URL", 2),
    ([], "give exactly one of", 2),
    (["--metrics", "http://127.0.0.1:{port}/metrics"], "unreachable", 3),
    (["--prometheus", "http://127.0.0.1:{port}"], "unreachable", 3),
])
def test_bad_input_is_one_line_and_exit_2_a_network_failure_exit_3(args, message, code):
    port = _closed_port()
    result = doctor(*[a.format(port=port) for a in args])
    assert result.returncode == code, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and message in result.stderr and result.stderr.count("\n") == 1


def test_series_of_no_engine_is_bad_input(tmp_path):
    page = tmp_path / "metrics.txt"
    page.write_text('# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total{job="x"} 1.5\n')
    result = doctor("--metrics", str(page))
    assert result.returncode == 2 and "no engine recognised" in result.stderr


def test_a_metrics_url_is_read_over_http_and_credentials_never_echo(tmp_path):
    page = metrics_page("lmdeploy", COLLAPSE).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        result = doctor("--metrics", f"http://user:s3cret@127.0.0.1:{port}/metrics")
        missing = doctor("--metrics", f"http://user:s3cret@127.0.0.1:{port}/nope")
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0 and "\nlmdeploy (LMDeploy):" in result.stdout
    assert missing.returncode == 3 and "HTTP 404" in missing.stderr
    assert "s3cret" not in result.stdout + result.stderr + missing.stderr


def test_unprefixed_series_name_an_engine_only_when_every_required_signal_is_there(tmp_path):
    """NIM's names are all generic: a page is NIM's when its required series are all present, never
    because one shared name (TensorRT-LLM 1.0-1.2 serves time_to_first_token_seconds too) appears."""
    text = metrics_page("nim", COLLAPSE)
    result, body = report(tmp_path, text)
    assert result.returncode == 0 and [e["engine"] for e in body["engines"]] == ["nim"]
    partial = "".join(line + "\n" for line in text.splitlines() if "num_requests_waiting" not in line)
    result, _ = report(tmp_path, partial)
    assert result.returncode == 2 and "no engine recognised" in result.stderr


def test_with_logs_enabled_the_log_panel_is_said_to_come_from_mtail_not_the_engine_page(tmp_path):
    (tmp_path / "llmdash.yaml").write_text("engines: [sglang]\nlogs: {enabled: true}\n")
    (tmp_path / "metrics.txt").write_text(metrics_page("sglang", COLLAPSE))
    result = subprocess.run([sys.executable, "-m", "llmdash.cli.main", "--config", str(tmp_path / "llmdash.yaml"),
                             "doctor", "--metrics", str(tmp_path / "metrics.txt"), "--format", "json"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    empty = empty_checks(json.loads(result.stdout), "sglang")
    assert set(empty) == {"panel Preemptions/s (logs) A", "annotation Preemption (logs)",
                          "alert LLMServingLogPreemptionsHigh"}
    assert all("generated/mtail/sglang.mtail" in " ".join(problems) for problems in empty.values())
