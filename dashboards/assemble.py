"""One dashboard per engine: rows of panels chosen by what the engine's spec offers.

Composition only: which panels go in which row, in what order. PromQL comes from
`llmdash.panels.signals`, panel shape from `llmdash.panels.library`; positions are computed here and the
result goes through `llmdash.dashboards.postprocess` to become what current Grafana stores.
"""

from __future__ import annotations

from grafanalib import core

from llmdash.dashboards import postprocess
from llmdash.durations import duration, seconds
from llmdash.engines.model import EngineSpec
from llmdash.panels import library
from llmdash.panels.builders import DATASOURCE
from llmdash.panels import promql
from llmdash.panels.promql import Matcher
from llmdash.panels.recorded import RecordedSignals
from llmdash.panels.signals import INFO, Signals, SignalsBase, fixed_selectors
from llmdash.panels.slo_panels import slo_attainment_chart, slo_budget_chart, slo_burn_chart, slo_coverage_chart
from llmdash.rules.identity import alert_labels, carried_alerts, runbook_url
from llmdash.vocabulary import (ALERT_PATTERN, ALERTNAME_LABEL, ALERTS_SERIES, ALERTSTATE_LABEL, DOMAIN_TAG,
                                ENGINE_LABEL, FLEET_TAG, HEADLINE, MODEL_LABEL, TAG, Alert, Annotations,
                                Role, dashboard_uid)

ttft_tile = library.latency_tile(Role.TTFT)
ttft_chart = library.latency_chart(Role.TTFT)

# (row title, on-call question it answers, panel functions in order)
ROWS = [
    ("On-call", "Is anything wrong right now?", [
        library.throughput_tile, library.requests_tile, library.token_latency_tile, ttft_tile,
        library.preemption_tile, library.kv_usage_tile, library.waiting_tile]),
    ("Throughput vs latency", "Is latency rising while throughput holds?", [
        library.throughput_chart, library.token_latency_chart, ttft_chart]),
    ("Preemption", "Is the KV cache evicting running requests?", [
        library.preemption_chart, library.log_preemption_chart, library.preemptions_per_request_chart,
        library.retracted_tokens_chart,
        library.kv_usage_chart, library.divergence_chart]),
    ("Instances", "Which replica is it?", [library.top_instances_by_preemption, library.top_instances_by_latency]),
    ("ITL vs TPOT", "Are stalls hitting individual tokens or whole requests?", [
        library.itl_detail_chart, library.tpot_detail_chart]),
    ("Queue", "Is work piling up?", [library.queue_chart]),
    ("SLO", "What share of users still gets the latency we promise?", [
        library.slo_chart(Role.TTFT, "ttft_seconds"), library.slo_latency_chart]),
    ("Error budget", "Are we spending the SLO's error budget faster than it lasts?", [   # with slo.objectives only
        slo_budget_chart, slo_burn_chart, slo_attainment_chart, slo_coverage_chart]),
]


# Panel function -> the alert that pages on what the panel shows; the panel links to its runbook.
WATCHED_BY = {
    library.preemption_tile: Alert.PREEMPTIONS_HIGH, library.preemption_chart: Alert.PREEMPTIONS_HIGH,
    library.log_preemption_chart: Alert.LOG_PREEMPTIONS_HIGH,
    library.divergence_chart: Alert.DIVERGENCE,
    ttft_tile: Alert.TTFT_HIGH, ttft_chart: Alert.TTFT_HIGH,
    library.token_latency_tile: Alert.ITL_HIGH, library.token_latency_chart: Alert.ITL_HIGH,
    library.itl_detail_chart: Alert.ITL_HIGH, library.tpot_detail_chart: Alert.ITL_HIGH,   # the alert reads one of them
    slo_budget_chart: Alert.SLO_BURN_FAST, slo_burn_chart: Alert.SLO_BURN_FAST,
    slo_coverage_chart: Alert.SLO_COVERAGE_LOW,
    library.top_instances_by_latency: Alert.INSTANCE_LATENCY_HIGH,   # the straggler: one instance far slower
}


def signals_for(spec: EngineSpec, config, scope: tuple[Matcher, ...], window: str) -> SignalsBase:
    """Raw series by default; the recording rules' series with `dashboard.use_recording_rules`."""
    kind = RecordedSignals if config.dashboard.use_recording_rules else Signals
    return kind(spec, config, scope, window)


