"""The fleet dashboard: every engine, cluster and model at once, from recorded series only.

It reads the recording rules' model- and instance-level series (the same names for every engine,
told apart by `llm_engine`), so one load costs a few series per model however many replicas serve
it. Each model and instance links down to its engine's dashboard with the model (and instance)
preselected and the time range kept.
"""

from __future__ import annotations

from typing import Mapping

from llmdash.dashboards import postprocess
from llmdash.dashboards.assemble import (annotation, chained_variables, firing_alerts, fit_row, panel_max_data_points,
                                        panel_min_interval, shell)
from llmdash.panels import builders, promql
from llmdash.panels.promql import Matcher
from llmdash.panels.recorded import Key, Level, Series
from llmdash.panels.slo_panels import fleet_slo_table
from llmdash.vocabulary import (ENGINE_LABEL, FLEET_TAG, FLEET_UID, HEADLINE, HEADLINE_QUANTILE, MODEL_LABEL, Alert,
                                Annotations, Role, dashboard_uid)


def build_fleet_dashboard(config, recorded: Mapping[Key, Series]) -> dict:
    """`recorded`: the series the built engines' rules record, by what they answer (every engine names a
    question's series alike); a column none of them records is left out."""
    d, p = config.divergence, config.preemption
    throughput_key = Key("throughput", window=d.window)
    token_key = Key("token_latency_quantile", window=d.window, quantile=HEADLINE_QUANTILE)
    mean_key = Key("mean_latency", window=d.window)
    ttft_key = Key("quantile", Role.TTFT, d.window, HEADLINE_QUANTILE)
    per_request_key = Key("preemptions_per_request", window=p.window)
    kv_key = Key(Role.KV_USAGE)
    share_key = Key("preemption_share", window=p.short_window, level=Level.INSTANCE)
    divergence_key = Key("divergence", window=d.window)

    def name(key: Key) -> str:
        return recorded[key].name if key in recorded else ""

    groups = tuple(config.fleet.group_by)
    instance = config.fleet.instance_label
    model_labels = (ENGINE_LABEL, *groups, MODEL_LABEL)
    scope = (Matcher(ENGINE_LABEL, "=~", "$engine"), *(Matcher(g, "=~", f"${g}") for g in groups),
             Matcher(MODEL_LABEL, "=~", "$model_name"))

    def read(key: Key) -> str:
        return promql.selector(recorded[key].name, scope)

    def by_model(reduce: str, key: Key) -> str:
        return f"{reduce}{promql.by(model_labels)} ({read(key)})"

    firing = firing_alerts(scope, config)
    down = (f"/d/{dashboard_uid(f'${{__data.fields.{ENGINE_LABEL}}}')}?var-model_name=${{__data.fields.{MODEL_LABEL}}}"
            "&${__url_time_range}")
    legend = " ".join("{{" + label + "}}" for label in (MODEL_LABEL, ENGINE_LABEL, *groups))
    columns = [(throughput_key, "", "Output tok/s", "short"),
               (token_key, "", f"ITL {HEADLINE}", "s"),
               (mean_key, "", "Mean time per token", "s"),
               (ttft_key, "", f"TTFT {HEADLINE}", "s"),
               (per_request_key, "100 * ", "Preemptions per 100 requests", "short"),
               (kv_key, "", "KV-cache usage (max)", "percentunit")]
    models = builders.Table(
        "Models, worst first", (
            f"One row per engine, group and model: output tokens/s, ITL {HEADLINE} (per-request TPOT {HEADLINE} where "
            "the engine has no ITL; the mean time per token, in its own column, where it has no latency histogram), "
            f"TTFT {HEADLINE}, "
            "preemptions per 100 finished requests, the fullest replica's KV-cache usage and "
            "the llmdash alerts firing, sorted by preemptions. Throughput alone stays green through a KV-cache "
            "collapse; the latency and preemption columns beside it do not. Click a model to open its engine's "
            "dashboard. Metrics (recorded by llmdash's rules): "
            + ", ".join(f"`{name(key)}`" for key, *_ in columns if key in recorded) + ", `ALERTS`."),
        [(f"{scale}{read(key)}", title, unit) for key, scale, title, unit in columns if key in recorded]
        + [(f"count{promql.by(model_labels)} ({firing})", "Firing alerts", "short")],
        "Preemptions per 100 requests" if per_request_key in recorded else "Firing alerts",
        width=24, height=10,
        data_links=[{"title": "Open this model's dashboard", "url": down}], link_column=MODEL_LABEL)
    throughput = builders.timeseries(
        "Output tok/s by model", (
            "Generated tokens per second per model across the fleet. Compare with the latency panels beside it: "
            "a collapse keeps this flat while they climb. Metric: "
            f"`{name(throughput_key)}`."),
        [(by_model("sum", throughput_key), legend)], "short")
    latency = builders.timeseries(
        f"ITL {HEADLINE} by model", (
            f"Inter-token latency {HEADLINE} per model (per-request TPOT {HEADLINE} on engines without an ITL "
            "histogram), from the recorded bucket rates of all its replicas. Preempted requests stall, so this "
            f"climbs while throughput holds. Metric: `{name(token_key)}`."),
        [(by_model("max", token_key), legend)] if token_key in recorded else [], "s",
        builders.thresholds(config.thresholds.itl_p99_seconds))
    ttft = builders.timeseries(
        f"TTFT {HEADLINE} by model", (
            f"Time-to-first-token {HEADLINE} per model. A preempted request waits for its prompt to be recomputed, "
            f"so its first token is late. Metric: `{name(ttft_key)}`."),
        [(by_model("max", ttft_key), legend)] if ttft_key in recorded else [], "s",
        builders.thresholds(config.thresholds.ttft_p99_seconds))
    instances = builders.Table(
        "Top instances by preemption share", (
            f"The twenty replicas losing the most work to preemption over the last {p.short_window}: preemptions per "
            "finished request (on engines with only a paused-requests gauge, the share of the time requests were "
            "paused). This is what the per-instance preemption page reads; one replica with a full KV cache shows "
            f"here while its model's totals look normal. Click an instance to open it. Metric: `{name(share_key)}`."),
        [(f"topk(20, {read(share_key)})", "Preemption share", "percentunit")] if share_key in recorded else [],
        "Preemption share", width=24,
        data_links=[{"title": "Open this instance", "url": f"{down}&var-instance=${{__data.fields.{instance}}}"}],
        link_column=instance)
    charts = [throughput] + [chart for chart, key in ((latency, token_key), (ttft, ttft_key)) if key in recorded]
    panels = [builders.row("Models"), *fit_row([models])]
    if (slo := fleet_slo_table(config, recorded, scope)) is not None:
        panels += [builders.row("SLOs"), *fit_row([slo])]
    panels += [builders.row("Throughput vs latency across the fleet"), *fit_row(charts)]
    if share_key in recorded:
        panels += [builders.row("Instances"), *fit_row([instances])]
    dashboard = shell(
        "LLM serving / Fleet", FLEET_UID,
        (f"Every engine, cluster and model served, from llmdash's recording rules: throughput beside latency "
         f"{HEADLINE} and preemption, worst first, linking down to each engine's dashboard."),
        FLEET_TAG, panels, config, [])
    divergence = (promql.as_flag(promql.selector(recorded[divergence_key].name, scope))
                  if divergence_key in recorded else None)
    return postprocess.to_grafana(dashboard, _variables(recorded[Key(Role.RUNNING)], groups),
                                  _annotations(scope, config, divergence), panel_min_interval(config),
                                  panel_max_data_points(config))


