"""What the doctor says about a page matches the page: escape sequences in a label value are shown
escaped, never sent to the terminal; an OpenMetrics page with exemplars is read; a page of an engine
release newer than its catalog (only names the catalog does not list) is that engine, every query empty."""

from __future__ import annotations

import json
import re

import pytest

from tests.doctor.servers import doctor, page

pytestmark = pytest.mark.process   # runs the llmdash command in a fresh interpreter, as a user does

ESCAPES = {"\x1b]0;owned\x07": "\\x1b]0;owned\\x07",       # OSC: sets the window title, always interpreted
           "\x1b[2J": "\\x1b[2J",                            # CSI: clears the screen
           "\x9b31m": "\\x9b31m",                            # the one-byte C1 CSI
           "\u202eevil": "\\u202eevil"}                      # right-to-left override


def test_escape_sequences_in_a_label_value_are_shown_escaped(tmp_path):
    value = "".join(ESCAPES)
    text = page("tensorrt-llm-triton").replace('request_type="waiting"', f'request_type="{value}"')
    (tmp_path / "metrics.txt").write_text(text)
    plain = doctor("--metrics", str(tmp_path / "metrics.txt"))
    as_json = doctor("--metrics", str(tmp_path / "metrics.txt"), "--format", "json")
    for result in (plain, as_json):
        assert result.returncode == 1, result.stderr
        assert not set(ESCAPES) & set(result.stdout), "raw escape characters reached the output"
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e]", result.stdout)
    assert f'"{"".join(ESCAPES.values())}"' in plain.stdout and "(values present: " in plain.stdout
    problems = [p for e in json.loads(as_json.stdout)["engines"] for c in e["checks"] for p in c["problems"]]
    assert any("".join(ESCAPES.values()) in problem for problem in problems)


def with_exemplars(text: str) -> str:
    """`text` with an OpenMetrics exemplar after every histogram bucket sample."""
    return "".join(line + (' # {trace_id="abc"} 1.0 1690000000.0' if "_bucket{" in line else "") + "\n"
                   for line in text.splitlines())


def test_an_openmetrics_page_with_exemplars_is_read(tmp_path):
    text = with_exemplars(page("vllm")) + "# EOF\n"
    assert ' # {trace_id="abc"} 1.0 1690000000.0' in text
    (tmp_path / "metrics.txt").write_text(text)
    result = doctor("--metrics", str(tmp_path / "metrics.txt"), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["engines"][0]["empty"] == 0


def test_a_malformed_exemplar_is_not_exposition_text(tmp_path):
    lines = page("vllm").splitlines()
    number = next(i for i, line in enumerate(lines) if "_bucket{" in line)
    lines[number] += ' # {trace_id="abc" 1.0'
    (tmp_path / "metrics.txt").write_text("\n".join(lines) + "\n")
    result = doctor("--metrics", str(tmp_path / "metrics.txt"))
    assert result.returncode == 2 and f"line {number + 1}: not Prometheus exposition text" in result.stderr


def test_a_page_of_only_names_under_the_engines_prefix_is_that_engine_with_every_query_empty(tmp_path):
    (tmp_path / "metrics.txt").write_text('# TYPE vllm:iteration_tokens_total counter\n'
                                          'vllm:iteration_tokens_total{model_name="m",engine="0"} 5\n')
    result = doctor("--metrics", str(tmp_path / "metrics.txt"), "--format", "json")
    assert result.returncode == 1, result.stderr
    (found,) = json.loads(result.stdout)["engines"]
    assert found["engine"] == "vllm" and found["present"] == []
    assert found["versions"]["since"] is None and found["versions"]["text"].startswith("unknown")
    assert found["checks"] and not any(c["filled"] for c in found["checks"])
    text = doctor("--metrics", str(tmp_path / "metrics.txt"))
    assert text.returncode == 1 and "\nvllm (vLLM): 0 of " in text.stdout
    assert f"vllm: {len(found['checks'])} of {len(found['checks'])} queries will be empty" in text.stdout


def test_a_name_under_no_engine_prefix_is_still_no_engine(tmp_path):
    (tmp_path / "metrics.txt").write_text("vllmx:iteration_tokens_total 5\nprocess_cpu_seconds_total 1\n")
    result = doctor("--metrics", str(tmp_path / "metrics.txt"))
    assert result.returncode == 2 and "no engine recognised" in result.stderr
