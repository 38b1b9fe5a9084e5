"""The SLO burn-rate alerts under `promtool test rules`, on series shaped by hand (not by the simulator) so the
arithmetic is what is checked: a TTFT objective of 99.9 % under 1 s on vLLM, one model per shape, minute by
minute; requests counted in `_count`, good ones in the `le="1.0"` bucket."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from llmdash.config import Config, Objective, Slo
from llmdash.engines.catalog import load_engine
from llmdash.rules.generate import build_rules, render_rules
from llmdash.vocabulary import BURN_PAIRS as PAIRS
from llmdash.vocabulary import Alert
from tests.support.promtool import run_rule_tests

SPEC = load_engine("vllm")
TTFT = "vllm:time_to_first_token_seconds"
OBJECTIVE = Objective(name="ttft", target_seconds=1.0, objective=0.999)
CONFIG = Config(engines=("vllm",), slo=Slo(objectives=(OBJECTIVE,)))
BUDGET = 1 - OBJECTIVE.objective
MINUTES = 13 * 60
ONSET = 6 * 60          # six hours of good traffic first, so every window up to 6h is full at the onset
# Requests a minute on the busy models: 1000/s, so that the rates Prometheus computes from these counts (and
# 1 bad request/s at exactly the budget) are exact in binary floating point. With other counts a burn of exactly
# 1x reads as 0.99999999999994x (a difference of two rates) and sits a hair under the ticket's threshold.
PER_MINUTE = 60_000


def shape(minute: int, name: str) -> tuple[float, float]:
    """(requests, bad requests) in `minute` for the model `name`."""
    requests, bad = _shape(minute, name)
    return requests, round(bad, 6)


def _shape(minute: int, name: str) -> tuple[float, float]:
    after = minute >= ONSET
    if name == "outage":           # every request fails the target from the onset
        return PER_MINUTE, PER_MINUTE if after else 0
    if name == "below_fast":       # 14x the budget: just under the fast page's 14.4x
        return PER_MINUTE, 14 * BUDGET * PER_MINUTE if after else 0
    if name == "six_x":            # 7x: above the 6h pair's 6x, far under 14.4x
        return PER_MINUTE, 7 * BUDGET * PER_MINUTE if after else 0
    if name == "at_budget":        # exactly the budget, all the time
        return PER_MINUTE, BUDGET * PER_MINUTE
    if name == "low_traffic":      # 18 requests an hour, and one of them slow
        return 0.3, 1 if minute == ONSET + 10 else 0
    return PER_MINUTE, 0           # steady


MODELS = ("outage", "below_fast", "six_x", "at_budget", "low_traffic", "steady")


def input_series() -> list[dict]:
    out = []
    for model in MODELS:
        total = good = 0.0
        counts, goods = [], []
        for minute in range(MINUTES):
            requests, bad = shape(minute, model)
            total += requests
            good += requests - bad
            counts.append(total)
            goods.append(good)
        labels = f'instance="{model}-0", model_name="{model}"'
        out.append({"series": f"{TTFT}_count{{{labels}}}", "values": " ".join(f"{v:.10g}" for v in counts)})
        out.append({"series": f'{TTFT}_bucket{{{labels}, le="1.0"}}', "values": " ".join(f"{v:.10g}" for v in goods)})
    return out


def firing(alert: str, model: str, at: int, fires: bool) -> dict:
    severity = "critical" if alert == Alert.SLO_BURN_FAST else "warning"
    expr = f'ALERTS{{alertname="{alert}", alertstate="firing", model_name="{model}"}}'
    labels = ",".join(f'{k}="{v}"' for k, v in sorted({
        "alertname": alert, "alertstate": "firing", "llm_engine": "vllm", "model_name": model, "slo": "ttft",
        "severity": severity}.items()))
    return {"expr": expr, "eval_time": f"{at}m",
            "exp_samples": [{"labels": f"ALERTS{{{labels}}}", "value": 1}] if fires else []}


def never(alert: str, model: str, until: int = MINUTES - 1) -> dict:
    return {"expr": f'count_over_time(ALERTS{{alertname="{alert}", alertstate="firing", model_name="{model}"}}'
                    f'[{until}m])', "eval_time": f"{until}m", "exp_samples": []}


def test_burn_rates_page_and_ticket_where_the_workbook_says(tmp_path, stack):
    rules = tmp_path / "vllm.rules.yaml"
    rules.write_text(render_rules(build_rules(SPEC, CONFIG)))
    fast, slow = Alert.SLO_BURN_FAST, Alert.SLO_BURN_SLOW
    checks = [
        # a full outage: the sample at ONSET is the first to hold a failed minute. Its evaluation counts 1 bad
        # minute of 60 in the 1h window (1.67 % >= 14.4 x 0.1 %) and 1 of 5 in the 5m window: the page comes with
        # the first minute of errors, and not before
        firing(fast, "outage", ONSET - 1, False), firing(fast, "outage", ONSET, True),
        # 14x never reaches the 1h pair's 14.4x: no page within the hour...
        never(fast, "below_fast", ONSET + 60),
        # ...but the 6h pair's 6x is reached once 6/14 of the 6h window has burned (155 bad minutes: ONSET + 154)
        firing(fast, "below_fast", ONSET + 153, False), firing(fast, "below_fast", ONSET + 154, True),
        # 7x pages through the 6h pair only, after 6/7 of 6 hours (309 bad minutes: ONSET + 308)
        never(fast, "six_x", ONSET + 307), firing(fast, "six_x", ONSET + 308, True),
        # exactly the budget: it would be spent by the window's end, a ticket, never a page
        never(fast, "at_budget"), firing(slow, "at_budget", MINUTES - 1, True),
        # a handful of requests with one slow one is a 5 % ratio but one bad event: nothing
        never(fast, "low_traffic"), never(slow, "low_traffic"),
        never(fast, "steady"), never(slow, "steady"),
    ]
    run_rule_tests(stack.binary("promtool"), tmp_path, rules, input_series(), checks)


def thresholds(objective: float) -> list[float]:
    """Every error-ratio threshold in the generated burn-rate alerts, in file order."""
    config = replace(CONFIG, slo=Slo(objectives=(replace(OBJECTIVE, objective=objective),)))
    exprs = [rule["expr"] for group in build_rules(SPEC, config)["groups"] for rule in group["rules"]
             if rule.get("alert") in PAIRS]
    return [float(x) for e in exprs for x in re.findall(r"ratio_rate\w+\{[^}]*\} >= ([0-9.e-]+)", e)]


def test_every_threshold_follows_the_objective():
    burns = [p.burn for alert in PAIRS for p in PAIRS[alert] for _ in (0, 1)]   # long and short window alike
    for objective in (0.99, 0.995):
        assert thresholds(objective) == pytest.approx([b * (1 - objective) for b in burns], rel=1e-6)
    assert all(a != b for a, b in zip(thresholds(0.99), thresholds(0.995)))
