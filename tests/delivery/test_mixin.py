"""generated/mixin/: the monitoring-mixin layout (prometheus_alerts.yaml, prometheus_rules.yaml,
dashboards_out/) that mixin and kube-prometheus users take unchanged, kept fresh by `build --check`."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from llmdash import build
from llmdash.config import Config
from llmdash.errors import EXIT_DRIFT, LlmdashError
from tests.support.paths import ROOT

MIXIN = ROOT / "generated" / "mixin"


@pytest.mark.e2e
@pytest.mark.parametrize("name", ["prometheus_alerts.yaml", "prometheus_rules.yaml"])
def test_mixin_rule_files_pass_promtool_check(name):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found: install Debian's prometheus package (apt-get install prometheus)")
    result = subprocess.run([promtool, "check", "rules", str(MIXIN / name)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_alerts_and_recording_rules_are_split_and_nothing_is_lost():
    alerts = yaml.safe_load((MIXIN / "prometheus_alerts.yaml").read_text())["groups"]
    records = yaml.safe_load((MIXIN / "prometheus_rules.yaml").read_text())["groups"]
    assert all("alert" in rule and "record" not in rule for group in alerts for rule in group["rules"])
    assert all("record" in rule and "alert" not in rule for group in records for rule in group["rules"])
    engine_rules = [rule for engine in Config().engine_ids for group in
                    yaml.safe_load((ROOT / f"generated/rules/{engine}.rules.yaml").read_text())["groups"]
                    for rule in group["rules"]]
    split = [rule for group in records + alerts for rule in group["rules"]]
    assert sorted(map(repr, split)) == sorted(map(repr, engine_rules))
    names = [group["name"] for group in alerts + records]
    assert len(names) == len(set(names))


def test_dashboards_out_is_generated_dashboards():
    out = sorted(p.name for p in (MIXIN / "dashboards_out").iterdir())
    assert out == sorted(p.name for p in (ROOT / "generated/dashboards").iterdir())
    for name in out:
        assert (MIXIN / "dashboards_out" / name).read_bytes() == (ROOT / "generated/dashboards" / name).read_bytes()


def test_build_check_catches_a_stale_or_extra_mixin_file(tmp_path):
    files = build.generated_files(Config())
    build.write(files, tmp_path)
    build.check(files, tmp_path)
    (tmp_path / "mixin/dashboards_out/vllm.json").write_text("{}\n")
    fewer = {rel: text for rel, text in files.items() if rel != "mixin/dashboards_out/tgi.json"}  # tgi dropped
    with pytest.raises(LlmdashError) as error:
        build.check(fewer, tmp_path)
    assert error.value.exit_code == EXIT_DRIFT
    assert "mixin/dashboards_out/vllm.json" in str(error.value)
    assert "mixin/dashboards_out/tgi.json (no longer built)" in str(error.value)
    assert "mixin/dashboards_out/tgi.json" in build.write(fewer, tmp_path).removed
    build.check(fewer, tmp_path)
