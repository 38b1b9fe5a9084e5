"""Build: catalogs + config -> validated dashboards -> deterministic files under generated/.

Every file is rendered in memory and validated before the first one is written, and the
output directory is updated all at once (`llmdash.atomic`), so a failed or interrupted build
leaves the previous output untouched; only files the build wrote there are ever removed.
`check` plans the same update without writing and fails when it would change anything: CI's drift guard.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from llmdash.dashboards.assemble import build_dashboard
from llmdash.atomic import MANIFEST, Outcome, plan_outputs, quoted, update_outputs
from llmdash.config import Config
from llmdash.dashboards.fleet import build_fleet_dashboard
from llmdash.dashboards import v2
from llmdash.panels.recorded import recording_layer
from llmdash.vocabulary import FLEET, RUNBOOK_DIR
from llmdash.rules.mtail import mtail_program
from llmdash.rules.runbooks import runbook_files
from llmdash.rules.alertmanager import alertmanager_config, render_alertmanager_config
from llmdash.rules.generate import build_rules, render_inhibit_rules, render_rules, split_rules
from llmdash.rules.identity import inhibit_rules
from llmdash.dashboards.validate import validate_dashboard, validate_rules
from llmdash.engines.catalog import load_engine
from llmdash.errors import EXIT_DRIFT, LlmdashError

DEFAULT_OUT = Path("generated")
PARTS = ("dashboards", "rules", "mixin", "mtail")
# Part -> the directories under the output directory it writes (and so may remove from).
PART_SCOPES = {"dashboards": ("dashboards", "dashboards-v2"), "rules": ("rules", "alertmanager", "runbooks"),
               "mixin": ("mixin",), "mtail": ("mtail",)}
INHIBIT_RULES = "alertmanager/llmdash-inhibit-rules.yaml"
ALERTMANAGER_CONFIG = "alertmanager/alertmanager.yml"


def render_json(model: dict) -> str:
    return json.dumps(model, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def _validated(config: Config, build, validate, what: str, engines=None) -> dict[str, dict]:
    """Engine -> model built by `build` (for `engines`, else every engine of the config), refused (exit 2) when
    `validate` finds any problem."""
    models = {}
    for engine in config.engine_ids if engines is None else engines:
        spec = load_engine(engine)
        model = build(spec, config)
        problems = validate(model, spec)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise LlmdashError(f"{what} for {engine} is invalid: {problems[0]}{more}")
        models[engine] = model
    return models


def dashboard_names(config: Config) -> tuple[str, ...]:
    """The dashboards a build makes: one per engine of the config, and the fleet one."""
    return (*config.engine_ids, FLEET)


def build_dashboards(config: Config, names: Collection[str] | None = None) -> dict[str, dict]:
    """Dashboard file stem -> Grafana JSON model: one per engine, each validated against its engine's catalog
    (and the series its rules record), and the fleet dashboard, which reads recorded series only. `names`: only
    these (of `dashboard_names`), exactly as the whole build makes them: publishing one engine's dashboard
    builds and validates that one, not every engine's (validation is most of a build's time)."""
    wanted = dashboard_names(config) if names is None else tuple(names)
    engines = [engine for engine in config.engine_ids if engine in wanted]
    layered = config.engine_ids if FLEET in wanted else engines   # the fleet reads every engine's recorded series
    layers = {engine: recording_layer(load_engine(engine), config) for engine in layered}
    recorded = {engine: frozenset(s.name for s in layer.series) for engine, layer in layers.items()}
    dashboards = _validated(config, build_dashboard,
                            lambda model, spec: validate_dashboard(model, spec, recorded[spec.id].__contains__),
                            "the dashboard", engines)
    if FLEET not in wanted:
        return dashboards
    everything = {series.key: series for layer in layers.values() for series in layer.series}
    fleet = build_fleet_dashboard(config, everything)
    problems = validate_dashboard(fleet, None, frozenset(s.name for s in everything.values()).__contains__)
    if problems:
        raise LlmdashError(f"the fleet dashboard is invalid: {problems[0]}")
    return dashboards | {FLEET: fleet}


def build_rule_files(config: Config) -> dict[str, dict]:
    """Engine -> Prometheus rule file model, each validated against its engine's catalog."""
    return _validated(config, build_rules, validate_rules, "the rule file")


