"""The burn-rate alerts' event counts under `promtool test rules`, on series shaped by hand minute by minute from
the SRE Workbook's definition (error ratio = bad / valid events over the window; at least `min_bad_events` bad
events in the pair's long window), never from the rule text.

vLLM, an availability objective of 99.9 % (page: 1.44 % over 1h and 5m, or 0.6 % over 6h and 30m; ticket: 0.3 %
over 1d and 2h, or 0.1 % over 3d and 6h), `min_bad_events` 5. A request finishes with one `finished_reason`:
"stop" (good), "error" (bad: the server failed it), "abort" (the client cancelled it: not a valid event). Each
model is one replica; the value at minute m is the counter after minute m's requests, so the evaluation at m
sees them. Every expected minute below is worked out by hand in its comment.

Each test runs on both stacks (the `stack` fixture): Debian's promtool 2.42 (closed ranges) and the current
promtool 3.16 (left-open ranges); the expectations are the same.
"""

from __future__ import annotations


from llmdash.config import Config, Objective, Slo
from llmdash.engines.catalog import load_engine
from llmdash.rules.generate import build_rules, render_rules
from llmdash.vocabulary import Alert
from tests.support.promtool import run_rule_tests

FAST, SLOW, COVERAGE = Alert.SLO_BURN_FAST, Alert.SLO_BURN_SLOW, Alert.SLO_COVERAGE_LOW
SUCCESS = "vllm:request_success_total"
MINUTES = 490
ABORT_ONSET = 360     # six clean hours first, so the 6h window is full when the errors start


def per_minute(model: str, minute: int) -> dict[str, int] | None:
    """Requests finished in `minute` by reason; None where the model's series are absent (not yet started, or
    not scraped)."""
    if model in ("young", "young_fifth"):           # appears at minute 120 at 1 request a minute
        if minute < 120:
            return None
        failures = (126, 128, 131, 134) + ((137,) if model == "young_fifth" else ())   # 20 % of requests
        return {"error": 1} if minute in failures else {"stop": 1}
    if model == "after_gap":                        # serves, disappears for an hour, restarts (counters from 0)
        if 200 <= minute < 260:
            return None
        return {"error": 1} if minute in (262, 263, 264, 265) else {"stop": 1}
    if model in ("steady", "steady_fifth"):         # 1 request a minute all along; failures every 10 minutes
        failures = (400, 410, 420, 430) + ((440,) if model == "steady_fifth" else ())
        return {"error": 1} if minute in failures else {"stop": 1}
    if model == "sparse":                           # 6 requests an hour; one of them fails, three hours in
        if minute % 10:
            return {}
        return {"error": 1} if minute == 180 else {"stop": 1}
    if model == "aborts":                           # 1000 a minute, half aborted by clients; 1 % errors later
        errors = 10 if minute >= ABORT_ONSET else 0
        return {"stop": 500 - errors, "abort": 500, "error": errors}
    raise AssertionError(model)


MODELS = ("young", "young_fifth", "after_gap", "steady", "steady_fifth", "sparse", "aborts")


def series_values(model: str, reason: str) -> str:
    """promtool's values for one counter: `_` where the series is absent; 0 again after the restart."""
    total, values = 0, []
    for minute in range(MINUTES):
        if model == "after_gap" and minute == 260:
            total = 0
        counts = per_minute(model, minute)
        if counts is None:
            values.append("_")
            continue
        total += counts.get(reason, 0)
        values.append(str(total))
    return " ".join(values)


def input_series() -> list[dict]:
    return [{"series": f'{SUCCESS}{{instance="{model}-0", model_name="{model}", finished_reason="{reason}"}}',
             "values": series_values(model, reason)}
            for model in MODELS for reason in ("stop", "error", "abort")]


def alerts(alert: str, model: str, at: int, fires: bool) -> dict:
    """`alert` is firing for `model` at minute `at`, or is not."""
    severity = {FAST: "critical", SLOW: "warning"}[alert]
    labels = ",".join(f'{k}="{v}"' for k, v in sorted({
        "alertname": alert, "alertstate": "firing", "llm_engine": "vllm", "model_name": model,
        "slo": "availability", "severity": severity}.items()))
    return {"expr": f'ALERTS{{alertname="{alert}", alertstate="firing", model_name="{model}"}}',
            "eval_time": f"{at}m", "exp_samples": [{"labels": f"ALERTS{{{labels}}}", "value": 1}] if fires else []}