def build_dashboard(spec: EngineSpec, config) -> dict:
    scope = dashboard_scope(spec, config)
    panel_signals = signals_for(spec, config, scope, config.divergence.window)
    panels = []
    alerts = carried_alerts(spec, config)
    for title, _question, builders in ROWS:
        chosen = []
        for build in builders:
            panel = build(panel_signals, config)
            if panel is None:
                continue
            alert = WATCHED_BY.get(build)
            if alert in alerts and (url := runbook_url(config, alert)):
                # the fields Grafana's schema requires of a panel link (DashboardLink), besides title and url
                panel.links = [{"title": f"Runbook: {alert}", "url": url, "targetBlank": True, "type": "link",
                                "icon": "doc", "tooltip": f"What to check when {alert} fires"}]
            chosen.append(panel)
        if chosen:
            panels.append(library.builders.row(title))
            panels.extend(fit_row(chosen))
    dashboard = shell(
        f"LLM serving / {spec.title}", dashboard_uid(spec.id),
        (f"{spec.title} {spec.versions}: throughput beside ITL/TTFT {HEADLINE} and the preemption signal, "
         "so a KV-cache collapse is visible while throughput stays green. Generated by llmdash."),
        spec.id, panels, config,
        [core.DashboardLink(title="Fleet", type="dashboards", tags=[FLEET_TAG], asDropdown=False,
                            keepTime=True, includeVars=False, targetBlank=False)])
    annotation_signals = signals_for(spec, config, scope, config.divergence.window)
    return postprocess.to_grafana(dashboard, variables(spec, config), annotations(annotation_signals, config),
                                  panel_min_interval(config), panel_max_data_points(config))


def panel_min_interval(config) -> str:
    """Every query panel's Min interval: a fifth of the rate window (1m for 5m). A 5-minute rate drawn every
    15 s re-reads one window twenty times over; a point every fifth of the window keeps consecutive windows
    overlapping, so no minute goes unseen, at a quarter of the samples (what a `$__rate_interval` panel
    reads)."""
    return duration(seconds(config.divergence.window) / 5)