def _variables(running: Series, groups: tuple[str, ...]) -> list[dict]:
    return chained_variables(running.name, (), [("engine", ENGINE_LABEL, "Engine"), *((g, g, g) for g in groups),
                                                ("model_name", MODEL_LABEL, "Model")])


def _annotations(scope: tuple[Matcher, ...], config, divergence: str | None) -> list[dict]:
    """Preemption pages, and (from the recorded divergence series, where some engine records it) every model
    whose latency is up with throughput flat: the two marks an on-call looks for on the landing page."""
    pages = firing_alerts(scope, config, Alert.PREEMPTIONS_HIGH)
    step = config.divergence.annotation_step
    marks = [annotation(Annotations.PREEMPTION_PAGES, pages,
                        f"{{{{{MODEL_LABEL}}}}} {{{{{config.fleet.instance_label}}}}}",
                        step, f"{ENGINE_LABEL},{MODEL_LABEL}")]
    if divergence is not None:
        marks.append(annotation(Annotations.DIVERGENCE, divergence,
                                f"Divergence {{{{{MODEL_LABEL}}}}} on {{{{{ENGINE_LABEL}}}}}: "
                                "latency up, throughput flat",
                                step, f"{ENGINE_LABEL},{MODEL_LABEL}"))
    return marks