def generated_files(config: Config, parts: tuple[str, ...] = PARTS) -> dict[str, str]:
    """Relative path under the output directory -> file content."""
    files = {}
    models = build_dashboards(config) if {"dashboards", "mixin"} & set(parts) else {}
    dashboards = {name: render_json(model) for name, model in models.items()}
    rules = build_rule_files(config) if {"rules", "mixin"} & set(parts) else {}
    if "dashboards" in parts:
        files |= {f"dashboards/{name}.json": text for name, text in dashboards.items()}
        # The schema v2 twins, in a directory of their own: a file provider pointed at dashboards/ must not
        # meet the same uid twice (docs/publishing-and-grafana-versions.md, "Schema v2").
        files |= {f"dashboards-v2/{name}.json": render_json(v2.rendered(model)) for name, model in models.items()}
    if "rules" in parts:
        files |= {f"rules/{name}.rules.yaml": render_rules(model) for name, model in rules.items()}
        files[INHIBIT_RULES] = render_inhibit_rules(inhibit_rules(config))
        files[ALERTMANAGER_CONFIG] = render_alertmanager_config(alertmanager_config(config))
        files |= {f"{RUNBOOK_DIR.removeprefix('generated/')}/{name}": text
                  for name, text in runbook_files(config).items()}
    if "mixin" in parts:
        files |= mixin_files(dashboards, rules)
    if "mtail" in parts:
        files |= mtail_files(config)
    return files


def mtail_files(config: Config) -> dict[str, str]:
    """`mtail/<engine>.mtail` for every engine built whose catalog lists preemption log lines. Written
    whether or not `logs.enabled` is set: the program is what a user runs before turning the panels on."""
    programs = {engine: mtail_program(load_engine(engine)) for engine in config.engine_ids}
    return {f"mtail/{engine}.mtail": text for engine, text in programs.items() if text}


def mixin_files(dashboards: dict[str, str], rules: dict[str, dict]) -> dict[str, str]:
    """The monitoring-mixin layout (what `mixtool generate` writes): every engine's alerts in one file,
    its recording rules in another, and the dashboards (their rendered JSON) as they are in dashboards/."""
    alerts, records = split_rules(rules)
    files = {"mixin/prometheus_alerts.yaml": render_rules(alerts), "mixin/prometheus_rules.yaml": render_rules(records)}
    files |= {f"mixin/dashboards_out/{name}.json": text for name, text in dashboards.items()}
    return files


def scopes(parts: tuple[str, ...] = PARTS) -> tuple[str, ...]:
    """The directories a build of `parts` answers for: it removes no longer built files there, and only there."""
    return tuple(scope for part in parts for scope in PART_SCOPES[part])


def write(files: dict[str, str], out: Path, parts: tuple[str, ...] = PARTS) -> Outcome:
    """Make `out` hold `files`, all at once, removing what earlier builds of `parts` wrote and no longer build."""
    return update_outputs(out, files, scopes(parts))


def check(files: dict[str, str], out: Path, parts: tuple[str, ...] = PARTS) -> None:
    """Raise (exit 1) naming every file a build would write or remove under `out`."""
    if not files:
        raise LlmdashError("nothing was built, so there is nothing to check")
    plan = plan_outputs(out, files, scopes(parts))
    names = plan.written + [f"{rel} (no longer built)" for rel in plan.removed] + \
        [f"{rel} (no longer built, edited since)" for rel in plan.edited]
    if not names and MANIFEST in plan.writes:
        names = [f"{MANIFEST} (does not record exactly what is built)"]
    if names:
        raise LlmdashError(f"{quoted(f'{out}/')} is stale: {', '.join(names)}; run `make dashboards` and commit it",
                           EXIT_DRIFT)
