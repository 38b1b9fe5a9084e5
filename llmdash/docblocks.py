"""Generated blocks inside hand-written pages: the figures a page would otherwise restate by hand.

Why: prose that copies a threshold, a `for`, a window, an engine list or a file list from the code is wrong
the day the code changes (issue 27 found a divergence `for` of "6m" that was 7m, a `keep_firing_for` of
"10m" that was 5m). A page keeps its prose by hand and marks where figures go:

    <!-- generated: alerts -->
    (written by `python -m llmdash.docgen`; edits here are overwritten)
    <!-- end generated: alerts -->

and `llmdash.docgen` fills every marked block from the built rules, the build's output layout and the
scenario definitions, so `python -m llmdash.docgen --check` (run by the test
suite) fails when a committed block is stale. Figures prose must still name are checked against the built
rules by tests/docs/test_figures.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from llmdash.build import PART_SCOPES, build_rule_files
from llmdash.config import Config, Logs
from llmdash.errors import LlmdashError
from llmdash.lab import scenarios
from llmdash.engines.catalog import load_engine
from llmdash.rules.lifecycle import LIFECYCLE, unit_labels
from llmdash.rules.targets import held
from llmdash.vocabulary import Alert

BEGIN = re.compile(r"^<!-- generated: (?P<name>[\w-]+) -->$", re.M)
END = "<!-- end generated: {name} -->"

# The configuration the alert figures are read from: the defaults, with the log page on so that it is listed.
FIGURES_CONFIG = Config(logs=Logs(enabled=True))

COMPARISON = re.compile(r"(?<![=!<>])(>=|<=|==|!=|>|<)\s*(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)(?![\w.:])")
FACTOR = re.compile(r"\)\s*\*\s*(?!0(?![\d.]))(\d+(?:\.\d+)?)(?![\w.:])")   # not `or x * 0`, a zero fallback
WINDOW = re.compile(r":\w*?rate(\d+[smhdw])\b|:max(\d+[smhdw])\b|\[(\d+[smhdw])(?::\d*[smhdw]?)?\]"
                    r"|\boffset (\d+[smhdw])\b")


@dataclass(frozen=True)
class AlertFigures:
    """What one alert's built rules say on one engine: the figures a reader of the alerts page needs."""

    alert: str
    severity: str
    windows: tuple[str, ...]
    comparisons: tuple[str, ...]
    duration: str
    keep_firing_for: str


def _ordered(items) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def expression_windows(expr: str) -> tuple[str, ...]:
    """The windows an expression reads: recorded `…rate2m` names, range selectors and offsets, in order."""
    return _ordered(next(group for group in match.groups() if group) for match in WINDOW.finditer(expr))


def expression_comparisons(expr: str) -> tuple[str, ...]:
    """Every comparison with a literal (`>= 0.03`) and every factor a series is multiplied by (`× 3`)."""
    found = [(match.start(), f"{match[1]} {match[2]}") for match in COMPARISON.finditer(expr)]
    found += [(match.start(), f"× {match[1]}") for match in FACTOR.finditer(expr)]
    return _ordered(text for _, text in sorted(found))


def alert_rules(config: Config = FIGURES_CONFIG) -> dict[str, list[dict]]:
    """Engine -> the alerting rules its built rule file carries."""
    return {engine: [rule for group in model["groups"] for rule in group["rules"] if "alert" in rule]
            for engine, model in build_rule_files(config).items()}


def alert_figures(config: Config = FIGURES_CONFIG) -> dict[AlertFigures, list[str]]:
    """Each distinct set of figures -> the engines whose rules carry it, in the order the rule files list alerts.
    An alert with several rules on one engine (one `LLMServingSignalMissing` per signal) is one entry."""
    rows: dict[AlertFigures, list[str]] = {}
    for engine, rules in alert_rules(config).items():
        for name in _ordered(rule["alert"] for rule in rules):
            mine = [rule for rule in rules if rule["alert"] == name]
            figures = AlertFigures(
                name, " / ".join(_ordered(rule["labels"]["severity"] for rule in mine)),
                _ordered(w for rule in mine for w in expression_windows(rule["expr"])),
                _ordered(c for rule in mine for c in expression_comparisons(rule["expr"])),
                " / ".join(_ordered(rule["for"] for rule in mine)),
                " / ".join(_ordered(rule.get("keep_firing_for", "") for rule in mine)))
            rows.setdefault(figures, []).append(engine)
    return rows


def _code(items) -> str:
    return ", ".join(f"`{item}`" for item in items) or "–"


def alerts_block() -> str:
    lines = ["| Alert | Engines | Severity | Windows read | Comparisons in the expression | `for` | "
             "`keep_firing_for` |", "|---|---|---|---|---|---|---|"]
    rows = alert_figures()
    order = {name: i for i, name in enumerate(_ordered(f.alert for f in rows))}
    for figures, engines in sorted(rows.items(), key=lambda item: order[item[0].alert]):
        lines.append(f"| `{figures.alert}` | {', '.join(engines)} | {figures.severity} | {_code(figures.windows)} "
                     f"| {_code(figures.comparisons)} | `{figures.duration}` | "
                     f"{f'`{figures.keep_firing_for}`' if figures.keep_firing_for else '–'} |")
    return "\n".join(lines)


