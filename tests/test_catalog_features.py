"""Catalog features new engines rely on: how each metrics library writes `le`, label alternatives,
and default selectors for engines whose names alone are ambiguous."""

import shutil
from pathlib import Path

import pytest

from llmdash.config import Config
from llmdash.engines.catalog import CATALOG_DIR, EXPORTERS, load_catalog
from llmdash.panels.signals import Signals, fixed_selectors
from llmdash.rules.generate import build_rules


@pytest.mark.parametrize("bound, text", [
    (2.0, "2"), (510.0, "510"), (0.0022, "0.0022"), (0.3, "0.3"),
    # TGI's bounds are 0.0001 * 1.5^k by repeated multiplication: Rust prints the float's shortest form
    (0.0001 * 1.5, "0.00015000000000000001"), (0.00001, "0.00001"),
])
def test_rust_exporters_write_le_as_rust_displays_a_float(bound, text):
    assert EXPORTERS["rust_prometheus"].le(bound) == text
    assert EXPORTERS["metrics_rs"].le(bound) == text


def test_python_and_cpp_exporters_keep_their_le_forms():
    assert EXPORTERS["prometheus_client"].le(1) == "1.0"
    assert EXPORTERS["prometheus_cpp"].le(500) == "500"


@pytest.fixture
def sglang_copy(tmp_path: Path) -> Path:
    target = tmp_path / "sglang.yaml"
    shutil.copy(CATALOG_DIR / "sglang.yaml", target)
    return target


def test_label_alternatives_match_the_value_or_an_absent_label(sglang_copy):
    text = sglang_copy.read_text().replace(
        "sources: [{metric: sglang:token_usage, match: {tp_rank: \"0\"}}]",
        "sources: [{metric: sglang:token_usage, match: {tp_rank: [\"0\", \"\"]}}]")
    sglang_copy.write_text(text)
    spec = load_catalog(sglang_copy)
    assert 'sglang:token_usage{tp_rank=~"0|"}' in Signals(spec, Config(), (), "5m").kv_usage()
    assert spec.signal("kv_usage").sources[0].match_text == 'tp_rank=~"0|"'


def test_catalog_selectors_apply_unless_the_config_sets_the_label(tmp_path):
    target = tmp_path / "vllm.yaml"
    target.write_text(CATALOG_DIR.joinpath("vllm.yaml").read_text().replace(
        "model_label: model_name\n", "model_label: model_name\nselectors: {job: vllm-prod}\n", 1))
    spec = load_catalog(target)
    assert [m.render() for m in fixed_selectors(spec, Config())] == ['job="vllm-prod"']
    assert [m.render() for m in fixed_selectors(spec, Config(selectors={"job": "mine", "cluster": "eu"}))] == [
        'cluster="eu"', 'job="mine"']
    rules = build_rules(spec, Config())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    assert all('job="vllm-prod"' in e for e in exprs if "vllm:" in e)
