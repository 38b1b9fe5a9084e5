"""The example alertmanager.yml `llmdash build` writes: Alertmanager's own checker accepts it, and it routes
pages and tickets the way docs/alerts-and-runbooks.md says."""

from __future__ import annotations

import dataclasses
import re
import subprocess

import pytest
import yaml

from llmdash.build import ALERTMANAGER_CONFIG, generated_files
from llmdash.config import Config, load_config
from llmdash.errors import LlmdashError
from llmdash.rules.identity import inhibit_rules

pytestmark = pytest.mark.e2e     # runs each stack's real amtool (Debian's 0.25, the current 0.35)


def amtool_check(tmp_path, text: str, stack) -> subprocess.CompletedProcess:
    try:
        amtool = stack.binary("amtool", "install Debian's prometheus-alertmanager (.ci/install-deps does)")
    except LlmdashError as exc:
        pytest.fail(str(exc), pytrace=False)
    path = tmp_path / "alertmanager.yml"
    path.write_text(text)
    return subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("group_by", [("cluster", "namespace"), ("region",)])
def test_amtool_accepts_the_generated_config(tmp_path, group_by, stack):
    config = dataclasses.replace(Config(), fleet=dataclasses.replace(Config().fleet, group_by=group_by))
    text = generated_files(config, ("rules",))[ALERTMANAGER_CONFIG]
    result = amtool_check(tmp_path, text, stack)
    assert result.returncode == 0, result.stdout + result.stderr
    inhibitions = len(inhibit_rules(config)["inhibit_rules"])
    assert f"{inhibitions} inhibit rules" in result.stdout and "2 receivers" in result.stdout
    model = yaml.safe_load(text)
    assert model["route"]["group_by"] == ["alertname", "llm_engine", "model_name", *group_by]
    assert {r["receiver"]: r["matchers"] for r in model["route"]["routes"]} == {
        "page": ['severity="critical"'], "ticket": ['severity="warning"']}
    assert model["inhibit_rules"] == inhibit_rules(config)["inhibit_rules"]


def test_amtool_would_catch_a_broken_config(tmp_path, stack):
    """The check can fail: a route to a receiver that does not exist is refused."""
    model = yaml.safe_load(generated_files(Config(), ("rules",))[ALERTMANAGER_CONFIG])
    model["route"]["routes"][0]["receiver"] = "nobody"
    assert amtool_check(tmp_path, yaml.safe_dump(model), stack).returncode != 0


def _fleet_config(tmp_path, fleet: dict):
    path = tmp_path / "llmdash.yaml"
    path.write_text(yaml.safe_dump({"fleet": fleet}))
    return load_config(path)


ACCEPTED_FLEETS = [{}, {"group_by": []}, {"group_by": ["region"]}, {"group_by": ["cluster", "namespace", "zone"]},
                   {"group_by": ["cluster"], "instance_label": "pod"}]


@pytest.mark.parametrize("fleet", ACCEPTED_FLEETS, ids=[str(f) for f in ACCEPTED_FLEETS])
def test_amtool_accepts_the_config_built_from_each_valid_fleet_setting(tmp_path, fleet, stack):
    text = generated_files(_fleet_config(tmp_path, fleet), ("rules",))[ALERTMANAGER_CONFIG]
    result = amtool_check(tmp_path, text, stack)
    assert result.returncode == 0, result.stdout + result.stderr


REFUSED_GROUP_BY = {
    ("model_name",): "'model_name' is already grouped by: every alert groups by alertname, llm_engine, model_name",
    ("alertname", "cluster"): "'alertname' is already grouped by",
    ("llm_engine",): "'llm_engine' is already grouped by",
    ("cluster", "cluster"): "'cluster' is listed more than once",
}


@pytest.mark.parametrize("group_by", list(REFUSED_GROUP_BY), ids=["-".join(g) for g in REFUSED_GROUP_BY])
def test_a_group_by_amtool_would_reject_is_refused_by_the_config(tmp_path, group_by, stack):
    # amtool itself is the oracle: the output such a setting would give is one it rejects
    config = dataclasses.replace(Config(), fleet=dataclasses.replace(Config().fleet, group_by=group_by))
    rejected = amtool_check(tmp_path, generated_files(config, ("rules",))[ALERTMANAGER_CONFIG], stack)
    assert rejected.returncode != 0 and "duplicated label" in rejected.stdout + rejected.stderr
    with pytest.raises(LlmdashError, match=r"fleet\.group_by: " + re.escape(REFUSED_GROUP_BY[group_by])) as refused:
        _fleet_config(tmp_path, {"group_by": list(group_by)})
    assert refused.value.exit_code == 2