def alert_units_block() -> str:
    """What one instance of each alert is about and when it resolves (`llmdash.rules.lifecycle`), with the labels
    that make one instance on each engine and the built rules' `keep_firing_for`."""
    lines = ["| Alert | One alert is about | Its labels (and the engines) | Resolves |", "|---|---|---|---|"]
    rules = alert_rules(FIGURES_CONFIG)
    for name in _ordered(rule["alert"] for engine_rules in rules.values() for rule in engine_rules):
        alert = Alert(name)
        labels: dict[tuple[str, ...], list[str]] = {}
        for engine, engine_rules in rules.items():
            if any(rule["alert"] == name for rule in engine_rules):
                labels.setdefault(unit_labels(alert, load_engine(engine), FIGURES_CONFIG), []).append(engine)
        held = _ordered(rule.get("keep_firing_for", "") for engine_rules in rules.values() for rule in engine_rules
                        if rule["alert"] == name)
        lifecycle = LIFECYCLE[alert]
        resolves = lifecycle.resolves.format(keep_firing_for=" / ".join(f"`{h}`" for h in held if h) or "at once")
        which = "; ".join(f"{_code(label_set)} ({', '.join(engines)})" for label_set, engines in labels.items())
        lines.append(f"| `{name}` | {lifecycle.about} | {which} | {resolves[0].upper()}{resolves[1:]} |")
    return "\n".join(lines)


def held_expression_block() -> str:
    """The hold a ruler without `keep_firing_for` gets, written by the same function the build uses."""
    config = Config()
    return "```\n" + held("<condition>", config.preemption.keep_firing_for, config.rules.interval or "") + "\n```"


def rule_groups_block() -> str:
    """Each group of an engine's rule file, how often it is evaluated and what it holds, read from the built rules
    (the defaults, plus one SLO objective so that the SLO rules are placed too)."""
    from llmdash.config import Objective, Slo
    slo = Config(slo=Slo(objectives=(Objective(name="ttft", target_seconds=1.0, objective=0.99, engines=("vllm",)),)))
    default, with_slo = ({group["name"]: group.get("interval", "the server's `evaluation_interval`")
                          for group in build_rule_files(config)["vllm"]["groups"]} for config in (FIGURES_CONFIG, slo))
    lines = ["| Group (vLLM's) | Evaluated every | With `slo.objectives` (and no `rules.interval`) | Holds |",
             "|---|---|---|---|"]
    for i, group in enumerate(build_rule_files(slo)["vllm"]["groups"]):
        alerts = _ordered(rule["alert"] for rule in group["rules"] if "alert" in rule)
        records = _ordered(rule["record"] for rule in group["rules"] if "record" in rule)
        listed = _code(records) if i == 0 else f"{len(records)} series, every other"
        lines.append(f"| `{group['name']}` | {default[group['name']]} | {with_slo[group['name']]} | "
                     f"alerts {_code(alerts)}; recorded: {listed} |")
    return "\n".join(lines)


def build_outputs_block() -> str:
    lines = ["| `llmdash` part | Directories under the output directory |", "|---|---|"]
    lines += [f"| {part} | {', '.join(f'`{d}/`' for d in dirs)} |" for part, dirs in PART_SCOPES.items()]
    return "\n".join(lines)


def scenarios_block() -> str:
    lines = ["| Scenario | What happens | Models × replicas | Clusters | Onset at | Simulated |",
             "|---|---|---|---|---|---|"]
    for name in scenarios.SCENARIOS:
        scenario = scenarios.build(name)
        shape = ", ".join(f"{model.name} × {len(model.replicas)}" for model in scenario.models)
        clusters = _ordered(r.cluster for model in scenario.models for r in model.replicas if r.cluster)
        lines.append(f"| `{name}` | {scenario.description} | {shape} | {_code(clusters)} "
                     f"| {scenario.onset_s / 60:g} min | {scenario.duration_s / 60:g} min |")
    return "\n".join(lines)


BLOCKS: dict[str, Callable[[], str]] = {
    "alerts": alerts_block,
    "alert-units": alert_units_block,
    "held-expression": held_expression_block,
    "build-outputs": build_outputs_block,
    "rule-groups": rule_groups_block,
    "scenarios": scenarios_block,
}


def fill(page: str, text: str) -> str:
    """`text` with every generated block replaced by what the code gives now; an unknown or unclosed block is
    refused naming the page."""
    out, at = [], 0
    for match in BEGIN.finditer(text):
        name = match["name"]
        if name not in BLOCKS:
            raise LlmdashError(f"{page}: unknown generated block {name!r} (known: {', '.join(BLOCKS)})")
        end = text.find(END.format(name=name), match.end())
        if end < 0:
            raise LlmdashError(f"{page}: generated block {name!r} has no `{END.format(name=name)}`")
        out += [text[at:match.end()], "\n", BLOCKS[name](), "\n"]
        at = end
    return "".join(out) + text[at:]
