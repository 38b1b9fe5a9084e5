"""The example alertmanager.yml `llmdash build` writes: Alertmanager's own checker accepts it, and it routes
pages and tickets the way docs/alerts-and-runbooks.md says."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import pytest
import yaml

from llmdash.build import ALERTMANAGER_CONFIG, generated_files
from llmdash.config import Config
from llmdash.rules.identity import inhibit_rules

pytestmark = pytest.mark.e2e     # runs Debian's amtool


def amtool_check(tmp_path, text: str) -> subprocess.CompletedProcess:
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.fail("amtool not found: install Debian's prometheus-alertmanager (.ci/install-deps does)")
    path = tmp_path / "alertmanager.yml"
    path.write_text(text)
    return subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("group_by", [("cluster", "namespace"), ("region",)])
def test_amtool_accepts_the_generated_config(tmp_path, group_by):
    config = dataclasses.replace(Config(), fleet=dataclasses.replace(Config().fleet, group_by=group_by))
    text = generated_files(config, ("rules",))[ALERTMANAGER_CONFIG]
    result = amtool_check(tmp_path, text)
    assert result.returncode == 0, result.stdout + result.stderr
    inhibitions = len(inhibit_rules(config)["inhibit_rules"])
    assert f"{inhibitions} inhibit rules" in result.stdout and "2 receivers" in result.stdout
    model = yaml.safe_load(text)
    assert model["route"]["group_by"] == ["alertname", "llm_engine", "model_name", *group_by]
    assert {r["receiver"]: r["matchers"] for r in model["route"]["routes"]} == {
        "page": ['severity="critical"'], "ticket": ['severity="warning"']}
    assert model["inhibit_rules"] == inhibit_rules(config)["inhibit_rules"]


def test_amtool_would_catch_a_broken_config(tmp_path):
    """The check can fail: a route to a receiver that does not exist is refused."""
    model = yaml.safe_load(generated_files(Config(), ("rules",))[ALERTMANAGER_CONFIG])
    model["route"]["routes"][0]["receiver"] = "nobody"
    assert amtool_check(tmp_path, yaml.safe_dump(model)).returncode != 0
