"""llmdash's SLO rules beside Sloth's, on the same traffic, under the real promtool: a second opinion.

The same hand-shaped vLLM series (one model per traffic shape; three objectives of 99.9 % over 30 days: TTFT
under 1 s, ITL under 0.1 s, availability) are evaluated every minute through both rule sets at once: llmdash's,
built from its config, and Sloth's, generated at test time by the real `sloth generate` v0.16.0 from the
equivalent Sloth spec (tests/support/sloth.py). Per shape, objective and severity the test reads from `ALERTS`
the first and the last minute each alert fired, and pins them.

The expected minutes are the SRE Workbook's definition worked by hand on each shape: the error ratio over a
window is bad events / valid events in it, a pair fires when both its windows reach burn x budget. Minute m's
events land in the counter sample at m (the end of that minute), so a window ending at t holds minutes
t-W+1 ... t. Sloth's rules must give exactly those minutes (its windows are raw `rate()`s over the window);
llmdash's are pinned beside them, and where they differ by more than one evaluation the row says why
(`SEPARATED`). docs/benchmarks/sloth.md shows the same table (`test_the_benchmark_page_shows_these_rows`).
"""

from __future__ import annotations

import re
from itertools import accumulate

import yaml

from llmdash.config import Config, Objective, Slo
from llmdash.engines.catalog import load_engine
from llmdash.rules.generate import build_rules
from llmdash.vocabulary import Alert
from tests.support import sloth
from tests.support.paths import ROOT
from tests.support.promtool import run_rule_tests

OBJECTIVES = (Objective(name="ttft", target_seconds=1.0, objective=0.999),
              Objective(name="token_latency", target_seconds=0.1, objective=0.999),
              Objective(name="chat_availability", sli="availability", objective=0.999))
CONFIG = Config(engines=("vllm",), slo=Slo(objectives=OBJECTIVES))
MINUTES = 15 * 60
ONSET = 6 * 60            # six hours of good traffic first: every window up to 6h is full at the onset
END = MINUTES - 1 - ONSET  # the last minute evaluated, after the onset
# 1000 events/s: the rates of these counts, and a bad share of a few per mille, are exact in binary floating point
PER_MINUTE = 60_000


