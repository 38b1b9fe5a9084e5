"""Titles and expressions `llmdash diff` shows come from revisions and live servers: a terminal escape
sequence in them is shown escaped, never sent to the reviewer's terminal raw."""

import re

from llmdash.cli.review import render_report
from llmdash.review.compare import diff_dashboard
from llmdash.review.render import render_markdown, render_text

ESC_TITLE = "vLLM\x1b]0;owned\x07"               # sets the terminal window title
ESC_PANEL = "ITL p99\x1b[2K\r\u202eevil"        # erases the line, returns, reverses the text
ESC_EXPR = "rate(x[5m])\x1b[8m hidden"           # hides what follows
RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # any but the line break


def _dashboard(title, panel_title, expr):
    return {"uid": "u", "title": title, "panels": [
        {"id": 1, "type": "row", "title": "Latency", "gridPos": {"x": 0, "y": 0, "w": 24, "h": 1}},
        {"id": 2, "type": "timeseries", "title": panel_title, "gridPos": {"x": 0, "y": 1, "w": 12, "h": 8},
         "targets": [{"refId": "A", "expr": expr}]}]}


def test_dashboard_title_panel_title_and_expression_are_shown_escaped():
    changes = diff_dashboard(_dashboard("vLLM", ESC_PANEL, "rate(x[1m])"), _dashboard(ESC_TITLE, ESC_PANEL, ESC_EXPR))
    assert {c.kind for c in changes} == {"title", "expr"}
    for rendered in (render_text("vllm", changes), render_markdown("vllm", changes),
                     render_report({"vllm": changes, "fleet\x1b[31m": []}, "HEAD", "working tree", "text")):
        assert not RAW_CONTROL.search(rendered), repr(rendered)
    text = render_text("vllm", changes)
    assert "vLLM\\x1b]0;owned\\x07" in text
    assert 'panel "ITL p99\\u001b[2K\\r\\u202eevil"' in text  # quoted as JSON, then escaped
    assert "+ rate(x[5m])\\x1b[8m hidden" in text
    assert "unchanged: fleet\\x1b[31m" in render_report({"fleet\x1b[31m": []}, "HEAD", "working tree", "text")
