"""The panels, as pure functions of (signals, config) -> grafanalib panel, or None when the
engine does not offer what the panel needs. They never look at engine names: what an
engine offers is read from its spec's roles, and engine-specific caveats from its notes.
"""

from __future__ import annotations

from llmdash.panels import builders
from llmdash.panels.signals import INFO, MEAN_WHY, Signals
from llmdash.vocabulary import (HEADLINE, HEADLINE_QUANTILE, MEDIAN, MEDIAN_QUANTILE, PANEL_TITLES, Panel, Role,
                                percentile_words)

PREEMPTION_TITLES = {"counter": PANEL_TITLES[Panel.PREEMPTIONS], "gauge": PANEL_TITLES[Panel.PAUSED]}
DIVERGENCE_TITLE = PANEL_TITLES[Panel.DIVERGENCE]


def latency_levels(config, role: str):
    """The configured latency thresholds a role is judged by: TTFT's own, the per-token ones otherwise."""
    return config.thresholds.ttft_p99_seconds if role == Role.TTFT else config.thresholds.itl_p99_seconds


def metrics_used(sig: Signals, *roles: str) -> str:
    """'Metrics: `a`, `b` (fallback)' for the description, names exactly as scraped; "" where the engine exports
    none of `roles` (a "no metric" panel says so in its own words)."""
    names = []
    for role in roles:
        if not sig.spec.has(role):
            continue
        for i, source in enumerate(sig.spec.signal(role).sources):
            matchers = f"{{{source.match_text}}}" if source.match else ""
            kind = " histogram" if source.metric.type == "histogram" and not source.part else ""
            per = f" ÷ `{source.per.name}{matchers}`" if source.per else ""
            label = f"`{source.series}{matchers}`{kind}{per}" + (" (fallback for older versions)" if i else "")
            if label not in names:
                names.append(label)
    return "Metrics: " + ", ".join(names) + "." if names else ""


def describe(sig: Signals, what: str, why: str, *roles: str) -> str:
    notes = " ".join(sig.spec.note(r) for r in roles if sig.spec.note(r))
    return " ".join(part for part in (what, why, notes, metrics_used(sig, *roles)) if part)


def capped(sig: Signals, role: str) -> list[dict]:
    """Show a quantile at the histogram's top bound as "≥ bound": past it, histogram_quantile returns the bound."""
    top = sig.top_bound(role)
    return [{"type": "range", "options": {"from": top, "to": None, "result": {"text": f"≥ {top:g} s"}}}]


def preemption_steps(kind: str, config) -> list[dict]:
    """Counters: the configured rate levels; the paused gauge: red from the first paused request."""
    if kind == "counter":
        return builders.thresholds(config.thresholds.preemptions_per_second)
    return [{"color": "green", "value": None}, {"color": "red", "value": 1}]


def _model_legend(sig: Signals, suffix: str = "") -> str:
    """The model, then the fleet's grouping labels (empty where a series lacks them), then `suffix`."""
    return " ".join("{{" + label + "}}" for label in sig.legend_labels) + suffix


# ---- on-call tiles ---------------------------------------------------------------------------

def throughput_tile(sig: Signals, config):
    return builders.stat(
        PANEL_TITLES[Panel.THROUGHPUT_TILE], describe(
            sig, "Generated tokens per second across the selected models and instances.",
            "It stays flat through a KV-cache collapse, because preempted work is redone inside steps that "
            "still emit tokens; read it only together with the latency tiles beside it.", Role.THROUGHPUT),
        [(sig.throughput(group=()), "tokens/s")], INFO[Role.THROUGHPUT].unit,
        builders.thresholds(None, base="blue"), width=4)


def requests_tile(sig: Signals, config):
    if not sig.spec.has(Role.REQUESTS):
        return builders.text(
            PANEL_TITLES[Panel.REQUESTS], describe(sig, "This engine counts no finished requests.",
                                   "Throughput and the latency panels still show a collapse.", Role.REQUESTS),
            "**No request counter.** Watch *Output tok/s* and the latency tiles.", width=3)
    return builders.stat(
        PANEL_TITLES[Panel.REQUESTS], describe(sig, "Finished requests per second.",
                               "Like throughput, it does not drop when requests are being preempted.", Role.REQUESTS),
        [(sig.requests(group=()), "requests/s")], "reqps", builders.thresholds(None, base="blue"), width=3)


