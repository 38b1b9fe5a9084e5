"""Figures the hand-written docs still state are what the code builds.

Where a page keeps a figure in prose (not in a generated block), it must agree with the built rules: every
`for`, `keep_firing_for`, window, percentage and factor written beside an alert's name, and every PromQL
range selector a page writes, is read from the rule objects `llmdash build` makes, never from the config
defaults the rules are made from. Beside them: every command option is on docs/command-line.md, the
`--help` of each writing command names every directory it writes, and the tables that list what the code
writes (Kubernetes directories, dashboard rows) name exactly that.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import click
import pytest

from llmdash import docblocks, docgen, durations
from llmdash.build import PART_SCOPES, build_dashboards, build_rule_files, generated_files
from llmdash.cli.main import COMMANDS
from llmdash.config import Config, Rules, load_config
from llmdash.dashboards.assemble import ROWS
from llmdash.delivery.kubernetes import DIRECTORIES, manifest_files
from llmdash.lab import scenarios
from llmdash.vocabulary import SLO_ALERTS, Alert

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GENERATED_PAGES = {"engines.md", "configuration.md"}
DURATION = r"\d+(?:\.\d+)?(?:ms|[smhdwy])"


def hand_pages() -> list[Path]:
    """Every page a person writes: README, CONTRIBUTING and docs/ but the generated pages and the benchmark
    reports (each a measurement `make bench-*` writes, stamped with its commit and date)."""
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.rglob("*.md"))]
    return [p for p in pages if p.name not in GENERATED_PAGES and "benchmarks" not in p.parts]


def without_generated_blocks(text: str) -> str:
    return re.sub(r"<!-- generated: ([\w-]+) -->.*?<!-- end generated: \1 -->", "", text, flags=re.S)


# ---- what the build says ------------------------------------------------------------------------------------

def slo_example_config(directory: Path) -> Config:
    """The configuration docs/slo.md shows (its first YAML block), so its worked example is checked as built."""
    block = re.search(r"```yaml\n(.*?)```", (DOCS / "slo.md").read_text(encoding="utf-8"), flags=re.S)
    path = directory / "llmdash.yaml"
    path.write_text(block[1] if block else "{}\n", encoding="utf-8")
    return dataclasses.replace(load_config(path), engines=("vllm",))   # the page's worked example is vLLM's


def configurations(directory: Path) -> list[Config]:
    """The builds whose figures a page may quote: the defaults (with the log page), the hold a ruler without
    keep_firing_for gets, and docs/slo.md's objectives."""
    return [docblocks.FIGURES_CONFIG, Config(rules=Rules(target="vmalert")), slo_example_config(directory)]


class Built:
    """Per alert name: every `for`, `keep_firing_for`, window and number its built rules carry on any engine;
    and every expression text of the rule files."""

    def __init__(self, configs: list[Config]):
        self.durations: dict[str, set[str]] = {}
        self.holds: dict[str, set[str]] = {}
        self.windows: dict[str, set[str]] = {}
        self.numbers: dict[str, set[float]] = {}
        self.paired: dict[str, set[tuple[str, float]]] = {}   # (a recorded rate's window, the number it is compared to)
        self.expressions: list[str] = []
        for config in configs:
            for model in build_rule_files(config).values():
                for group in model["groups"]:
                    for rule in group["rules"]:
                        self.expressions.append(rule["expr"])
                        if "alert" in rule:
                            self._add(rule)

    def _add(self, rule: dict) -> None:
        name = rule["alert"]
        self.durations.setdefault(name, set()).add(rule["for"])
        self.holds.setdefault(name, set()).update([rule["keep_firing_for"]] if "keep_firing_for" in rule else [])
        self.windows.setdefault(name, set()).update(docblocks.expression_windows(rule["expr"]))
        numbers = self.numbers.setdefault(name, set())
        for comparison in docblocks.expression_comparisons(rule["expr"]):
            numbers.add(float(comparison.split()[-1]))
        self.paired.setdefault(name, set()).update((window, float(number))
                                                   for window, number in COMPARED_RATE.findall(rule["expr"]))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    return Built(configurations(tmp_path_factory.mktemp("slo-example")))