def never(alert: str, model: str, until: int = MINUTES - 1) -> dict:
    """`alert` never fired for `model` up to minute `until`."""
    return {"expr": f'count_over_time(ALERTS{{alertname="{alert}", alertstate="firing", model_name="{model}"}}'
                    f'[{until}m])', "eval_time": f"{until}m", "exp_samples": []}


def count(window: str, model: str, at: int, value: float) -> dict:
    """The recorded bad-event count over `window` for `model` at minute `at`."""
    name = f"cluster_namespace_model_name:llm_slo_errors:increase{window}"
    return {"expr": f'{name}{{model_name="{model}"}}', "eval_time": f"{at}m",
            "exp_samples": [{"labels": f'{name}{{llm_engine="vllm", model_name="{model}", slo="availability"}}',
                             "value": value}]}


CONFIG = Config(engines=("vllm",), slo=Slo(objectives=(
    Objective(name="availability", sli="availability", objective=0.999, min_bad_events=5),)))


def test_bad_events_are_counted_exactly_and_min_bad_events_is_at_least(tmp_path, stack):
    rules = tmp_path / "vllm.rules.yaml"
    rules.write_text(render_rules(build_rules(load_engine("vllm"), CONFIG)))
    checks = [
        # young: appears at 120 (its first sample adds nothing: no sample before it); 4 failures in 9 minutes, 20 %
        # of its requests: every ratio is far above its threshold, but 4 bad events never reach 5
        count("1h", "young", 140, 4), count("6h", "young", 300, 4), count("3d", "young", 300, 4),
        never(FAST, "young"), never(SLOW, "young"),
        # young_fifth: the 5th failure at 137 pages at 137 (1h: 5 bad of 17; 5m: 2 of 5), not at the 2nd or 4th
        never(FAST, "young_fifth", 136), alerts(FAST, "young_fifth", 137, True),
        # after_gap: absent 200-259, restarted from 0 at 260 (the first sample back adds nothing), 4 failures at
        # 262-265: 4, never more, in any window
        count("1h", "after_gap", 270, 4), count("6h", "after_gap", 400, 4),
        never(FAST, "after_gap"), never(SLOW, "after_gap"),
        # steady: 4 failures 10 minutes apart after 400 minutes of traffic (1h: 4 of 60, 6.7 %): never
        count("1h", "steady", 430, 4), never(FAST, "steady"), never(SLOW, "steady"),
        # the hour at 460 is (400, 460]: the failure of minute 400, written exactly an hour before, is not in it
        # (a closed [1h] range on Prometheus 2 would hold it: 61 samples)
        count("1h", "steady", 460, 3),
        # steady_fifth: exactly 5 in the hour (the window (380, 440] at 440) pages at 440, on a closed or a
        # left-open range alike
        count("1h", "steady_fifth", 440, 5), never(FAST, "steady_fifth", 439), alerts(FAST, "steady_fifth", 440, True),
        # the ticket's 1d window adds whole hours: at 479 they end at 420 and hold 3 of the failures (400, 410,
        # 420); at 480 the hour (420, 480] adds 430 and 440: 5, and it tickets (1d: 5 of 480; 2h: 5 of 120)
        count("1d", "steady_fifth", 479, 3), never(SLOW, "steady_fifth", 479), alerts(SLOW, "steady_fifth", 480, True),
        # sparse: 6 requests an hour, one fails at 180: a ratio of 1/6 over the hour, 1 bad event: nothing
        never(FAST, "sparse"), never(SLOW, "sparse"),
        # aborts: 1 % server errors while 50 % of requests are aborted by clients, i.e. 10 errors among 500 valid
        # requests a minute (the 500 aborts are not valid): 2 %, where counting aborts as good would read 1 %,
        # under the 1h pair's 1.44 %. The 1h window holds 43.2 minutes' errors'
        # worth of 1.44 % (0.0144 x 30000 / 10) after 44 bad minutes, ONSET + 43, 52 minutes before the 6h pair
        # could (10 (k+1) >= 0.006 x 180000 at k = 107)
        never(FAST, "aborts", ABORT_ONSET + 42), alerts(FAST, "aborts", ABORT_ONSET + 43, True),
    ]
    run_rule_tests(stack.binary("promtool"), tmp_path, rules, input_series(), checks, timeout=900)


