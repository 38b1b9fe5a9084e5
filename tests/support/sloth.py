"""Sloth (github.com/slok/sloth), the general SLO generator, as a second opinion on llmdash's SLO rules.

Why a peer tool: llmdash's burn-rate rules and Sloth's are both the SRE Workbook's multiwindow, multi-burn-rate
alerts, written by different people from the same chapter. Where they agree, each checks the other; where they
differ, a test says which one the Workbook's definition (error ratio = bad events / valid events over the
window) agrees with. The Sloth specs here are written as a Sloth user would, from the series the engine exports
(the names as vLLM scrapes them, not llmdash's catalog or PromQL helpers), and the rules come from the real
`sloth generate` at test time, never from a committed copy.

The binary is the one .ci/build-stack builds from the Go module proxy (`make deps`) into the per-user cache
(.ci/current-stack names the version, tests/support/stacks.py the path).
Its absence skips a test with that reason, and fails it under CI=true (a second opinion that silently did not
run is no opinion).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support import stacks


# The error (bad events/s) and total (valid events/s) queries of each objective kind on vLLM, per model and
# fleet group as llmdash's SLIs count them: latency from the target's bucket against the histogram's count,
# availability from the requests finished with reason "error" among those finished (a client abort is not
# a valid event). TARGET is the bucket bound as vLLM writes it; `{{.window}}` is Sloth's window variable.
WINDOW = "{{.window}}"


def _rate(selector: str) -> str:
    return "sum by (cluster, namespace, model_name) (rate(" + selector + "[" + WINDOW + "]))"


def _latency(histogram: str) -> tuple[str, str]:
    count = _rate(f"{histogram}_count")
    return f"{count} - " + _rate(histogram + '_bucket{le="TARGET"}'), count


VLLM_QUERIES = {
    "ttft": _latency("vllm:time_to_first_token_seconds"),
    "token_latency": _latency("vllm:inter_token_latency_seconds"),
    "availability": (_rate('vllm:request_success_total{finished_reason="error"}'),
                     _rate('vllm:request_success_total{finished_reason!="abort"}')),
}
ALERT = "SlothSLOBurnRate"   # Sloth names page and ticket alike; `sloth_severity` (page, ticket) tells them apart


def binary() -> str:
    """The Sloth that `make deps` builds; a missing one skips the test naming `make deps` (fails it under CI)."""
    path = stacks.current().binaries["sloth"]
    if not os.access(path, os.X_OK):
        reason = f"Sloth is not built ({path} is missing): {stacks.MAKE_DEPS}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot compare the SLO rules with Sloth: {reason}", pytrace=False)
        pytest.skip(reason)
    return path


def _bound(seconds: float) -> str:
    """The bucket bound as vLLM's Python client writes it (`1.0`, `0.1`): floats in repr form."""
    return repr(float(seconds))


def spec(objectives, service: str = "llmdash-vllm") -> dict:
    """The Sloth prometheus/v1 spec of llmdash `Objective`s on vLLM: same series, objective and window (30d,
    Sloth's default period, whose windows and budget shares are the Workbook's)."""
    slos = []
    for o in objectives:
        if o.window != "30d":
            raise ValueError(f"{o.name}: window {o.window}: Sloth's built-in windows are 30d and 28d (28d keeps "
                             "the budget shares, not llmdash's burn rates); a custom catalog is not written here")
        error, total = (q.replace("TARGET", _bound(o.target_seconds)) if o.target_seconds else q
                        for q in VLLM_QUERIES[o.kind])
        slos.append({"name": o.name, "objective": round(o.objective * 100, 10),
                     "sli": {"events": {"error_query": error, "total_query": total}},
                     "alerting": {"name": ALERT, "page_alert": {"labels": {"severity": "critical"}},
                                  "ticket_alert": {"labels": {"severity": "warning"}}}})
    return {"version": "prometheus/v1", "service": service, "labels": {"llm_engine": "vllm"}, "slos": slos}


def generate(objectives, directory: Path) -> Path:
    """Sloth's rule file for `objectives`, written by the real `sloth generate` into `directory`."""
    source, out = directory / "sloth-spec.yaml", directory / "sloth.rules.yaml"
    source.write_text(yaml.safe_dump(spec(objectives), sort_keys=False, width=10_000))
    result = subprocess.run([binary(), "generate", "--no-log", "-i", str(source), "-o", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and out.is_file(), f"sloth generate failed: {result.stderr.strip()[-2000:]}"
    return out
