"""`llmdash doctor` on a live /metrics page (a loopback HTTP server): for every configured SLO, whether the
series it counts from is there: a latency SLO's target bucket under either `le` text the rules match, with the
catalogued release layout its bounds are; an availability SLO's failed-request series. A missing one is a
problem line and exit 1; without SLOs the report is what it was."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doctor.servers import ROOT, Routes, page

pytestmark = pytest.mark.process   # runs the llmdash command in a fresh interpreter, as a user does

TTFT = "    - {name: ttft, target_seconds: 2.5, engines: [vllm]}\n"
ITL = "    - {name: itl, sli: token_latency, target_seconds: 2, engines: [dynamo]}\n"
AVAILABILITY = "    - {name: availability, engines: [vllm]}\n"


def doctor_on(tmp_path: Path, text: str, objectives: str, *extra: str, engines: str = "[vllm, dynamo]"):
    """The doctor's run on `text` served at http://127.0.0.1:<port>/metrics, under a config of `objectives`."""
    config = tmp_path / "llmdash.yaml"
    config.write_text(f"engines: {engines}\n" + (f"slo:\n  objectives:\n{objectives}" if objectives else ""))
    body = text.encode()
    with Routes(lambda path, query, headers: (200, body) if path == "/metrics" else (404, b"")) as server:
        return subprocess.run([sys.executable, "-m", "llmdash.cli.main", "--config", str(config), "doctor",
                               "--metrics", f"http://127.0.0.1:{server.port}/metrics", *extra],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)


def slo_lines(stdout: str) -> list[str]:
    """The lines of the report's `slo` section."""
    lines = stdout.splitlines()
    start = lines.index("  slo") + 1
    return list(itertools.takewhile(lambda line: line.startswith("    "), lines[start:]))


def without(text: str, pattern: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not re.search(pattern, line))


def test_the_target_bucket_is_found_as_the_exporter_writes_it_and_as_prometheus_3_stores_it(tmp_path):
    """Dynamo (Rust) writes the 2 s bound `le="2"`; Prometheus 3, and a federation of it, `le="2.0"`."""
    exported = page("dynamo")
    assert 'dynamo_frontend_inter_token_latency_seconds_bucket{' in exported and 'le="2"}' in exported
    normalised = exported.replace('le="2"}', 'le="2.0"}')
    for text in (exported, normalised):
        result = doctor_on(tmp_path, text, ITL)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr
        assert slo_lines(result.stdout) == [
            '    ok      itl (token_latency): dynamo_frontend_inter_token_latency_seconds_bucket at le="2" or '
            'le="2.0" present (the layout of every dynamo release)']
        assert "dynamo: 0 of " in result.stdout and "; 0 of 1 SLO series cannot count" in result.stdout


def test_the_bounds_are_named_as_the_catalogued_release_layout_they_are(tmp_path):
    """vLLM's TTFT buckets ended at 10 s before 0.8.0; a 0.7.3 page has that layout, and 2.5 s in it."""
    for era, layout in ((None, "from 0.8.0"), ("0.7.3", "before 0.8.0")):
        result = doctor_on(tmp_path, page("vllm", era=era), TTFT, engines="[vllm]")
        assert slo_lines(result.stdout) == [
            '    ok      ttft (ttft): vllm:time_to_first_token_seconds_bucket at le="2.5" present '
            f'(the layout of vllm {layout})']


def test_a_page_whose_layout_lacks_the_target_names_the_nearest_bounds_and_exits_1(tmp_path):
    """Bounds the catalog does not list (a release outside its range, or buckets overridden at deployment)
    without 2.5 s: the rules' good-event rate, read from that bucket alone, is empty."""
    text = without(page("vllm"), r'^vllm:time_to_first_token_seconds_bucket\{.*le="2\.5"')
    result = doctor_on(tmp_path, text, TTFT, engines="[vllm]")
    assert result.returncode == 1, result.stderr
    line, problem = slo_lines(result.stdout)
    assert line.startswith('    MISSING ttft (ttft): vllm:time_to_first_token_seconds_bucket at le="2.5" absent '
                           '(no catalogued layout; bounds: 0.001, 0.005, ')
    assert problem == ('            - vllm:time_to_first_token_seconds_bucket has no bucket at the 2.5s target '
                       '(le="2.5"): its bounds nearest it are le="1.0" and le="5.0", so its recorded series stay '
                       'empty and its alerts cannot fire')
    assert "; 1 of 1 SLO series cannot count" in result.stdout
    (engine,) = json.loads(doctor_on(tmp_path, text, TTFT, "--format", "json", engines="[vllm]").stdout)["engines"]
    (check,) = engine["slos"]
    assert check["found"] is False and check["problems"] == [problem.removeprefix("            - ")]


