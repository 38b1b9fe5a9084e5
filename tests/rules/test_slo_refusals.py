"""What `slo.objectives` refuses, as one line naming the key: a target that is not a bucket bound (with the
nearest bounds), an SLI the engine cannot count, and malformed objectives; and that without objectives the
build is what it was."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmdash.build import build_rule_files, check, generated_files
from llmdash.config import load_config
from llmdash.errors import LlmdashError

ROOT = Path(__file__).resolve().parents[2]


def config_with(tmp_path, engines, *objectives):
    path = tmp_path / "llmdash.yaml"
    path.write_text(yaml.safe_dump({"engines": list(engines), "slo": {"objectives": list(objectives)}}))
    return load_config(path)


def refusal(tmp_path, engines, *objectives) -> str:
    with pytest.raises(LlmdashError) as caught:
        build_rule_files(config_with(tmp_path, engines, *objectives))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_target_between_bounds_names_the_nearest_ones(tmp_path):
    message = refusal(tmp_path, ["vllm"], {"name": "ttft", "target_seconds": 2, "objective": 0.99})
    assert "slo.objectives[0].target_seconds" in message
    assert "2s is not a bucket bound of vllm:time_to_first_token_seconds (nearest: 1s and 2.5s)" in message


def test_nearest_bounds_are_given_per_version_where_the_layouts_differ(tmp_path):
    """SGLang's TTFT buckets changed in 0.4.4 and 0.4.5: 2.5 s sits between other bounds in each."""
    message = refusal(tmp_path, ["sglang"], {"name": "ttft", "target_seconds": 2.5, "objective": 0.99})
    assert "0.4.2 to before 0.4.4: 2s and 5s" in message
    assert "2s and 4s" in message


def test_llama_cpp_has_no_latency_histogram_for_a_latency_slo(tmp_path):
    message = refusal(tmp_path, ["llama-cpp"], {"name": "token_latency", "target_seconds": 0.1, "objective": 0.99})
    assert "slo.objectives[0]: llama-cpp has no per-token latency histogram (only a mean time per token" in message


def test_availability_needs_an_error_counter(tmp_path):
    message = refusal(tmp_path, ["vllm", "sglang"], {"name": "availability", "objective": 0.999})
    assert "sglang has no failed-request counter in its catalog" in message


def test_per_token_latency_falls_back_to_tpot_and_says_so(tmp_path):
    rules = build_rule_files(config_with(tmp_path, ["tgi"], {"name": "token_latency",
                                                              "target_seconds": 0.09852612533569335,
                                                              "objective": 0.99}))
    alerts = [r for g in rules["tgi"]["groups"] for r in g["rules"]
              if r.get("alert", "").startswith("LLMServingSLOBurnRate")]
    assert alerts and all("per-request TPOT: this engine has no ITL" in a["annotations"]["description"]
                          for a in alerts)


@pytest.mark.parametrize(("objective", "key", "problem"), [
    ({"name": "ttft", "target_seconds": 1, "objectiv": 0.99}, "slo.objectives[0].objectiv", "unknown key"),
    ({"target_seconds": 1}, "slo.objectives[0].name", "missing"),
    ({"name": "ttft", "objective": 0.99}, "slo.objectives[0].target_seconds", "needs a positive target"),
    ({"name": "availability", "target_seconds": 1}, "slo.objectives[0].target_seconds", "has no latency target"),
    ({"name": "speed", "target_seconds": 1}, "slo.objectives[0].sli", "expected one of ttft, token_latency"),
    ({"name": "ttft", "target_seconds": 1, "objective": 1.5}, "slo.objectives[0].objective", "between 0 and 1"),
    ({"name": "ttft", "target_seconds": 1, "objective": 0.9}, "slo.objectives[0].objective", "nothing could page"),
    ({"name": "ttft", "target_seconds": 1, "window": "1d"}, "slo.objectives[0].window", "at least the slow"),
    ({"name": "ttft", "target_seconds": 1, "window": "a month"}, "slo.objectives[0].window", "duration"),
    # a window Prometheus would accept but whose budget would sum over 8,760 hourly counts: refused, said readably
    ({"name": "ttft", "target_seconds": 1, "window": "366d"}, "slo.objectives[0].window", "at most 1y (365d)"),
    ({"name": "ttft", "target_seconds": 1, "window": "9223372036s"}, "slo.objectives[0].window", "at most 1y"),
    ({"name": "ttft", "target_seconds": 1, "engines": ["vllm2"]}, "slo.objectives[0].engines", "unknown engine"),
    ({"name": "ttft", "target_seconds": 1, "models": "m"}, "slo.objectives[0].models", "list of strings"),
    ({"name": "Bad Name", "sli": "ttft", "target_seconds": 1}, "slo.objectives[0].name", "not a name"),
])
def test_every_key_is_checked_with_one_line_naming_it(tmp_path, objective, key, problem):
    with pytest.raises(LlmdashError) as caught:
        config_with(tmp_path, ["vllm"], objective)
    message = str(caught.value)
    assert f": {key}: " in message and problem in message and "\n" not in message


