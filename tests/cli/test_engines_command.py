"""`llmdash engines` prints the engine table, and docs/engines.md shows exactly that table."""

import re
import subprocess
import sys

from tests.support.catalogs import ENGINES
from tests.support.paths import ROOT


def engines_output() -> str:
    result = subprocess.run([sys.executable, "-m", "llmdash.cli.main", "engines"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_engines_prints_versions_and_the_series_behind_each_signal():
    rows = {line.split("`")[1]: line for line in engines_output().splitlines()[2:]}
    assert sorted(rows) == ENGINES
    assert "vLLM 0.6.0–0.33.0" in rows["vllm"] and "counter `vllm:num_preemptions_total`" in rows["vllm"]
    assert "ITL `vllm:inter_token_latency_seconds` (0.10.2+)" in rows["vllm"]
    assert rows["lmdeploy"].endswith("| none: divergence only |")
    assert "gauge `trtllm_num_paused_requests` (1.3.0+)" in rows["tensorrt-llm-serve"]
    assert "ITL" not in rows["tensorrt-llm-triton"]


def test_the_engines_page_shows_what_llmdash_engines_prints():
    assert engines_output().strip() in (ROOT / "docs" / "engines.md").read_text()


def test_every_row_has_four_cells_even_with_regex_matchers():
    """A `|` inside a matcher (SGLang's tp_rank=~"0|") must be escaped, or the table gains a column."""
    for line in engines_output().splitlines():
        assert len(re.split(r"(?<!\\)\|", line)) == 6, line