def latency_tile(role: str):
    def tile(sig: Signals, config):
        if not sig.spec.has(role):
            return None
        info = INFO[role]
        return builders.stat(
            info.title, describe(
                sig, f"{percentile_words(HEADLINE_QUANTILE)} of {info.meaning} over all selected series.",
                "Preempted requests wait while their KV cache is recomputed, so this climbs while throughput holds.",
                role),
            [(sig.quantile(role, HEADLINE_QUANTILE, group=()), HEADLINE)], info.unit,
            builders.thresholds(latency_levels(config, role)), width=3, mappings=capped(sig, role))
    return tile


def token_latency_tile(sig: Signals, config):
    """ITL where the engine has it, else per-request TPOT, else the mean time per token."""
    role = sig.token_latency_role
    if role and sig.is_mean(role):
        return builders.stat(
            INFO[role].title, describe(
                sig, f"Mean {INFO[role].meaning} over all selected series.",
                f"{MEAN_WHY} It has no threshold colours: the ITL {HEADLINE} thresholds do not apply to a mean.", role),
            [(sig.mean_latency(group=()), "mean")], INFO[role].unit, builders.thresholds(None, base="blue"), width=3)
    return latency_tile(role)(sig, config) if role else None


def preemption_tile(sig: Signals, config):
    if not sig.spec.has(Role.PREEMPTIONS):
        return builders.text(
            PANEL_TITLES[Panel.NO_PREEMPTION_METRIC], describe(sig, "This engine exports no preemption metric.",
                                    "Where it preempts, the only trace is latency rising while throughput "
                                    "holds, shown in the Divergence panel and annotation.", Role.PREEMPTIONS),
            f"**No preemption metric.** Watch *{DIVERGENCE_TITLE}* in the Preemption row and the "
            "*Divergence* annotation.", width=3)
    kind = sig.spec.signal(Role.PREEMPTIONS).sources[0].kind
    # A gauge of the latest iteration is caught by few scrapes: over the chart's short interval the
    # tile reads 0 through most of a collapse, so it reads the Preemption annotation's window.
    p = config.preemption
    window = None if kind == "counter" else p.window
    what = ("Requests preempted per second (KV blocks freed, work recomputed later)." if kind == "counter"
            else "Most requests paused (KV blocks freed, recomputed later) in one engine iteration "
                 f"within the last {p.window}, the window the Preemption annotation uses (the page reads the share "
                 f"of the last {p.short_window} in which requests were paused, confirmed over {p.long_window}).")
    return builders.stat(
        PREEMPTION_TITLES[kind], describe(sig, what, "Any sustained value means users are waiting on recompute.",
                                          Role.PREEMPTIONS),
        [(sig.preemption_rate(group=(), window=window), "preemptions")], "short", preemption_steps(kind, config),
        width=3, decimals=2)


def kv_usage_tile(sig: Signals, config):
    if not sig.spec.has(Role.KV_USAGE):
        return builders.text(
            PANEL_TITLES[Panel.KV_USAGE], describe(sig, "This engine exports no KV-cache usage.",
                                       "Without it, queue growth and latency are the only signs of KV pressure.",
                                       Role.KV_USAGE),
            "**No KV-cache metric.** Watch *Waiting requests* and the latency tiles.", width=3)
    return builders.stat(
        PANEL_TITLES[Panel.KV_USAGE], describe(sig, "KV-cache usage of the fullest selected instance.",
                                   "Near 100 % the scheduler must preempt or stop admitting work.", Role.KV_USAGE),
        [(sig.kv_usage(group=()), "max")], "percentunit", builders.thresholds(config.thresholds.kv_usage), width=3)


def waiting_tile(sig: Signals, config):
    return builders.stat(
        PANEL_TITLES[Panel.WAITING], describe(sig, "Requests queued for the engine.",
                                     "Preempted requests go back to this queue, so it grows during a collapse.",
                                     Role.WAITING),
        [(sig.waiting(group=()), "waiting")], "short", builders.thresholds(config.thresholds.waiting_requests),
        width=2)