def panel_max_data_points(config) -> int:
    """Every query panel's Max data points: one rate window per point over a day (288 for 5m). Grafana steps a
    panel range / max data points when that is coarser than its Min interval: up to 4.8 h nothing changes, and over
    a day the 5-minute windows tile the day, each sample read once, where Grafana's default 1000 points (86 s
    apart) read every 5-minute window whole three times over (issue 31: over 24 h at 20 instances the raw vLLM
    dashboard read 0.74x the samples of vLLM's own overview, whose `$__rate_interval` windows shrink to its
    step, and took 1.5x its time)."""
    return int(seconds("1d") // seconds(config.divergence.window))


def shell(title: str, uid: str, description: str, tag: str, panels: list, config, links: list) -> core.Dashboard:
    """What every llmdash dashboard shares: tags, time, refresh, shared crosshair, and a link to every other
    llmdash dashboard, by tag, not uid, so the list follows whatever llmdash dashboards this Grafana has and
    never points at one that was not published."""
    return core.Dashboard(
        title=title, uid=uid, description=description, tags=sorted({TAG, DOMAIN_TAG, tag, *config.dashboard.tags}),
        panels=layout(panels), timezone="browser", refresh=config.dashboard.refresh,
        time=core.Time(config.dashboard.time_from, "now"), graphTooltip=1, editable=True,
        links=[core.DashboardLink(title="LLM serving", type="dashboards", tags=[TAG], asDropdown=True,
                                  keepTime=True, includeVars=False, targetBlank=False), *links])


def label_variables(config) -> tuple[str, ...]:
    """Variables besides model and instance: the fleet's grouping labels, then the config's extra ones."""
    return tuple(dict.fromkeys(tuple(config.fleet.group_by) + tuple(config.label_variables)))


def dashboard_scope(spec: EngineSpec, config) -> tuple[Matcher, ...]:
    """Config selectors (exact) plus the dashboard's variables (regex, All = .*)."""
    fixed = fixed_selectors(spec, config)
    variable = tuple(Matcher(label, "=~", f"${label}") for label in label_variables(config))
    instance = config.fleet.instance_label
    return fixed + variable + (Matcher(spec.model_label, "=~", "$model_name"), Matcher(instance, "=~", "$instance"))


def fit_row(panels: list) -> list:
    """Share the 24 columns among a row's charts (tiles keep their widths) so each row is full."""
    if all(isinstance(p, core.Stat) or isinstance(p, core.Text) for p in panels):
        total = sum(p.gridPos.w for p in panels)
        spare = 24 - total
        for p in panels[: max(spare, 0)]:
            p.gridPos = core.GridPos(h=p.gridPos.h, w=p.gridPos.w + 1, x=0, y=0)
        return panels
    width, extra = divmod(24, len(panels)) if len(panels) <= 4 else (6, 0)
    for i, p in enumerate(panels):
        p.gridPos = core.GridPos(h=p.gridPos.h, w=width + (1 if i < extra else 0), x=0, y=0)
    return panels


def layout(panels: list) -> list:
    """Place panels left to right in the 24-column grid, a row panel starting a new band."""
    x = y = band = 0
    for panel in panels:
        w, h = panel.gridPos.w, panel.gridPos.h
        if isinstance(panel, core.RowPanel) or x + w > 24:
            y += band
            x = band = 0
        panel.gridPos = core.GridPos(h=h, w=w, x=x, y=y)
        x += w
        band = max(band, h)
        if isinstance(panel, core.RowPanel):
            y += h
            x = band = 0
    return panels


def variables(spec: EngineSpec, config) -> list[dict]:
    """datasource, the fleet's grouping labels and the config's label variables, model_name and instance."""
    anchor = spec.signal(Role.RUNNING).sources[0]
    fixed = fixed_selectors(spec, config)
    return chained_variables(anchor.metric.name, fixed, [(v, v, v) for v in label_variables(config)] + [
        ("model_name", spec.model_label, "Model"), ("instance", config.fleet.instance_label, "Instance")])


def chained_variables(anchor: str, fixed: tuple[Matcher, ...], variables: list[tuple[str, str, str]]) -> list[dict]:
    """The datasource variable, then (name, label, title) query variables, each listing the label values
    of `anchor` under `fixed` and the variables before it; multi-valued, All by default."""
    # No `current`: Grafana then selects the default Prometheus data source; `current: {}` (what its
    # exporter writes) lacks the text and value the schema's VariableOption requires.
    result = [{
        "type": "datasource", "name": "datasource", "label": "Data source", "query": "prometheus",
        "hide": 0, "includeAll": False, "multi": False, "options": [], "refresh": 1, "regex": "",
    }]
    chain = list(fixed)
    for name, label, title in variables:
        matchers = ", ".join(m.render() for m in chain)
        query = f"label_values({anchor}{{{matchers}}}, {label})" if matchers else f"label_values({anchor}, {label})"
        result.append({
            "type": "query", "name": name, "label": title, "datasource": DATASOURCE,
            "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1},
            "definition": query, "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
            "options": [], "regex": "", "sort": 1, "hide": 0,
        })
        chain.append(Matcher(label, "=~", f"${name}"))
    return result


def annotations(sig: Signals, config) -> list[dict]:
    """Prometheus-query annotations in Grafana's stored form: Preemption (where measurable), firing
    llmdash alerts, and Divergence."""
    model = "{{" + sig.spec.model_label + "}}"
    step = config.divergence.annotation_step
    entries = []
    if sig.spec.has(Role.PREEMPTIONS):
        entries.append(annotation(
            Annotations.PREEMPTION, sig.preemption_active(), f"Preemption {model}", step, sig.spec.model_label))
    if config.logs.enabled and sig.spec.log_patterns:
        groups = " ".join("{{" + label + "}}" for label in config.fleet.group_by)
        entries.append(annotation(
            Annotations.LOG_PREEMPTION, sig.raw.logs.preemption_active(),
            f"Preemption in the {sig.spec.title} log {groups}".strip(), step, ",".join(config.fleet.group_by)))
    latency = INFO[sig.latency_role].title
    entries.append(annotation(Annotations.ALERTS_FIRING, firing_alerts((Matcher(ENGINE_LABEL, "=", sig.spec.id),
                                                                          Matcher(MODEL_LABEL, "=~", "$model_name")),
                                                                         config),
                              f"{{{{{ALERTNAME_LABEL}}}}} {{{{{MODEL_LABEL}}}}}", step,
                              f"{ALERTNAME_LABEL},{MODEL_LABEL}"))
    entries.append(annotation(
        Annotations.DIVERGENCE, sig.divergence(),
        f"Divergence {model}: {latency} ≥ {sig.latency_factor:g}x baseline, "
        f"tok/s within ±{config.divergence.throughput_band:.0%}", step, sig.spec.model_label,
        name=f"{Annotations.DIVERGENCE.name}: {latency} up, throughput flat"))
    return entries


def firing_alerts(scope: tuple[Matcher, ...], config, alert: str = ALERT_PATTERN) -> str:
    """One series per firing llmdash alert (`alert` a name, or the pattern of them all): `max by` the alert's own
    labels, so replicas of a ruler writing `ALERTS` into one store (told apart by their external labels) show
    and count it once."""
    op = "=~" if alert == ALERT_PATTERN else "="
    series = promql.selector(ALERTS_SERIES, (Matcher(ALERTNAME_LABEL, op, alert),
                                             Matcher(ALERTSTATE_LABEL, "=", "firing"), *scope))
    return f"max{promql.by(alert_labels(config))} ({series})"


def annotation(kind, expr: str, title: str, step: str, tag_keys: str, name: str | None = None) -> dict:
    """A Prometheus-query annotation in Grafana's stored form; `kind` (a `vocabulary.Annotations` entry) gives
    its name and colour."""
    return {
        "name": name or kind.name, "enable": True, "hide": False, "builtIn": 0, "datasource": DATASOURCE,
        "iconColor": kind.color, "target": {"expr": expr, "interval": step, "refId": "Anno"},
        "titleFormat": title, "tagKeys": tag_keys, "textFormat": "", "useValueForTime": False,
    }