# ---- what a page says ---------------------------------------------------------------------------------------

ALERT_NAME = re.compile(r"\bLLMServing\w+")
# Phrases the pages use for one alert without its name.
ALIASES = [(re.compile(r"\blog page\b", re.I), Alert.LOG_PREEMPTIONS_HIGH),
           (re.compile(r"\b(?:the|preemption) page\b|\bpage's\b", re.I), Alert.PREEMPTIONS_HIGH),
           (re.compile(r"\bdivergence (?:warning|alert|page)\b", re.I), Alert.DIVERGENCE),
           (re.compile(r"\bstraggler\b", re.I), Alert.INSTANCE_LATENCY_HIGH),
           (re.compile(r"\bchronic\b", re.I), Alert.PREEMPTIONS_CHRONIC)]
FOR = re.compile(rf"(?<![\w-])`?for`?:?\s*\(?`?({DURATION})\b|(\d+)[- ]minutes?\s+`for`")
FOR_CODE = re.compile(rf"(?<![\w-])(?:`for`:?|for:)\s*\(?`?({DURATION})\b()")   # `for` (1m), for: 7m
HOLD = re.compile(rf"keep(?:s|ing)?[ _]firing(?:[ _]for)?`?:?\s*\(?`?({DURATION})\b")
WINDOW = re.compile(rf"\bover (?:the last )?`?({DURATION})\b")
PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s?%")
FACTOR = re.compile(r"(\d+(?:\.\d+)?)\s?[x×](?!\w)")
SHARE_OVER = re.compile(rf"(\d+(?:\.\d+)?)\s?%[^,;%]*?\b(?:over|of) (?:the last )?`?({DURATION})\b")
COMPARED_RATE = re.compile(r":\w*?rate(\d+[smhdw])(?:\{[^}]*\})?\)?\s*(?:>=|>|<=|<)\s*(\d+(?:\.\d+)?)")
RANGE = re.compile(rf"\[{DURATION}(?::(?:{DURATION})?)?\]")


