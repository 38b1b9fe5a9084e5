"""Rule files per ruler (`rules.target`): only what that ruler accepts, the same pages everywhere."""

from __future__ import annotations

import dataclasses

import pytest

from llmdash.config import Config, load_config
from llmdash.engines.catalog import load_engine
from llmdash.errors import LlmdashError
from llmdash.rules.generate import build_rules
from llmdash.rules.targets import TARGETS, for_target
from llmdash.vocabulary import Alert


def rules_for(target: str, engine: str = "vllm") -> dict[str, dict]:
    config = Config()
    config = dataclasses.replace(config, rules=dataclasses.replace(config.rules, target=target))
    return {rule.get("alert") or rule["record"]: rule for g in build_rules(load_engine(engine), config)["groups"]
            for rule in g["rules"]}


def test_the_default_target_is_prometheus_and_keeps_keep_firing_for():
    assert Config().rules.target == "prometheus"
    page = rules_for("prometheus")[Alert.PREEMPTIONS_HIGH]
    assert page["keep_firing_for"] == Config().preemption.keep_firing_for


@pytest.mark.parametrize("target", ["vmalert", "thanos"])
def test_a_ruler_without_keep_firing_for_gets_the_hold_in_the_expression(target):
    plain, shaped = rules_for("prometheus"), rules_for(target)
    step = Config().rules.interval or ""          # unset: the subquery steps at the evaluation interval
    held = {name for name, rule in plain.items() if "keep_firing_for" in rule}
    assert Alert.PREEMPTIONS_HIGH in held
    for name in held:
        condition, hold = plain[name]["expr"], plain[name]["keep_firing_for"]
        assert "keep_firing_for" not in shaped[name]
        assert shaped[name]["expr"] == f"({condition}) or last_over_time(({condition})[{hold}:{step}])"
    assert {k: r for k, r in shaped.items() if k not in held} == {k: r for k, r in plain.items() if k not in held}


def test_mimir_keeps_the_prometheus_file():
    assert rules_for("mimir") == rules_for("prometheus")


def test_an_unknown_ruler_is_a_one_line_config_error(tmp_path):
    path = tmp_path / "llmdash.yaml"
    path.write_text("rules:\n  target: cortex\n")
    with pytest.raises(LlmdashError, match=r"rules.target: unknown ruler 'cortex' \(known: " + ", ".join(TARGETS)):
        load_config(path)
    with pytest.raises(LlmdashError, match="unknown ruler"):
        for_target({"groups": []}, "cortex")
