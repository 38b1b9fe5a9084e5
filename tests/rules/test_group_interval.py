"""The rule groups' evaluation interval belongs to the server unless the config sets one: a group `interval`
overrides Prometheus' `evaluation_interval`, so a team evaluating every 15 s would page up to a minute later."""

from __future__ import annotations

import dataclasses

from llmdash.config import Config
from llmdash.engines.catalog import load_engine
from llmdash.rules.generate import build_rules


def test_default_groups_leave_the_interval_to_the_server(default_rules):
    groups = [group for model in default_rules.values() for group in model["groups"]]
    assert groups
    assert [g["name"] for g in groups if "interval" in g] == []


def test_a_configured_interval_is_pinned_on_every_group():
    config = Config()
    config = dataclasses.replace(config, rules=dataclasses.replace(config.rules, interval="30s"))
    groups = build_rules(load_engine("vllm"), config)["groups"]
    assert {g.get("interval") for g in groups} == {"30s"}
