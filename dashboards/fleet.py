"""The fleet dashboard: every engine, cluster and model at once, from recorded series only.

It reads the recording rules' model- and instance-level series (the same names for every engine,
told apart by `llm_engine`), so one load costs a few series per model however many replicas serve
it. Each model and instance links down to its engine's dashboard with the model (and instance)
preselected and the time range kept.
"""

from __future__ import annotations

from grafanalib import core

from llmdash.dashboards import postprocess
from llmdash.dashboards.assemble import FLEET_TAG, chained_variables, fit_row, layout
from llmdash.panels import builders, promql
from llmdash.panels.promql import Matcher
from llmdash.panels.recorded import RecordedNames
from llmdash.panels.signals import ENGINE_LABEL, MODEL_LABEL

FLEET = "fleet"
UID = "llmdash-fleet"
ALERT_NAMES = "LLMServing.*"


def build_fleet_dashboard(config, recorded: frozenset[str]) -> dict:
    """`recorded`: the series the built engines' rules record; a column none of them records is left out."""
    names = RecordedNames(config)
    p = config.preemption
    groups = tuple(config.fleet.group_by)
    instance = config.fleet.instance_label
    model_labels = (ENGINE_LABEL, *groups, MODEL_LABEL)
    scope = (Matcher(ENGINE_LABEL, "=~", "$engine"), *(Matcher(g, "=~", f"${g}") for g in groups),
             Matcher(MODEL_LABEL, "=~", "$model_name"))

    def read(name: str) -> str:
        return promql.selector(name, scope)

    def by_model(reduce: str, name: str) -> str:
        return f"{reduce}{promql.by(model_labels)} ({read(name)})"

    firing = promql.selector("ALERTS", (Matcher("alertname", "=~", ALERT_NAMES), Matcher("alertstate", "=", "firing"),
                                        *scope))
    down = (f"/d/llmdash-${{__data.fields.{ENGINE_LABEL}}}?var-model_name=${{__data.fields.{MODEL_LABEL}}}"
            "&${__url_time_range}")
    legend = " ".join("{{" + label + "}}" for label in (MODEL_LABEL, ENGINE_LABEL, *groups))
    columns = [(names.throughput(config.divergence.window), "", "Output tok/s", "short"),
               (names.token_latency_p99(), "", "ITL p99", "s"),
               (names.token_latency_mean(), "", "Mean time per token", "s"),
               (names.quantile("ttft", 0.99), "", "TTFT p99", "s"),
               (names.preemptions_per_request(), "100 * ", "Preemptions per 100 requests", "short"),
               (names.gauge("kv_usage"), "", "KV-cache usage (max)", "percentunit")]
    models = builders.Table(
        "Models, worst first", (
            "One row per engine, group and model: output tokens/s, ITL p99 (per-request TPOT p99 where the engine "
            "has no ITL; the mean time per token, in its own column, where it has no latency histogram), TTFT p99, "
            "preemptions per 100 finished requests, the fullest replica's KV-cache usage and "
            "the llmdash alerts firing, sorted by preemptions. Throughput alone stays green through a KV-cache "
            "collapse; the latency and preemption columns beside it do not. Click a model to open its engine's "
            f"dashboard. Metrics (recorded by llmdash's rules): `{names.throughput(config.divergence.window)}`, "
            f"`{names.token_latency_p99()}`, `{names.token_latency_mean()}`, `{names.quantile('ttft', 0.99)}`, "
            f"`{names.preemptions_per_request()}`, "
            f"`{names.gauge('kv_usage')}`, `ALERTS`."),
        [(f"{scale}{read(name)}", title, unit) for name, scale, title, unit in columns if name in recorded]
        + [(f"count{promql.by(model_labels)} ({firing})", "Firing alerts", "short")],
        "Preemptions per 100 requests" if names.preemptions_per_request() in recorded else "Firing alerts",
        width=24, height=10,
        links=[{"title": "Open this model's dashboard", "url": down}], link_column=MODEL_LABEL)
    throughput = builders.timeseries(
        "Output tok/s by model", (
            "Generated tokens per second per model across the fleet. Compare with the latency panels beside it: "
            "a collapse keeps this flat while they climb. Metric: "
            f"`{names.throughput(config.divergence.window)}`."),
        [(by_model("sum", names.throughput(config.divergence.window)), legend)], "short")
    latency = builders.timeseries(
        "ITL p99 by model", (
            "Inter-token latency p99 per model (per-request TPOT p99 on engines without an ITL histogram), from "
            "the recorded bucket rates of all its replicas. Preempted requests stall, so this climbs while "
            f"throughput holds. Metric: `{names.token_latency_p99()}`."),
        [(by_model("max", names.token_latency_p99()), legend)], "s",
        builders.thresholds(config.thresholds.itl_p99_seconds))
    ttft = builders.timeseries(
        "TTFT p99 by model", (
            "Time-to-first-token p99 per model. A preempted request waits for its prompt to be recomputed, so its "
            f"first token is late. Metric: `{names.quantile('ttft', 0.99)}`."),
        [(by_model("max", names.quantile("ttft", 0.99)), legend)], "s",
        builders.thresholds(config.thresholds.ttft_p99_seconds))
    share = names.instance_preemption_share(p.short_window)
    instances = builders.Table(
        "Top instances by preemption share", (
            f"The twenty replicas losing the most work to preemption over the last {p.short_window}: preemptions per "
            "finished request (on engines with only a paused-requests gauge, the share of the time requests were "
            "paused). This is what the per-instance preemption page reads; one replica with a full KV cache shows "
            f"here while its model's totals look normal. Click an instance to open it. Metric: `{share}`."),
        [(f"topk(20, {read(share)})", "Preemption share", "percentunit")], "Preemption share", width=24,
        links=[{"title": "Open this instance", "url": f"{down}&var-instance=${{__data.fields.{instance}}}"}],
        link_column=instance)
    charts = [throughput] + [chart for chart, name in ((latency, names.token_latency_p99()),
                                                      (ttft, names.quantile("ttft", 0.99))) if name in recorded]
    panels = [builders.row("Models"), *fit_row([models]),
              builders.row("Throughput vs latency across the fleet"), *fit_row(charts)]
    if share in recorded:
        panels += [builders.row("Instances"), *fit_row([instances])]
    dashboard = core.Dashboard(
        title="LLM serving / Fleet", uid=UID,
        description=("Every engine, cluster and model served, from llmdash's recording rules: throughput beside "
                     "latency p99 and preemption, worst first, linking down to each engine's dashboard."),
        tags=sorted({"llmdash", "llm-serving", FLEET_TAG, *config.dashboard.tags}),
        panels=layout(panels), timezone="browser", refresh=config.dashboard.refresh,
        time=core.Time(config.dashboard.time_from, "now"), graphTooltip=1, editable=True,
        links=[core.DashboardLink(title="LLM serving", type="dashboards", tags=["llmdash"], asDropdown=True,
                                  keepTime=True, includeVars=False, targetBlank=False)],
    )
    return postprocess.to_grafana(dashboard, _variables(names, groups), _annotations(scope, config))


def _variables(names: RecordedNames, groups: tuple[str, ...]) -> list[dict]:
    return chained_variables(names.gauge("running"), (), [("engine", ENGINE_LABEL, "Engine"),
                                                          *((g, g, g) for g in groups), ("model_name", MODEL_LABEL, "Model")])


def _annotations(scope: tuple[Matcher, ...], config) -> list[dict]:
    pages = promql.selector("ALERTS", (Matcher("alertname", "=", "LLMServingPreemptionsHigh"),
                                       Matcher("alertstate", "=", "firing"), *scope))
    return [{
        "name": "Preemption pages", "enable": True, "hide": False, "builtIn": 0, "datasource": builders.DATASOURCE,
        "iconColor": "rgba(255, 152, 48, 1)",
        "target": {"expr": pages, "interval": config.divergence.annotation_step, "refId": "Anno"},
        "titleFormat": "{{model_name}} {{instance}}", "tagKeys": f"{ENGINE_LABEL},model_name", "textFormat": "",
        "useValueForTime": False,
    }]
