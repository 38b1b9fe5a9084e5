"""The registry of recorded series: every recorded read has a rule, and a read of anything else raises."""

from __future__ import annotations

import pytest

from llmdash.config import Config
from llmdash.engines.catalog import load_all
from llmdash.errors import LlmdashError
from llmdash.panels.recorded import RecordedSignals
from llmdash.panels.signals import fixed_selectors
from llmdash.rules.generate import build_rules
from llmdash.vocabulary import HEADLINE_QUANTILE, MEDIAN_QUANTILE

SPECS = load_all()
CONFIG = Config()


def recorded(spec) -> RecordedSignals:
    return RecordedSignals(spec, CONFIG, fixed_selectors(spec, CONFIG), CONFIG.divergence.window)


@pytest.mark.parametrize("engine", sorted(SPECS))
def test_every_series_a_recorded_read_names_is_written_by_a_rule_of_the_same_file(engine):
    spec = SPECS[engine]
    records = {rule["record"] for group in build_rules(spec, CONFIG)["groups"] for rule in group["rules"]
               if "record" in rule}
    sig = recorded(spec)
    reads = [sig.throughput(), sig.throughput_baseline(), sig.latency(sig.latency_role), sig.latency_baseline(),
             sig.divergence_condition(), sig.running(), sig.waiting()]
    reads += [sig.quantile(role, q) for role in sig.latency_roles for q in (HEADLINE_QUANTILE, MEDIAN_QUANTILE)]
    if spec.has("preemptions"):
        reads += [sig.preemption_rate(), sig.preemption_share(sig.instance_group),
                  sig.preemption_share(sig.instance_group, CONFIG.preemption.long_window)]
    for expr in reads:
        names = {word for word in expr.replace("{", " ").replace("(", " ").split() if ":llm_" in word}
        assert names and names <= records, expr


def test_a_window_or_quantile_that_is_not_recorded_raises_naming_what_was_asked():
    sig = recorded(SPECS["vllm"])
    with pytest.raises(LlmdashError, match=r"no recording rule records throughput window=1h .*window=5m"):
        sig.throughput(window="1h")
    with pytest.raises(LlmdashError, match=r"quantile role=ttft window=5m quantile=0.9\b"):
        sig.quantile("ttft", 0.9)


def test_raw_only_questions_are_not_answered_from_recorded_series_by_accident():
    sig = recorded(SPECS["vllm"])
    assert not hasattr(sig, "counter_rate") and not hasattr(sig, "preemptions_per_request")
    assert "vllm:num_preemptions" in sig.raw.preemption_rate()
