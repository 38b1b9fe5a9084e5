"""Names a catalog hands to Prometheus, Grafana and the file system must be names there: a label name
outside Prometheus's grammar is PromQL text in every panel and rule, an engine id names a dashboard
(and `fleet` is llmdash's own), and only a regular `*.yaml` file is a catalog."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from llmdash.engines.catalog import CATALOG_DIR, available_engines, load_engine
from llmdash.errors import LlmdashError
from tests.support.catalogs import refused

INJECTION = 'zz="0"} or vector(1) or m{zz'   # closes the selector and ORs in a series that is always there


def vllm_copy(directory: Path, old: str, new: str, name: str = "vllm") -> Path:
    text = (CATALOG_DIR / "vllm.yaml").read_text()
    assert old in text
    path = directory / f"{name}.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


ITL_LABELS = 'labels: [model_name, engine]\n    since: "0.10.2"'   # a metric without labels_since


@pytest.mark.parametrize("old, new, key", [
    (ITL_LABELS, ITL_LABELS.replace("engine", repr(INJECTION)), "metrics.vllm:inter_token_latency_seconds.labels"),
    (ITL_LABELS, ITL_LABELS.replace("engine", "gpu-id"), "metrics.vllm:inter_token_latency_seconds.labels"),
    ("model_label: model_name\n", f"model_label: model_name\nselectors: {{'{INJECTION}': x}}\n",
     f"selectors.{INJECTION}"),
    ("model_label: model_name\n", "model_label: model name\nmodel_label_from_scrape: true\n", "model_label"),
])
def test_a_label_name_outside_prometheus_grammar_is_refused(tmp_path, old, new, key):
    message = refused(vllm_copy(tmp_path, old, new))
    assert f": {key}: " in message and "not a Prometheus label name" in message


def test_the_injected_label_is_named_in_the_error(tmp_path):
    message = refused(vllm_copy(tmp_path, ITL_LABELS, ITL_LABELS.replace("engine", repr(INJECTION))))
    assert repr(INJECTION) in message


@pytest.mark.parametrize("name", ['vllm:x{a="b"}_total', "vllm:req-count_total", "9vllm_total"])
def test_a_metric_name_outside_prometheus_grammar_is_refused(tmp_path, name):
    extra = f"metrics:\n  '{name}':\n    type: counter\n    labels: [model_name]\n    since: \"0.6.0\"\n    help: x.\n"
    message = refused(vllm_copy(tmp_path, "metrics:\n", extra))
    assert f": metrics.{name}: not a Prometheus metric name" in message


def test_a_variant_rename_into_an_invalid_metric_name_is_refused(tmp_path):
    shutil.copy(CATALOG_DIR / "vllm.yaml", tmp_path / "vllm.yaml")
    variant = tmp_path / "variant.yaml"
    variant.write_text('engine: variant\ntitle: A variant\nreleases: "1.x"\n'
                       'derive:\n  from: vllm\n  rename: [{prefix: "vllm:", to: "v-"}]\n')
    assert ": derive.rename[0].to: not the start of a Prometheus metric name" in refused(variant)


@pytest.mark.parametrize("engine, problem", [
    ("fleet", "'fleet' is reserved"),                     # would replace llmdash's fleet dashboard
    ("Bad_Engine", "an engine id is lower-case letters"),
    ("-vllm", "an engine id is lower-case letters"),
    ("vllm-", "an engine id is lower-case letters"),
])
def test_an_engine_id_must_be_a_plain_lower_case_name_and_not_reserved(tmp_path, engine, problem):
    path = vllm_copy(tmp_path, "engine: vllm\n", f"engine: {engine}\n", name=engine)
    message = refused(path)
    assert ": engine: " in message and problem in message


def test_only_regular_yaml_files_are_catalogs(tmp_path):
    shutil.copy(CATALOG_DIR / "vllm.yaml", tmp_path / "vllm.yaml")
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "folder.yaml").mkdir()
    assert available_engines(tmp_path) == ["vllm"]
    started = time.monotonic()
    with pytest.raises(LlmdashError) as caught:
        load_engine("fifo", tmp_path)
    assert time.monotonic() - started < 5   # a FIFO is never opened for reading
    assert str(caught.value) == f"{tmp_path / 'fifo.yaml'}: catalog is not a regular file"
    with pytest.raises(LlmdashError, match="folder.yaml: catalog is not a regular file"):
        load_engine("folder", tmp_path)
    with pytest.raises(LlmdashError, match=r"unknown engine 'mlc': no catalog mlc.yaml \(known: vllm\)$"):
        load_engine("mlc", tmp_path)