def shape(model: str, minute: int) -> tuple[int, int]:
    """(events, bad events) in `minute` for the model `model`."""
    after = minute >= ONSET
    if model == "steady":          # half the budget, all the time
        return PER_MINUTE, 30
    if model == "burst":           # a fifth of the events bad for ten minutes
        return PER_MINUTE, 12_000 if ONSET <= minute < ONSET + 10 else 0
    if model == "outage":          # every event bad from the onset
        return PER_MINUTE, PER_MINUTE if after else 0
    if model == "slow_burn":       # 2x the budget: under every page threshold, over the 3d ticket's 1x
        return PER_MINUTE, 120 if after else 0
    if model == "slow_burn_mid":   # 1.8x: the 3d ratio reaches 1x between two whole hours
        return PER_MINUTE, 108 if after else 0
    if model == "quiet_hours":     # from 7h, every other hour quiet (1 % of the traffic) and 10 % bad
        return (600, 60) if after and (minute // 60) % 2 == 1 else (PER_MINUTE, 0)
    if model == "low_traffic":     # one event every 4 minutes, one of them bad
        return int(minute % 4 == 0), int(minute == ONSET + 12)
    raise ValueError(model)


# (shape, severity, the Workbook's (first, last) minute after the onset, llmdash's; None: never fires)
ROWS = [
    ("steady", "page", None, None),            # 0.5x never reaches a burn of 1x
    ("steady", "ticket", None, None),
    # 1h: 0.2 x (k + 1) / 60 >= 1.44 % from k = 4; the 5m window holds a bad minute until k = 9 + 4
    ("burst", "page", (4, 13), (4, 13)),
    # 3d/6h at 1x: 0.2 x 2 / 362 >= 0.1 % at k = 1; the 6h window holds two bad minutes (1.8 needed) until 367
    ("burst", "ticket", (1, 367), (60, 367)),
    # 1h: 1/60 = 1.67 % >= 1.44 % at the first bad minute, 5m: 1/5
    ("outage", "page", (0, END), (0, END)),
    # 3d/6h: 1/361 >= 0.1 % at the first bad minute
    ("outage", "ticket", (0, END), (0, END)),
    ("slow_burn", "page", None, None),         # 2x: under 6x and 14.4x
    # 3d/6h: 2 (k + 1) / (361 + k) >= 1 from k = 359 (the 1d/2h pair's 3x is never reached)
    ("slow_burn", "ticket", (359, END), (360, END)),
    ("slow_burn_mid", "page", None, None),
    # 3d/6h: 1.8 (k + 1) / (361 + k) >= 1 from k = 449 (7 h 29 min after the onset)
    ("slow_burn_mid", "ticket", (449, END), (480, END)),
    # the first quiet hour starts at k = 60; 1h with j quiet minutes: 60 j / (600 j + 60000 (60 - j)) >= 1.44 %
    # from j = 57 (k = 116); the last quiet minute is k = 479, after which the 5m ratio falls to 0.38 %
    ("quiet_hours", "page", (116, 479), (116, 479)),
    # 1 bad of 15 an hour (6.7 %), of 1 or 2 in 5m: the 1h/5m pair from k = 12 to 16, the 6h/30m pair (1/90,
    # 1/7.5) until the 30m window lets it go at k = 12 + 29
    ("low_traffic", "page", (12, 41), None),
    # 1d/2h: 1 of about 100 and 1/30, then 3d/6h: until the 6h window lets it go at k = 12 + 359
    ("low_traffic", "ticket", (12, 371), None),
]
# Rows where llmdash fires more than one evaluation away from the definition (and Sloth), and why.
SEPARATED = {
    ("burst", "ticket"): "llmdash's 1d and 3d windows add up 1h increases at whole hours: the 3d ratio is over 1x "
                         "from the second bad minute, which the 3d window counts at the next whole hour",
    ("slow_burn_mid", "ticket"): "llmdash's 3d window adds up 1h increases at whole hours: the next one after 7h29",
    ("low_traffic", "page"): "llmdash asks for min_bad_events (5) bad events in the long window; one is a ratio "
                             "over the threshold, not an incident",
    ("low_traffic", "ticket"): "as the page: one bad event",
}
MODELS = tuple(dict.fromkeys(row[0] for row in ROWS))
SERIES = {  # objective -> (valid events, good events): the series vLLM exports for it
    "ttft": ("vllm:time_to_first_token_seconds_count", 'vllm:time_to_first_token_seconds_bucket{le="1.0"}'),
    "token_latency": ("vllm:inter_token_latency_seconds_count", 'vllm:inter_token_latency_seconds_bucket{le="0.1"}'),
}

# The error budget spent over the SLO window, quiet_hours model, at 14h (a whole hour, llmdash's budget step):
# minutes 1..840 hold four quiet hours (240 min x 600 events, 60 bad) and 600 busy minutes x 60000 events.
BUDGET_AT = 14 * 60
WORKBOOK_RATIO = 14_400 / 36_144_000            # bad / valid = 1/2510 = 0.0398 %: 39.84 % of a 0.1 % budget
# Sloth's 30d ratio is the mean of its 5m ratios (840 of them, minutes t-4..t each): 56 at 10 % in each quiet
# hour, plus the ramps in and out, 60 j / (600 j + 60000 (5 - j)) for j = 1..4 quiet minutes of the five
# (four ramps in, three out, and the first minute of the last one out): 22.447495 / 840.
SLOTH_RATIO = 0.0267232089


def _series(name: str, model: str, values: list[float]) -> dict:
    labels = f'instance="{model}-0", model_name="{model}"'
    selector = name.replace("{", "{" + labels + ", ") if "{" in name else f"{name}{{{labels}}}"
    return {"series": selector, "values": " ".join(f"{v:.10g}" for v in values)}


def input_series() -> list[dict]:
    out = []
    for model in MODELS:
        minutes = [shape(model, m) for m in range(MINUTES)]
        total = list(accumulate(events for events, _ in minutes))
        bad = list(accumulate(b for _, b in minutes))
        good = [t - b for t, b in zip(total, bad)]
        for count, bucket in SERIES.values():
            out += [_series(count, model, total), _series(bucket, model, good)]
        out += [_series('vllm:request_success_total{finished_reason="stop"}', model, good),
                _series('vllm:request_success_total{finished_reason="error"}', model, bad)]
    return out


def llmdash_groups() -> list[dict]:
    """llmdash's vLLM rule groups, their SLO rules only (the others read series these shapes do not have)."""
    model = build_rules(load_engine("vllm"), CONFIG)
    groups = [{**g, "rules": [r for r in g["rules"] if "slo" in r.get("labels", {})]} for g in model["groups"]]
    return [g for g in groups if g["rules"]]


def alerts(tool: str, severity: str, slo: str, model: str) -> str:
    if tool == "llmdash":
        name = Alert.SLO_BURN_FAST if severity == "page" else Alert.SLO_BURN_SLOW
        return f'ALERTS{{alertname="{name}", alertstate="firing", slo="{slo}", model_name="{model}"}}'
    return (f'ALERTS{{alertname="{sloth.ALERT}", alertstate="firing", sloth_severity="{severity}", '
            f'sloth_slo="{slo}", model_name="{model}"}}')


def fired(tool: str, severity: str, slo: str, model: str, first_last: tuple[int, int] | None) -> list[dict]:
    """Checks that the alert fired first and last at these minutes after the onset (None: never)."""
    when = f"timestamp({alerts(tool, severity, slo, model)})[{MINUTES - 1}m:1m]"
    checks = []
    for i, over_time in enumerate(("min_over_time", "max_over_time")):
        samples = [] if first_last is None else [{"labels": "{}", "value": first_last[i]}]
        checks.append({"expr": f"min({over_time}({when})) / 60 - {ONSET}", "eval_time": f"{MINUTES - 1}m",
                       "exp_samples": samples})
    return checks


def budget_checks(slo: str) -> list[dict]:
    """Sloth's 30d error ratio is the mean of 5m ratios; llmdash's budget is bad over valid (each to a millionth)."""
    workbook = "cluster_namespace_model_name:llm_slo_error_budget:consumed"
    checks = [(f'slo:sli_error:ratio_rate30d{{sloth_slo="{slo}", model_name="quiet_hours"}} / {SLOTH_RATIO}', 1e-6),
              (f'{workbook}{{slo="{slo}", model_name="quiet_hours"}} * 0.001 / {WORKBOOK_RATIO}', 1e-6)]
    return [{"expr": f"min(abs({expr} - 1) < bool {tolerance})", "eval_time": f"{BUDGET_AT}m",
             "exp_samples": [{"labels": "{}", "value": 1}]} for expr, tolerance in checks]


def test_llmdash_and_sloth_fire_where_the_workbook_says(promtool, tmp_path):
    ours = tmp_path / "llmdash.rules.yaml"
    ours.write_text(yaml.safe_dump({"groups": llmdash_groups()}, sort_keys=False, width=10_000))
    theirs = sloth.generate(OBJECTIVES, tmp_path)
    checks = []
    for o in OBJECTIVES:
        for model, severity, workbook, llmdash in ROWS:
            checks += fired("sloth", severity, o.name, model, workbook)
            checks += fired("llmdash", severity, o.name, model, llmdash)
        checks += budget_checks(o.name)
    # Sloth's alerts read recordings of its other groups: evaluate those first (file order), as their phases
    # would on a live Prometheus at best; promtool's own order is random
    order = [g["name"] for path in (ours, theirs) for g in yaml.safe_load(path.read_text())["groups"]]
    run_rule_tests(promtool, tmp_path, [ours, theirs], input_series(), checks, group_eval_order=order)


def test_every_row_agrees_within_one_evaluation_or_says_why():
    for model, severity, workbook, ours in ROWS:
        agree = (workbook is None) == (ours is None) and (
            workbook is None or all(abs(a - b) <= 1 for a, b in zip(workbook, ours)))
        assert agree != ((model, severity) in SEPARATED), (model, severity, workbook, ours)


def _minutes(first_last: tuple[int, int] | None) -> str:
    return "never" if first_last is None else f"{first_last[0]}–{first_last[1]}"


def test_the_benchmark_page_shows_these_rows():
    page = (ROOT / "docs" / "benchmarks" / "sloth.md").read_text(encoding="utf-8")
    table = [line for line in page.splitlines() if re.match(r"\| `\w+` \| (page|ticket) \|", line)]
    assert table == [f"| `{m}` | {s} | {_minutes(w)} | {_minutes(o)} |" for m, s, w, o in ROWS]
    late = {(m, sev): ours[0] - workbook[0] for m, sev, workbook, ours in ROWS if workbook and ours}
    figures = [f"{WORKBOOK_RATIO * 100:.4f} %", f"{WORKBOOK_RATIO / 0.001:.1%}".replace("%", " %"),
               f"{SLOTH_RATIO * 100:.2f} %", f"{SLOTH_RATIO / 0.001:.1f} times", f"{1 - SLOTH_RATIO / 0.001:.1f})",
               f"evaluated is {END}", f"({late['slow_burn_mid', 'ticket']} minutes late)",
               f"({late['burst', 'ticket']} minutes late)"]
    for figure in figures:
        assert figure in page, figure