def contexts(text: str) -> list[str]:
    """The units a figure belongs to: each table row, list item and paragraph, outside code blocks."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    prose = "\n".join(line for line in prose.splitlines() if not line.startswith("    "))
    units = []
    for paragraph in re.split(r"\n\s*\n", prose):
        units += re.split(r"\n(?=\||\s*[-*] |\s*\d+\. )", paragraph)
    return units


def sentences(unit: str) -> list[str]:
    return [unit] if unit.startswith("|") else re.split(r"(?<=[.;:])\s+(?=[A-Z`(])", unit)


def named(text: str) -> set[str]:
    names = set(ALERT_NAME.findall(text))
    names |= {str(alert) for pattern, alert in ALIASES if pattern.search(text)}
    return names


def disagreements(text: str, built: Built) -> list[str]:
    """Each figure in `text` the built rules do not carry, as `figure (in: the sentence)`."""
    wrong = []
    everything = set(built.durations)
    for unit in contexts(without_generated_blocks(text)):
        around = named(unit)
        for sentence in sentences(unit):
            alerts = (named(sentence) or around) & everything
            flat = " ".join(sentence.split())
            where = f"(in: {flat[:160]})"

            def check(values, allowed, what):
                for value in values:
                    if value not in allowed:
                        wrong.append(f"{what} {value} not in {sorted(allowed)} {where}")

            # plain "for 6h" is English ("72 samples for 3d") unless an alert is named around it
            fors = [m[1] or f"{m[2]}m" for m in (FOR if alerts else FOR_CODE).finditer(sentence)]
            check(fors, set().union(*(built.durations[a] for a in alerts or everything)), "for")
            holds = HOLD.findall(sentence)
            check(holds, set().union(*(built.holds[a] for a in alerts or everything)), "keep_firing_for")
            # windows, percentages and factors only beside an alert's own name: an alias ("the page") is too
            # loose for them, and the SLO alerts' budget arithmetic is docs/slo.md's (tests/rules/test_slo*.py)
            alerts = set(ALERT_NAME.findall(sentence)) & everything - set(SLO_ALERTS)
            if not alerts:
                continue
            check(WINDOW.findall(sentence), set().union(*(built.windows[a] for a in alerts)) | set(fors) | set(holds),
                  "window")
            numbers = set().union(*(built.numbers[a] for a in alerts))
            for value in PERCENT.findall(sentence):
                if not any(abs(float(value) / 100 - n) < 1e-9 for n in numbers):
                    wrong.append(f"{value} % not among the thresholds {sorted(numbers)} of {sorted(alerts)} {where}")
            paired = set().union(*(built.paired[a] for a in alerts))
            for value, window in SHARE_OVER.findall(sentence):
                mine = {number for w, number in paired if w == window}
                if mine and not any(abs(float(value) / 100 - n) < 1e-9 for n in mine):
                    wrong.append(f"{value} % over {window}: the rules compare {window} to {sorted(mine)} {where}")
            for value in FACTOR.findall(sentence):
                if float(value) not in numbers:
                    wrong.append(f"{value}x not among the numbers {sorted(numbers)} of {sorted(alerts)} {where}")
    for selector in RANGE.findall(text):
        if not any(selector in expr for expr in built.expressions):
            wrong.append(f"range {selector} is in no built rule expression")
    return wrong


@pytest.mark.parametrize("path", hand_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_figure_a_page_states_is_what_the_rules_say(path, built):
    assert disagreements(path.read_text(encoding="utf-8"), built) == []


@pytest.mark.parametrize("text, found", [
    # each wrong figure issue 27 found on the pages, as it was written there
    ("`LLMServingLatencyThroughputDivergence` | ... where the engine counts preemptions, for 6m", "for 6m"),
    ("| `LLMServingLogPreemptionsHigh` | the mtail counted preemptions over 2m, for 1m, for 2m |", "for 1m"),
    ("| `rules.target` | `keep_firing_for: 10m` on the page |", "keep_firing_for 10m"),
    ("a condition true for less than the page's `for` (1m) is held too", "for 1m"),
    ("(<condition>) or last_over_time((<condition>)[10m:1m])", "range [10m:1m]"),
    ("`LLMServingPreemptionsHigh` fires at ≥ 2 % over 2m, confirmed by ≥ 3 % over 3m", "2 % over 2m"),
    ("`LLMServingPreemptionsHigh` fires at ≥ 4 % over 2m", "4 % not among"),
    ("`LLMServingPreemptionsHigh`: paused in ≥ 10 % of the last 2m and 50 % of 3m", "10 % over 2m"),
    ("`LLMServingInstanceLatencyHigh`: ≥ 4x its model's p99", "4x"),
    ("`LLMServingPreemptionsChronic`: over 20m", "window 20m"),
])
def test_a_wrong_figure_is_found(text, found, built):
    assert any(found in problem for problem in disagreements(text, built)), disagreements(text, built)


@pytest.mark.parametrize("text", [
    "`LLMServingLatencyThroughputDivergence`: where the engine counts preemptions, for 7m; keeps firing 5m after",
    "`LLMServingPreemptionsHigh`: ≥ 3 % over 2m, confirmed by ≥ 2 % over 3m, for 2m; keeps firing 5m after",
    "`LLMServingPreemptionsHigh`: paused in ≥ 50 % of the last 2m and 10 % of 3m",
    "the recorded part (720 samples for the 30-day budget, 72 for 3d)",
    "`LLMServingInstanceLatencyHigh`: ≥ 3x its model's p99 for 10m",
    "(<condition>) or last_over_time((<condition>)[5m:])",
])
def test_a_right_figure_passes(text, built):
    assert disagreements(text, built) == []


# A figure written right beside a config key, `5 minutes (`divergence.window`)` or `divergence.window`: 5m,
# is that key's default.
UNIT = r"(?:minutes?|seconds?|hours?|days?|ms|[smhdw]|%)"
BESIDE_KEY = re.compile(rf"(\d+(?:\.\d+)?)\s?({UNIT})?`?\s\(`([a-z_]+\.[a-z_.]+)`"
                        rf"|`([a-z_]+\.[a-z_.]+)`(?::| is| =|,? default| by default)\s`?(\d+(?:\.\d+)?)\s?({UNIT})?`?")
SECONDS = {"ms": 0.001, "s": 1, "second": 1, "m": 60, "minute": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400,
           "w": 604800}


def _amount(number: str, unit: str | None) -> float:
    if not unit:
        return float(number)
    if unit == "%":
        return float(number) / 100
    return float(number) * SECONDS[unit.removesuffix("s") if len(unit) > 2 else unit]


def config_disagreements(text: str) -> list[str]:
    defaults = {key: value for key, _, value in docgen.config_keys()}
    wrong = []
    for match in BESIDE_KEY.finditer(without_generated_blocks(text)):
        number, unit, key = (match[1], match[2], match[3]) if match[3] else (match[5], match[6], match[4])
        if key not in defaults or isinstance(defaults[key], bool):
            continue
        default = defaults[key]
        value = durations.seconds(default) if isinstance(default, str) else default
        if not isinstance(value, (int, float)) or abs(_amount(number, unit) - value) > 1e-9:
            wrong.append(f"{match[0]!r}: the default of {key} is {default!r}")
    return wrong


@pytest.mark.parametrize("path", hand_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_figure_beside_a_config_key_is_its_default(path):
    assert config_disagreements(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("text, wrong", [
    ("every panel rates over 6 minutes (`divergence.window`, the window the recording rules record)", True),
    ("every panel rates over 5 minutes (`divergence.window`, the window the recording rules record)", False),
    ("`preemption.keep_firing_for`: 10m", True),
    ("the share `preemption.page_share` by default 3 %", False),
    ("the share `preemption.page_share` by default 2 %", True),
])
def test_a_figure_beside_a_config_key_is_checked(text, wrong):
    assert bool(config_disagreements(text)) is wrong


# ---- command line -------------------------------------------------------------------------------------------

def command(name: str) -> click.Command:
    module, attribute, _ = COMMANDS[name]
    return getattr(importlib.import_module(module), attribute)


def help_text(name: str) -> str:
    """The command's --help on one unwrapped line (click wraps at hyphens)."""
    cmd = command(name)
    return " ".join(cmd.get_help(click.Context(cmd, info_name=name, max_content_width=100_000, terminal_width=100_000))
                    .split())