def test_without_slos_the_report_is_the_one_with_slos_minus_their_lines(tmp_path):
    """Configuring an objective adds its `slo` section and the summary's SLO count, and changes nothing else."""
    text = page("vllm")
    plain = doctor_on(tmp_path, text, "", engines="[vllm]")
    with_slo = doctor_on(tmp_path, text, TTFT + AVAILABILITY, engines="[vllm]")
    assert plain.returncode == with_slo.returncode == 0, with_slo.stdout[-3000:] + with_slo.stderr
    assert "  slo" not in plain.stdout.splitlines() and "SLO series" not in plain.stdout
    added = ["  slo"] + slo_lines(with_slo.stdout)
    assert len(added) == 3
    stripped = [line for line in with_slo.stdout.splitlines() if line not in added]
    stripped = [re.sub(r"; \d+ of \d+ SLO series cannot count$", "", line) for line in stripped]
    # the rules of an objective add recorded series and alerts: compare the report up to the rules section
    before = plain.stdout.splitlines()
    cut = before.index("  rules")
    assert stripped[1:cut] == before[1:cut]       # the first line names the URL, a port of its own
    as_json = json.loads(doctor_on(tmp_path, text, "", "--format", "json", engines="[vllm]").stdout)
    assert "slos" not in as_json["engines"][0]


def test_an_availability_slo_needs_the_failed_request_series(tmp_path):
    """vLLM counts failed requests as finished with reason "error"; a page without them (the V0 engine,
    an exporter that drops zero series) cannot be counted: the SLI leaves it out."""
    text = page("vllm")
    assert 'finished_reason="error"' in text
    result = doctor_on(tmp_path, text, AVAILABILITY, engines="[vllm]")
    assert result.returncode == 0, result.stdout[-3000:]
    assert slo_lines(result.stdout) == [
        '    ok      availability (availability): vllm:request_success_total{finished_reason="error"} present']
    result = doctor_on(tmp_path, without(text, 'finished_reason="error"'), AVAILABILITY, engines="[vllm]")
    assert result.returncode == 1
    assert slo_lines(result.stdout) == [
        '    MISSING availability (availability): vllm:request_success_total{finished_reason="error"} absent',
        '            - vllm:request_success_total has no series with finished_reason="error": the SLO cannot count '
        "these replicas' failed requests, so it leaves them out of its valid events (coverage 0 %; "
        'LLMServingSLOCoverageLow warns) and cannot burn']


def test_tgis_failure_counter_absent_before_any_failure_is_noted_not_a_problem(tmp_path):
    """TGI creates tgi_request_failure at its first failure: absent, it is noted (exit 0); present with only
    client errors (validation), the server's failures cannot be counted: a problem (exit 1)."""
    text, objective = without(page("tgi"), "^tgi_request_failure"), "    - {name: availability, engines: [tgi]}\n"
    selector = 'tgi_request_failure{err=~"generation|incomplete|overloaded"}'
    assert "tgi_request_failure{" in page("tgi") and "tgi_request_failure{" not in text
    result = doctor_on(tmp_path, text, objective, engines="[tgi]")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert slo_lines(result.stdout) == [
        f"    absent  availability (availability): {selector} absent",
        "            note: tgi_request_failure absent: no request has failed since the engine started, or the engine "
        "does not export it; until it appears availability reads 100 %"]
    result = doctor_on(tmp_path, text + 'tgi_request_failure{err="generation"} 3\n', objective, engines="[tgi]")
    assert result.returncode == 0 and slo_lines(result.stdout) == [
        f"    ok      availability (availability): {selector} present"]
    result = doctor_on(tmp_path, text + 'tgi_request_failure{err="validation"} 3\n', objective, engines="[tgi]")
    assert result.returncode == 1 and slo_lines(result.stdout)[1].startswith(
        '            - tgi_request_failure has no series with err=~"generation|incomplete|overloaded": ')

