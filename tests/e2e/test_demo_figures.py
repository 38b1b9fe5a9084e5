"""The demo's figures quoted in the docs are what the demo computes: docs/simulator.md's example output and
the README's caption of the vLLM picture, checked against the demo's own evaluation of vLLM on seed 1.

On the session's Prometheus (the same kv-collapse simulation the demo backfills, seed 1, its window
5-minute aligned like the demo's), so checking costs one dashboard evaluation, not a demo run."""

from __future__ import annotations

import re

import pytest

from llmdash.build import build_dashboards
from llmdash.config import Config
from llmdash.lab import demo
from tests.support.paths import ROOT

# `make demo` runs the Prometheus on PATH, Debian's: the figures it prints are the oldest stack's (Prometheus 3's
# left-open ranges move the last digit of some of them)
pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("stack", ["oldest"], indirect=True)]

ENGINE = "vllm"


@pytest.fixture(scope="module")
def summary(prometheus_scenarios) -> list[str]:
    server, windows = prometheus_scenarios
    window = windows[demo.SCENARIO]
    result = demo.evaluate(build_dashboards(Config(engines=(ENGINE,)))[ENGINE], server, window)
    return [line.strip() for line in demo.summarise(ENGINE, result, window.onset, window.end).splitlines()[1:]]


def quoted_output() -> list[str]:
    """The indented example lines of docs/simulator.md's `make demo` section."""
    section = (ROOT / "docs" / "simulator.md").read_text(encoding="utf-8").split("## `make demo`", 1)[1]
    section = section.split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines() if line.startswith("    ") and line.strip()]


def test_the_simulator_page_quotes_the_demo_output(summary):
    lines = quoted_output()
    assert len(lines) >= 4
    assert [line for line in lines if line not in summary] == [], "\n".join(summary)


def caption_pairs() -> list[tuple[str, str]]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    caption = readme.split("*`make demo` on vLLM", 1)[1].split("*", 1)[0]
    return re.findall(r"([\d.]+) →\s+([\d.]+)", caption)


def test_the_readme_caption_is_the_demo_output(summary):
    changes = [re.search(r"^(.+?): ([\d.]+) -> ([\d.]+) ", line) for line in summary]
    figures = {m[1]: (m[2], m[3]) for m in changes if m}
    pairs = caption_pairs()
    assert pairs == [figures["Output tokens/s"], figures["ITL p99"], figures["TTFT p99"]], "\n".join(summary)