# ---- throughput vs latency -------------------------------------------------------------------

def throughput_chart(sig: Signals, config):
    return builders.timeseries(
        INFO[Role.THROUGHPUT].title, describe(
            sig, "Generated tokens per second, per model.",
            "Compare with the latency panels on the same row: a KV-cache collapse keeps this line flat while "
            "they climb.", Role.THROUGHPUT),
        [(sig.throughput(), _model_legend(sig))], INFO[Role.THROUGHPUT].unit)


def latency_chart(role: str, width: int = 8):
    def chart(sig: Signals, config):
        if not sig.spec.has(role):
            return None
        info = INFO[role]
        steps = builders.thresholds(latency_levels(config, role))
        return builders.timeseries(
            info.title, describe(
                sig, f"{percentile_words(HEADLINE_QUANTILE).split()[0]} and {percentile_words(MEDIAN_QUANTILE)} of "
                f"{info.meaning}, per model.",
                "A preempted request stalls until it is rescheduled and recomputed; the stall lands in the tail, "
                f"so {HEADLINE} moves first while {MEDIAN} and throughput barely change.", role),
            [(sig.quantile(role, HEADLINE_QUANTILE), _model_legend(sig, f" {HEADLINE}")),
             (sig.quantile(role, MEDIAN_QUANTILE), _model_legend(sig, f" {MEDIAN}"))], info.unit, steps, width=width,
            mappings=capped(sig, role))
    return chart


def token_latency_chart(sig: Signals, config):
    """ITL where the engine has it, else per-request TPOT, else the mean time per token: the finer
    latency beside throughput."""
    role = sig.token_latency_role
    if role and sig.is_mean(role):
        return builders.timeseries(
            INFO[role].title, describe(
                sig, f"Mean {INFO[role].meaning}, per model: decode seconds divided by generated tokens.",
                f"A preempted or stalled request's wait is added to its decode time. {MEAN_WHY}", role),
            [(sig.mean_latency(), _model_legend(sig, " mean"))], INFO[role].unit, width=8)
    return latency_chart(role)(sig, config) if role else None


# ---- preemption row --------------------------------------------------------------------------

def preemption_chart(sig: Signals, config):
    if not sig.spec.has(Role.PREEMPTIONS):
        return None
    kind = sig.spec.signal(Role.PREEMPTIONS).sources[0].kind
    what = ("Preemptions per second, per model." if kind == "counter" else
            "Most requests paused in one iteration within each interval, per model (the engine keeps no "
            "count, only a gauge of its latest iteration, so the panel takes its maximum over the interval).")
    steps = preemption_steps(kind, config)
    return builders.timeseries(
        PREEMPTION_TITLES[kind], describe(
            sig, what, "This is the direct signal of KV-cache exhaustion: each event throws away a request's "
            "KV cache and charges its recompute to that request's latency.", Role.PREEMPTIONS),
        [(sig.preemption_rate(), _model_legend(sig))], "short", steps)


def log_preemption_chart(sig: Signals, config):
    """With `logs.enabled`, the preemptions mtail counts in the engine's log, beside the metric's panel."""
    if not (config.logs.enabled and sig.spec.log_patterns):
        return None
    lines = "; ".join(f"{p.name} ({p.versions})" for p in sig.spec.log_patterns)
    legend = " ".join(["log"] + ["{{" + label + "}}" for label in config.fleet.group_by])
    return builders.timeseries(
        PANEL_TITLES[Panel.LOG_PREEMPTIONS], (
            f"Preemptions per second as {sig.spec.title} logs them, counted by mtail with "
            f"generated/mtail/{sig.spec.id}.mtail, per fleet group (the log line names no model). It fills "
            "where the engine exports no preemption metric (older versions, metrics disabled). "
            f"Lines counted: {lines}. Metric: `llmdash_log_preemptions_total{{llm_engine=\"{sig.spec.id}\"}}`."),
        [(sig.logs.preemption_rate(), legend)], "short", builders.thresholds(config.thresholds.preemptions_per_second))


