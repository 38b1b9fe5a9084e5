"""The generated parts of `docs/slo.md`: every figure the page states about the SLO rules (windows, burn rates,
thresholds, defaults, limits), the worked example's rules and what each engine counts as valid, good and bad,
written from the code and catalogs that decide them.

Why: the page used to restate them by hand and drifted when the rules changed. Each part sits between
`<!-- generated: NAME -->` and `<!-- end generated -->` in the hand-written page; `python -m llmdash.docgen`
rewrites them and its `--check` (run by the test suite) fails when one is stale.
"""

from __future__ import annotations

import re
from dataclasses import replace

import yaml

from llmdash.config import FASTEST_BURN, LONGEST_ALERT_WINDOW, MAX_SLO_WINDOW, Config, Objective, Slo
from llmdash.durations import seconds
from llmdash.engines.model import EngineSpec
from llmdash.panels.recorded import FINE_UNTIL_S, SLO_BLOCK, SLO_WINDOWS, inside, recording_layer, slo_step
from llmdash.panels.slo import events_defined
from llmdash.rules import identity
from llmdash.rules import slo as rules_slo
from llmdash.vocabulary import BURN_PAIRS, Alert, Role, Sli

BLOCK = re.compile(r"(<!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)
EXAMPLE = Objective(name="ttft", target_seconds=1.0, objective=0.99)
EXAMPLE_ENGINE = "vllm"
OBJECTIVES = (0.99, 0.999)   # the thresholds table's columns


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _alerts() -> str:
    window_s = seconds(Objective(name="x").window)
    head = ("| Alert | Severity | Long window | Short window | Burn | "
            + " | ".join(f"Error ratio at {100 * o:g} %" for o in OBJECTIVES)
            + f" | Budget spent when it fires (of {Objective(name='x').window}) |")
    lines = [head, "|" + " --- |" * (6 + len(OBJECTIVES))]
    for alert, pairs in BURN_PAIRS.items():
        for pair in pairs:
            ratios = " | ".join(f"{100 * rules_slo.threshold(pair, replace(EXAMPLE, objective=o)):.4g} %"
                                for o in OBJECTIVES)
            lines.append(f"| `{alert}` | {identity.SEVERITY[alert]} | {pair.long} | {pair.short} | {pair.burn:g}× | "
                         f"{ratios} | {100 * pair.burn * seconds(pair.long) / window_s:.3g} % in {pair.long} |")
    return "\n".join(lines)


def _figures() -> str:
    default = Objective(name="x")
    return "\n".join([
        f"- `min_bad_events` defaults to {default.min_bad_events:g}; `objective` to {default.objective:g}; `window` "
        f"to {default.window}.",
        f"- An objective's `window` is whole hours, at least the slow alert's longest window ({LONGEST_ALERT_WINDOW}) "
        f"and at most {MAX_SLO_WINDOW} (365 days: the budget sums one hourly count per hour of it).",
        f"- An objective must leave room for the fastest burn: {FASTEST_BURN:g}× its budget must stay under 100 % "
        f"(so `objective` at least {1 - 1 / FASTEST_BURN:.3f}).",
        f"- The burn-rate alerts fire with `for: {rules_slo.FOR}` (the short window already demands a current "
        f"burn); the thresholds sit {rules_slo.RATIO_TOLERANCE:g} of themselves lower, so a ratio of exactly "
        "burn × budget reaches them.",
        f"- `{Alert.SLO_COVERAGE_LOW}` ({identity.SEVERITY[Alert.SLO_COVERAGE_LOW]}) fires when the recorded "
        f"coverage stays under 1 for {rules_slo.COVERAGE_FOR}.",
    ])


def _windows() -> str:
    step = slo_step(Config())
    lines = ["| Window | Read by | Counted as | Range | Samples per evaluation |", "| --- | --- | --- | --- | --- |"]
    readers = {w: [a for a, ps in BURN_PAIRS.items() for p in ps if w in (p.long, p.short)] for w in SLO_WINDOWS}
    lines.append(f"| {step} (the rule interval) | every window | what the counters gained since the previous "
                 f"evaluation | `x - x offset {step}` (a reset: `x`) | 2 per raw series |")
    for window in SLO_WINDOWS:
        who = ", ".join(sorted({f"`{a}`" for a in readers[window]}))
        if seconds(window) <= FINE_UNTIL_S:
            how, rng, n = (f"the sum of the {step} counts", f"`[{inside(window, step)}]`",
                           f"{seconds(window) / seconds(step):g}")
        else:
            how, rng = f"the sum of the {SLO_BLOCK} counts, one per hour", f"`[{inside(window, step)}:{SLO_BLOCK}]`"
            n = f"{seconds(window) / seconds(SLO_BLOCK):g}"
        lines.append(f"| {window} | {who} | {how} | {rng} | {n} |")
    window = Objective(name="x").window
    lines.append(f"| the objective's window ({window} by default) | the budget panels | the sum of the {SLO_BLOCK} "
                 f"counts, one per hour | `[{inside(window, step)}:{SLO_BLOCK}]` | "
                 f"{seconds(window) / seconds(SLO_BLOCK):g} |")
    return "\n".join(lines)


def _example(specs: dict[str, EngineSpec]) -> str:
    config = Config(engines=(EXAMPLE_ENGINE,), slo=Slo(objectives=(EXAMPLE,)))
    rules = [{"record": s.name, "expr": s.expr} for s in recording_layer(specs[EXAMPLE_ENGINE], config).series
             if s.key.signal.startswith("slo_")]
    return "```yaml\n" + yaml.safe_dump(rules, sort_keys=False, width=10_000) + "```"


def _events(specs: dict[str, EngineSpec]) -> str:
    lines = ["| Engine | Availability: valid events | Availability: bad events | Left out | TTFT histogram | "
             "Token-latency histogram |", "| --- | --- | --- | --- | --- | --- |"]
    for spec in specs.values():
        available = events_defined(spec, Sli.AVAILABILITY)
        cells = ([available["valid"], available["bad"], available["left out"]] if available else
                 ["none: no failed-request counter (an availability SLO is refused)", "", ""])
        for kind in (Sli.TTFT, Sli.TOKEN_LATENCY):
            role = Role.TTFT if kind == Sli.TTFT else next((r for r in (Role.ITL, Role.TPOT) if spec.has(r)), None)
            if events_defined(spec, kind) is None:
                cells.append("none (a latency SLO is refused)")
                continue
            names = " or ".join(f"`{s.series}`" for s in spec.signal(role).sources)
            cells.append(names + ("" if kind == Sli.TTFT else f" ({role})"))
        lines.append(f"| {spec.title} | " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def slo_page(text: str, specs: dict[str, EngineSpec]) -> str:
    """`text` (docs/slo.md) with every generated part rewritten; an unknown part name raises."""
    parts = {"alerts": _alerts, "figures": _figures, "windows": _windows, "example": lambda: _example(specs),
             "events": lambda: _events(specs)}

    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in parts:
            raise ValueError(f"docs/slo.md: no generated part named {name!r} (known: {', '.join(parts)})")
        return f"{match[1]}{parts[name]()}\n{match[4]}"
    return BLOCK.sub(fill, text)