def synopsis(name: str) -> str:
    """The command's lines in docs/command-line.md's synopsis (a line and its indented continuations)."""
    block = (DOCS / "command-line.md").read_text(encoding="utf-8").split("    llmdash --version", 1)[1]
    block = block.split("\n\n", 1)[0]
    found = re.search(rf"^    llmdash {re.escape(name)}\b.*(?:\n {{8,}}.*)*", block, flags=re.M)
    return found[0] if found else ""


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_option_of_every_command_is_on_the_command_line_page(name):
    line = synopsis(name)
    assert line, f"llmdash {name} is missing from docs/command-line.md"
    options = [opt for param in command(name).params if isinstance(param, click.Option) for opt in param.opts]
    assert [opt for opt in options if not re.search(rf"{re.escape(opt)}(?![\w-])", line)] == []


def test_build_help_names_every_directory_the_build_writes():
    written = sorted({path.split("/", 1)[0] for path in generated_files(Config(engines=("vllm",)))})   # it has mtail
    text = help_text("build")
    assert written == sorted(d for dirs in PART_SCOPES.values() for d in dirs)
    assert [d for d in written if f"OUT/{d}/" not in text] == []


def test_rules_help_names_every_directory_the_rules_part_writes():
    written = sorted({path.split("/", 1)[0] for path in generated_files(Config(engines=("vllm",)), parts=("rules",))})
    text = help_text("rules")
    assert written == ["alertmanager", "rules", "runbooks"]
    assert [d for d in written if f"OUT/{d}/" not in text] == []