def preemptions_per_request_chart(sig: Signals, config):
    if not sig.spec.has(Role.PREEMPTIONS_PER_REQUEST):
        return None
    return builders.timeseries(
        PANEL_TITLES[Panel.PREEMPTIONS_PER_REQUEST], describe(
            sig, "Mean number of preemptions suffered by each finished request, per model.",
            "Above zero, some users paid for recompute. The mean is charted because the histogram's first "
            'bucket (le="1") holds never-preempted and once-preempted requests together, so the share of '
            "preempted requests cannot be read from it.", Role.PREEMPTIONS_PER_REQUEST),
        [(sig.raw.preemptions_per_request(), _model_legend(sig.raw))], "short")


def retracted_tokens_chart(sig: Signals, config):
    if not (sig.spec.has(Role.RETRACTED_INPUT_TOKENS) and sig.spec.has(Role.RETRACTED_OUTPUT_TOKENS)):
        return None
    return builders.timeseries(
        PANEL_TITLES[Panel.RETRACTED_TOKENS], describe(
            sig, "Tokens thrown out of the KV cache by retraction per second, split into prompt tokens and "
            "already generated tokens, next to output tokens/s for scale.",
            "Both have to be prefilled again: a large prompt share means long contexts are being evicted, a large "
            "generated share means decode progress is being redone.",
            Role.RETRACTED_INPUT_TOKENS, Role.RETRACTED_OUTPUT_TOKENS, Role.THROUGHPUT),
        [(sig.retracted_tokens("input"), _model_legend(sig, " prompt")),
         (sig.retracted_tokens("output"), _model_legend(sig, " generated")),
         (sig.throughput(), _model_legend(sig, " output tok/s"))], INFO[Role.THROUGHPUT].unit)


def kv_usage_chart(sig: Signals, config):
    if not sig.spec.has(Role.KV_USAGE):
        return None
    return builders.timeseries(
        PANEL_TITLES[Panel.KV_USAGE], describe(
            sig, "KV-cache usage of the fullest instance, per model.",
            "Preemption starts when this reaches the top and a running request cannot get a new block.", Role.KV_USAGE),
        [(sig.kv_usage(), _model_legend(sig))], "percentunit", builders.thresholds(config.thresholds.kv_usage),
        soft_max=1)


def divergence_chart(sig: Signals, config):
    d = config.divergence
    role = sig.latency_role
    return builders.timeseries(
        DIVERGENCE_TITLE, describe(
            sig, f"{INFO[role].title} over {d.window} divided by its baseline (the median of that value over the "
            f"{d.baseline_window} that ended {d.baseline_offset} ago, sampled every {d.baseline_resolution}), and "
            f"output tok/s over {d.window} divided by its median over the same {d.baseline_window}, per model. The "
            "baselines are offset so that an incident does not become its own baseline while it lasts.",
            f"The indirect preemption signal: latency at {sig.latency_factor:g}x its baseline while throughput stays "
            f"within ±{d.throughput_band:.0%} of its own is what a KV-cache collapse looks like, and it is what the "
            "Divergence annotation marks. A load increase moves both lines up together."
            + (f" {MEAN_WHY}" if sig.is_mean(role) else ""), role, Role.THROUGHPUT),
        [(sig.latency_vs_baseline(), _model_legend(sig, f" {INFO[role].title} ÷ baseline")),
         (sig.throughput_vs_baseline(), _model_legend(sig, " tok/s ÷ baseline"))], "suffix:×",
        [{"color": "green", "value": None}, {"color": "red", "value": sig.latency_factor}])


# ---- ITL vs TPOT -----------------------------------------------------------------------------

ITL_VS_TPOT_WHY = ("A preemption stall is one long gap. ITL samples every gap, so that gap is one sample among "
                   f"the few slowest and lifts ITL {HEADLINE} by its full length; TPOT averages the gap over all of "
                   f"the request's tokens, so the same stall moves TPOT {HEADLINE} by a fraction of it.")


def itl_detail_chart(sig: Signals, config):
    if not (sig.spec.has(Role.ITL) and sig.spec.has(Role.TPOT)):
        return None
    return latency_chart(Role.ITL, width=12)(sig, config)


def tpot_detail_chart(sig: Signals, config):
    if not (sig.spec.has(Role.ITL) and sig.spec.has(Role.TPOT)):
        return None
    panel = latency_chart(Role.TPOT, width=12)(sig, config)
    panel.description = f"{ITL_VS_TPOT_WHY} {panel.description}"
    return panel


