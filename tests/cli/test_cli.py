"""The `llmdash` command as a user runs it: build, drift check, and one-line errors."""

import dataclasses
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from llmdash.atomic import MANIFEST
from llmdash.config import Config
from llmdash.engines.catalog import CATALOG_DIR
from llmdash.vocabulary import SLO_ALERTS, Alert
from tests.support.catalogs import ENGINES
from tests.support.paths import ROOT
from tests.support.trees import snapshot

pytestmark = pytest.mark.process   # runs the llmdash command in a fresh interpreter, as a user does

def llmdash(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "llmdash.cli.main", *args], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=120)


def test_build_twice_is_byte_identical_and_matches_committed_output(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    assert llmdash("build", "--out", str(first)).returncode == 0
    assert llmdash("build", "--out", str(second)).returncode == 0
    assert snapshot(first) == snapshot(second)
    engines = tuple(ENGINES)
    dashboards = sorted(engines + ("fleet",))
    assert sorted(snapshot(first)) == [MANIFEST, "alertmanager/alertmanager.yml",
                                       "alertmanager/llmdash-inhibit-rules.yaml"] + \
        [f"dashboards-v2/{e}.json" for e in dashboards] + [f"dashboards/{e}.json" for e in dashboards] + \
        [f"mixin/dashboards_out/{e}.json" for e in dashboards] + \
        ["mixin/prometheus_alerts.yaml", "mixin/prometheus_rules.yaml"] + \
        ["mtail/sglang.mtail", "mtail/vllm.mtail"] + [f"rules/{e}.rules.yaml" for e in engines] + \
        sorted(f"runbooks/{alert}.md" for alert in Alert if alert not in SLO_ALERTS)   # no objectives configured
    assert snapshot(first) == snapshot(ROOT / "generated")
    assert llmdash("build", "--check", "--out", str(first)).returncode == 0


def test_check_reports_stale_and_leftover_files(tmp_path):
    out = tmp_path / "gen"
    assert llmdash("build", "--out", str(out)).returncode == 0
    (out / "dashboards" / "vllm.json").write_text("{}\n")
    fewer = tmp_path / "llmdash.yaml"
    fewer.write_text("engines: [vllm, sglang]\n")
    result = llmdash("--config", str(fewer), "build", "--check", "--out", str(out))
    assert result.returncode == 1
    assert "dashboards/vllm.json" in result.stderr and "dashboards/tgi.json (no longer built)" in result.stderr
    assert result.stderr.count("\n") == 1
    assert llmdash("--config", str(fewer), "build", "--out", str(out)).returncode == 0
    assert not (out / "dashboards" / "tgi.json").exists()
    assert llmdash("--config", str(fewer), "build", "--check", "--out", str(out)).returncode == 0


@pytest.mark.parametrize("config, message", [
    ("thresholds:\n  itl_p99_seconds: {warning: 0.5, critical: 0.2}\n", "thresholds.itl_p99_seconds: warning 0.5"),
    ("divergence:\n  latency_factor: fast\n", "divergence.latency_factor: expected a number"),
    ("dashbaord:\n  refresh: 1m\n", "dashbaord: unknown key"),
    ("engines: [vllm, mlc-llm]\n", "engines: unknown engine 'mlc-llm'"),
    ("selectors:\n  job-name: vllm\n", "selectors: 'job-name' is not a label name"),
    ("slo:\n  ttft_seconds: 0.3\n", "slo.ttft_seconds: 0.3s is not a bucket bound"),
    ("divergence: [1, 2\n", "malformed YAML"),
])
def test_bad_config_is_one_line_exit_2_and_writes_nothing(tmp_path, config, message):
    path = tmp_path / "llmdash.yaml"
    path.write_text(config)
    out = tmp_path / "gen"
    result = llmdash("--config", str(path), "build", "--out", str(out))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not out.exists()


def test_bad_catalog_is_one_line_exit_2_and_keeps_previous_output(tmp_path):
    out = tmp_path / "gen"
    assert llmdash("build", "--out", str(out)).returncode == 0
    before = snapshot(out)
    catalogs = tmp_path / "catalogs"
    shutil.copytree(CATALOG_DIR, catalogs, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    broken = catalogs / "sglang.yaml"
    broken.write_text(broken.read_text().replace("type: gauge", "type: gauges", 1))
    result = llmdash("build", "--out", str(out), env={"LLMDASH_CATALOG_DIR": str(catalogs)})
    assert result.returncode == 2
    assert "sglang.yaml" in result.stderr and ".type: expected one of counter, gauge, histogram" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert snapshot(out) == before


def test_example_config_builds_exactly_what_no_config_builds(tmp_path):
    example = ROOT / "llmdash.example.yaml"
    result = llmdash("--config", str(example), "build", "--out", str(tmp_path / "gen"))
    assert result.returncode == 0, result.stderr
    assert llmdash("build", "--out", str(tmp_path / "plain"), cwd=tmp_path).returncode == 0
    assert snapshot(tmp_path / "gen") == snapshot(tmp_path / "plain")


def _keys(value, prefix="") -> set[str]:
    if not isinstance(value, dict):
        return set()
    return {f"{prefix}{k}" for k in value} | {key for k, v in value.items() for key in _keys(v, f"{prefix}{k}.")}


def _fields(cls, prefix="") -> set[str]:
    keys = set()
    for field in dataclasses.fields(cls):
        if field.name == "source":
            continue
        keys.add(f"{prefix}{field.name}")
        if dataclasses.is_dataclass(field.default):  # a section (or a threshold's levels)
            keys |= _fields(type(field.default), f"{prefix}{field.name}.")
    return keys


def test_example_config_shows_every_key_the_config_supports():
    example = yaml.safe_load((ROOT / "llmdash.example.yaml").read_text())
    fields = _fields(Config)
    assert "thresholds.waiting_requests.critical" in fields
    # a mapping-valued setting (selectors, Kubernetes labels) holds the user's own keys, not config keys
    assert {key for key in _keys(example) if key.rsplit(".", 1)[0] not in fields or key in fields} == fields


def test_version_comes_from_the_package_metadata():
    result = llmdash("--version")
    assert result.returncode == 0 and result.stdout == f"llmdash {importlib.metadata.version('llmdash')}\n"


def test_make_help_lists_every_target():
    makefile = (ROOT / "Makefile").read_text()
    targets = {m for m in re.findall(r"^([a-z][\w-]*):", makefile, flags=re.M)}
    helped = set(re.findall(r'^\t@echo "make ([\w-]+)', makefile, flags=re.M))
    assert "bench-build" in targets and helped == targets


def test_usage_error_exits_2():
    result = llmdash("build", "--no-such-flag")
    assert result.returncode == 2 and "Traceback" not in result.stderr