@pytest.fixture(scope="module")
def kubernetes_directories() -> list[str]:
    config = Config(engines=("vllm",))
    files = manifest_files(build_dashboards(config), build_rule_files(config), config.kubernetes)
    return sorted({path.split("/", 1)[0] for path in files if "/" in path})


def test_provision_help_names_every_kubernetes_directory(kubernetes_directories):
    assert kubernetes_directories == sorted(DIRECTORIES)
    text = help_text("provision")
    assert [d for d in kubernetes_directories if f"DIRECTORY/{d}/" not in text] == []


def test_the_kubernetes_page_table_names_every_directory_written(kubernetes_directories):
    page = (DOCS / "kubernetes.md").read_text(encoding="utf-8")
    table = page.split("| Directory | What | Picked up by |", 1)[1].split("\n\n", 1)[0]
    assert sorted(re.findall(r"^\| `([\w-]+)/` \|", table, flags=re.M)) == kubernetes_directories


# ---- other tables and citations -----------------------------------------------------------------------------

def test_the_dashboard_rows_table_is_the_rows_the_dashboards_have():
    page = (DOCS / "dashboards.md").read_text(encoding="utf-8")
    table = page.split("| Row | Question | Panels |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| ([^|]+?) \| ([^|]+?) \|", table, flags=re.M)
    assert rows == [(title, question) for title, question, _ in ROWS]


def test_every_docs_page_a_file_cites_exists():
    cited = []
    for path in [*ROOT.glob("*.md"), *ROOT.glob("Makefile"), *(ROOT / "llmdash").rglob("*.py"),
                 *(ROOT / "tests").rglob("*.py"), *(ROOT / "panels").rglob("*.py"), *(ROOT / "rules").rglob("*.py"),
                 *(ROOT / "dashboards").rglob("*.py")]:
        for name in re.findall(r"(?<![\w/])docs/(?!sources/)[\w./-]+?\.(?:md|yaml|yml|png)\b", path.read_text()):
            if not (ROOT / name).exists():
                cited.append(f"{path.relative_to(ROOT)}: {name}")
    assert cited == []


def test_the_scenario_descriptions_state_what_the_scenarios_build():
    """The figures in each scenario's one-line description (shown by `simulate --help` and on simulator.md)."""
    one_bad, rolling = scenarios.build("one-bad-replica"), scenarios.build("rolling-upgrade")
    assert scenarios.SCENARIOS["one-bad-replica"][0].startswith(f"{len(one_bad.models[0].replicas)} replicas")
    assert scenarios.SCENARIOS["rolling-upgrade"][0].startswith(f"{len(rolling.models[0].replicas)} replicas")
    traffic = scenarios.Traffic()
    growth = f"{traffic.prompt_tokens} -> {traffic.growth_prompt_tokens} tokens"
    assert growth in scenarios.SCENARIOS["prompt-growth"][0]
    assert f"{traffic.long_collapse_min:g} minutes" in scenarios.SCENARIOS["long-collapse"][0]


def test_the_long_range_paragraph_states_the_built_panels_step_figures(default_build):
    """docs/dashboards.md's Max data points, the range up to which the Min interval sets the step, and that
    interval, as the built vLLM dashboard's query panels carry them."""
    panels = [p for p in default_build["vllm"]["panels"] if p.get("targets")]
    (points,) = {p["maxDataPoints"] for p in panels}
    (interval,) = {p["interval"] for p in panels}
    page = " ".join((DOCS / "dashboards.md").read_text().split())
    assert f"Max data points is one window per point over a day ({points} for 5 minutes)" in page
    assert f"up to {points * durations.seconds(interval) / 3600:g} h Grafana steps at the panels' " \
           f"{durations.seconds(interval) / 60:g}-minute Min interval" in page