# ---- a replica the SLI cannot measure ------------------------------------------------------------------------
SGLANG_TTFT = "sglang:time_to_first_token_seconds"
SGLANG_CONFIG = Config(engines=("sglang",), slo=Slo(objectives=(
    Objective(name="ttft", target_seconds=1.0, objective=0.99),)))
# bucket bounds as SGLang (prometheus_client) writes them: 0.5.x's defaults, and a replica started with
# `--bucket-time-to-first-token 0.5 2 5` (python/sglang/srt/server_args.py), which has no 1 s bound
DEFAULT_BOUNDS = ("0.1", "0.3", "0.5", "0.7", "0.9", "1.0", "2.0", "4.0")
CUSTOM_BOUNDS = ("0.5", "2.0", "5.0")
COVERAGE_MINUTES = 40


def sglang_series() -> list[dict]:
    """Three replicas of one model, 100 requests a minute each: two with the default buckets whose requests all
    take 0.2 s, one with custom buckets whose requests all take 1.5 s (it cannot say how many were under 1 s)."""
    out = []
    for replica, bounds, seconds in (("r0", DEFAULT_BOUNDS, 0.2), ("r1", DEFAULT_BOUNDS, 0.2),
                                     ("r2", CUSTOM_BOUNDS, 1.5)):
        labels = f'instance="{replica}", model_name="chat"'
        for bound in (*bounds, "+Inf"):
            per_minute_in_bucket = 100 if bound == "+Inf" or float(bound) >= seconds else 0
            out.append({"series": f'{SGLANG_TTFT}_bucket{{{labels}, le="{bound}"}}',
                        "values": f"0+{per_minute_in_bucket}x{COVERAGE_MINUTES}"})
        out.append({"series": f"{SGLANG_TTFT}_count{{{labels}}}", "values": f"0+100x{COVERAGE_MINUTES}"})
    return out


def test_a_replica_without_the_target_bucket_pages_nothing_and_lowers_coverage(tmp_path, stack):
    rules = tmp_path / "sglang.rules.yaml"
    rules.write_text(render_rules(build_rules(load_engine("sglang"), SGLANG_CONFIG)))
    prefix = "cluster_namespace_model_name:llm_slo"
    labels = 'llm_engine="sglang", model_name="chat", slo="ttft"'

    def value(name: str, at: int, expected: float) -> dict:
        return {"expr": f"{prefix}{name}", "eval_time": f"{at}m",
                "exp_samples": [{"labels": f"{prefix}{name}{{{labels}}}", "value": expected}]}

    def fired(alert: str, until: int) -> dict:
        return {"expr": f'count_over_time(ALERTS{{alertname="{alert}", alertstate="firing"}}[{until}m])',
                "eval_time": f"{until}m", "exp_samples": []}

    coverage_labels = ",".join(f'{k}="{v}"' for k, v in sorted({
        "alertname": COVERAGE, "alertstate": "firing", "llm_engine": "sglang", "model_name": "chat", "slo": "ttft",
        "severity": "warning"}.items()))
    checks = [
        # two of three replicas can be counted
        value("_coverage:ratio", 30, 2 / 3),
        # the events of the two measured replicas only (200 a minute, 5 minutes), none of them bad
        value("_events:increase5m", 30, 1000), value("_errors:increase5m", 30, 0),
        value("_errors:ratio_rate1h", 30, 0),
        # where r2's 1.5 s requests would have been counted as all bad, a 33x burn: nothing pages
        fired(FAST, COVERAGE_MINUTES - 1), fired(SLOW, COVERAGE_MINUTES - 1),
        # the warning holds for 15 minutes from the first evaluation (minute 0): pending at 14, firing at 15
        {"expr": f'ALERTS{{alertname="{COVERAGE}", alertstate="firing"}}', "eval_time": "14m", "exp_samples": []},
        {"expr": f'ALERTS{{alertname="{COVERAGE}", alertstate="firing"}}', "eval_time": "15m",
         "exp_samples": [{"labels": f"ALERTS{{{coverage_labels}}}", "value": 1}]},
    ]
    run_rule_tests(stack.binary("promtool"), tmp_path, rules, sglang_series(), checks, timeout=300)