def test_a_year_is_the_longest_window_accepted(tmp_path):
    config = config_with(tmp_path, ["vllm"], {"name": "ttft", "target_seconds": 1, "window": "365d"})
    assert config.slo.objectives[0].window == "365d"


@pytest.mark.parametrize(("interval", "accepted"), [("30s", True), ("1m", True), ("2m", False), ("5m", False)])
def test_the_rule_interval_must_divide_the_shortest_slo_window(tmp_path, interval, accepted):
    """Each evaluation records what the counters gained since the one an interval before, and the 5m window
    adds whole evaluations: 2m does not divide it, 5m would leave it one evaluation."""
    path = tmp_path / "llmdash.yaml"
    path.write_text(yaml.safe_dump({"engines": ["vllm"], "rules": {"interval": interval},
                                    "slo": {"objectives": [{"name": "ttft", "target_seconds": 1}]}}))
    if accepted:
        assert load_config(path).rules.interval == interval
        return
    with pytest.raises(LlmdashError, match=r": rules.interval: .* must divide the SLO alerts' shortest window \(5m\)"):
        load_config(path)


def test_two_objectives_of_one_name_on_one_engine_are_refused(tmp_path):
    with pytest.raises(LlmdashError, match=r"slo.objectives\[1\].name: 'ttft' is also objective 0's name for vllm"):
        config_with(tmp_path, ["vllm"], {"name": "ttft", "target_seconds": 1},
                    {"name": "ttft", "target_seconds": 2.5})


def test_without_objectives_the_build_is_unchanged():
    """The committed generated/ is what no config builds; no SLO rule, panel or runbook appears in it."""
    files = generated_files(load_config(ROOT / "llmdash.example.yaml"))
    check(files, ROOT / "generated")
    assert not [rel for rel, text in files.items() if "llm_slo_" in text or "SLOBurnRate" in text]


def test_a_name_with_a_trailing_newline_is_refused(tmp_path):
    """Issue 28: `$` also matches before a final newline; `slo="ttft\\n"` would reach every series and alert."""
    message = refusal(tmp_path, ["vllm"], {"name": "ttft\n", "sli": "ttft", "target_seconds": 1, "objective": 0.99})
    assert "slo.objectives[0].name: 'ttft\\n' is not a name of lower-case letters, digits and _" in message


def test_a_fleet_label_with_a_trailing_newline_is_refused(tmp_path):
    path = tmp_path / "llmdash.yaml"
    path.write_text(yaml.safe_dump({"fleet": {"group_by": ["cluster\n"]}}))
    with pytest.raises(LlmdashError, match=r"fleet: 'cluster\\n' is not a label name to group by"):
        load_config(path)


def test_more_objectives_than_are_built_are_refused_before_building(tmp_path):
    """Issue 28: 10,000 objectives (580 KB of config) were still building after 120 s."""
    objectives = [{"name": f"s{i}", "sli": "ttft", "target_seconds": 1, "objective": 0.99} for i in range(101)]
    message = refusal(tmp_path, ["vllm"], *objectives)
    assert message.endswith("slo.objectives: 101 objectives; at most 100 are built (each adds recording rules, "
                            "two alert pairs and dashboard panels)")
    config_with(tmp_path, ["vllm"], *objectives[:100])    # the bound itself is accepted
