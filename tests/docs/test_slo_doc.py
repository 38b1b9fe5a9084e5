"""docs/slo.md states no SLO figure by hand that nothing checks: outside its generated parts (written by
`python -m llmdash.docgen` from the rules and catalogs, checked stale by tests/docs/test_docs.py), every burn
rate and window it names is one of the burn-rate pairs', and every other figure is the configuration example's
or appears in the test file its paragraph names (the test that checks it)."""

from __future__ import annotations

import re
from pathlib import Path

from llmdash.vocabulary import BURN_PAIRS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs/slo.md"
FIGURE = re.compile(r"\b\d+(?:\.\d+)?(?:\s?(?:×|%)|\s?s\b|[mhdwy]\b)")
TESTS = re.compile(r"`(tests/[\w/]+\.py)`")


def paragraphs() -> list[str]:
    text = re.sub(r"<!-- generated: [a-z-]+ -->.*?<!-- end generated -->", "", PAGE.read_text(), flags=re.S)
    return re.split(r"\n\s*\n", re.sub(r"```.*?```", "", text, flags=re.S))


def example_figures() -> set[str]:
    """The configuration example's first objective, as the prose writes it (99 %, 1 s, its budget 1 %)."""
    example = re.search(r"```yaml\n(.*?)```", PAGE.read_text(), re.S)[1]
    objective = float(re.search(r"objective: ([0-9.]+)", example)[1])
    target = float(re.search(r"target_seconds: ([0-9.]+)", example)[1])
    return {f"{100 * objective:g} %", f"{target:g} s", f"{100 * (1 - objective):g} %"}


def test_every_figure_in_the_prose_is_a_pair_s_the_example_s_or_its_test_s():
    pairs = [p for ps in BURN_PAIRS.values() for p in ps]
    allowed = {f"{p.burn:g}×" for p in pairs} | {w for p in pairs for w in (p.long, p.short)} | example_figures()
    unchecked = []
    for paragraph in paragraphs():
        cited = "".join((ROOT / name).read_text() for name in TESTS.findall(paragraph))
        unchecked += [(figure, paragraph[:60]) for figure in FIGURE.findall(paragraph)
                      if figure not in allowed and figure not in cited]
    assert unchecked == []


def test_the_check_sees_a_figure_typed_by_hand(tmp_path):
    """The oracle itself: a stated 13× or a 4h window is neither a pair's nor cited."""
    pairs = [p for ps in BURN_PAIRS.values() for p in ps]
    assert "13×" not in {f"{p.burn:g}×" for p in pairs} and FIGURE.findall("pages at 13× over 4h") == ["13×", "4h"]