# ---- queue and SLO ---------------------------------------------------------------------------

def queue_chart(sig: Signals, config):
    return builders.timeseries(
        PANEL_TITLES[Panel.QUEUE], describe(
            sig, "Requests in the running batch and in the queue, per model.",
            "Preemption moves requests from running back to waiting; a queue that grows while the running batch "
            "shrinks or stalls is KV pressure, not only more traffic.", Role.RUNNING, Role.WAITING),
        [(sig.running(), _model_legend(sig, " running")), (sig.waiting(), _model_legend(sig, " waiting"))],
        "short", builders.thresholds(config.thresholds.waiting_requests), width=24)


def slo_chart(role: str, target_name: str):
    def chart(sig: Signals, config):
        if not sig.spec.has(role):
            return None
        target = sig.slo_target(target_name)
        if target is None:
            return None
        info = INFO[role]
        return builders.timeseries(
            f"{info.title.split()[0]} under {target:g}s", describe(
                sig, f"Share of {info.meaning} observations at or under {target:g} s, per model, read from the "
                "histogram bucket whose bound is the target (so the target must be a bucket bound).",
                "Throughput SLOs stay green through preemption; this share falls as soon as users wait.", role),
            [(sig.slo_share(role, target), _model_legend(sig))], "percentunit",
            [{"color": "red", "value": None}, {"color": "orange", "value": 0.9}, {"color": "green", "value": 0.99}],
            width=12, soft_max=1)
    return chart


def slo_latency_chart(sig: Signals, config):
    """Needs a histogram bucket at the target: none where the only token latency is a mean."""
    role = sig.token_latency_role
    return slo_chart(role, "itl_seconds")(sig, config) if role and not sig.is_mean(role) else None


# ---- instance drill-down -----------------------------------------------------------------------

def _instance_link(sig: Signals) -> list[dict]:
    """Narrow this dashboard to the clicked instance, keeping the time range and other variables."""
    label = sig.config.fleet.instance_label
    return [{"title": "Show only this instance", "url": f"/d/${{__dashboard.uid}}?${{__url_time_range}}"
             f"&${{model_name:queryparam}}&var-instance=${{__data.fields.{label}}}"}]


def top_instances_by_preemption(sig: Signals, config):
    """Raw per-instance series for the selected instances only, as one instant query: cheap at any fleet size."""
    if not sig.spec.has(Role.PREEMPTIONS):
        return None
    sig = sig.raw
    counter = sig.preemption_is_counter
    group = sig.instance_group
    expr = sig.preemption_share(group) if counter else sig.preemption_rate(group)
    title, unit = ("Preemptions per finished request", "percentunit") if counter else ("Paused requests (max)", "short")
    return builders.Table(
        PANEL_TITLES[Panel.TOP_INSTANCES_BY_PREEMPTION], describe(
            sig, f"The ten instances with the most preemption right now: {title.lower()} over the last {sig.window}, "
            "per instance, read from the raw series of the selected instances.",
            "Preemption is a per-replica failure: one replica with a full KV cache thrashes while the model's "
            "totals look normal. Click an instance to narrow the dashboard to it.", Role.PREEMPTIONS, Role.REQUESTS),
        [(f"topk(10, {expr})", title, unit)], title, hidden=("llm_engine",), data_links=_instance_link(sig),
        link_column=config.fleet.instance_label)


def top_instances_by_latency(sig: Signals, config):
    sig = sig.raw
    role = sig.token_latency_role or Role.TTFT
    if not sig.spec.has(role):
        return None
    info = INFO[role]
    statistic = "mean" if sig.is_mean(role) else HEADLINE
    return builders.Table(
        f"Top instances by {info.title}", describe(
            sig, f"The ten instances with the highest {info.meaning} {statistic} right now, per instance, read from "
            "the raw series of the selected instances.",
            f"A stalled replica hides in a model-wide {statistic} that mixes it with healthy ones; here it is named.",
            role),
        [(f"topk(10, {sig.latency(role, sig.instance_group)})", info.title, info.unit)], info.title,
        data_links=_instance_link(sig), link_column=config.fleet.instance_label)
