"""Prometheus rule files per engine: the recording-rule layer, and alerts that page on preemption
(or on the latency/throughput divergence where an engine cannot count preemptions), never on
throughput; plus the Alertmanager inhibitions that keep one incident one page.

Expressions come from `llmdash.panels.signals`: the recording rules are raw `Signals` with
fixed windows, written under the names `llmdash.panels.recorded` gives them; the alerts are
the same questions asked of `RecordedSignals`, so an alert, an annotation and a recorded
dashboard compute a signal the same way. Alert labels are only those of the aggregation
(engine, model, the fleet's grouping labels and, for per-instance pages, the instance), so a
label never flips while an alert is pending.

`config` is the `llmdash.config.Config` object the caller passes in.
"""

from __future__ import annotations

import yaml

from llmdash.engines.model import EngineSpec
from llmdash.panels import promql
from llmdash.panels.promql import Matcher
from llmdash.panels.recorded import RecordedSignals
from llmdash.panels.signals import ENGINE_LABEL, INFO, MODEL_LABEL, Signals, fixed_selectors

PREEMPTIONS_HIGH = "LLMServingPreemptionsHigh"
DIVERGENCE = "LLMServingLatencyThroughputDivergence"
TTFT_HIGH = "LLMServingTTFTP99High"
ITL_HIGH = "LLMServingITLP99High"
SIGNAL_MISSING = "LLMServingSignalMissing"
LOG_PREEMPTIONS_HIGH = "LLMServingLogPreemptionsHigh"
ALERT_NAMES = (PREEMPTIONS_HIGH, DIVERGENCE, TTFT_HIGH, ITL_HIGH, SIGNAL_MISSING, LOG_PREEMPTIONS_HIGH)
RUNBOOK_DIR = "docs/runbooks"
MISSING_FOR = "15m"
SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's, where installed: the same text, faster
CAPPED_TAIL_SHARE = 0.01  # above the top bucket for more than 1 % of observations: the p99 is past the cap


def rule_scope(spec: EngineSpec, config) -> tuple[Matcher, ...]:
    """Selectors only (the catalog's defaults, the config's): with neither, rules select series by name alone."""
    return fixed_selectors(spec, config)


def recording_rules(spec: EngineSpec, config) -> list[tuple[str, str]]:
    """(record name, expression) of the recording-rule layer, in evaluation order (later rules read earlier ones)."""
    d, p = config.divergence, config.preemption
    raw = Signals(spec, config, rule_scope(spec, config), d.window)
    rec = RecordedSignals(spec, config, rule_scope(spec, config), d.window)
    names = rec.names
    model_name = lambda expr: _as_model_name(spec, expr)  # noqa: E731 - raw leaves get the fleet's model label
    baseline = lambda expr: f"quantile_over_time(0.5, {expr}[{d.baseline_window}] offset {d.baseline_offset})"  # noqa: E731
    records = [(names.throughput(d.window), model_name(raw.throughput(window=d.window))),
               (names.throughput_baseline(), baseline(rec.throughput()))]
    if spec.has("requests"):
        records.append((names.requests(), model_name(raw.requests(window=p.window))))
    for role in raw.latency_roles:
        records.append((names.buckets(role), model_name(raw.bucket_rates(role, window=d.window))))
        records += [(names.quantile(role, q), promql.quantile(q, rec.bucket_rates(role), raw.scale(role)))
                    for q in (0.99, 0.5)]
    token_role = raw.token_latency_role
    if token_role and raw.is_mean(token_role):
        records += [(name, model_name(expr)) for name, expr in zip(names.token_latency_mean_parts(),
                                                                   raw.mean_latency_parts(window=d.window))]
        records.append((names.token_latency_mean(), promql.divide(*rec.mean_latency_parts())))
    elif token_role:
        records.append((names.token_latency_p99(), rec.quantile(token_role, 0.99)))
    records.append((names.latency_baseline(raw.latency_role), baseline(rec.latency(raw.latency_role))))
    records += [(names.gauge(role), model_name(raw.gauge(role, reduce=reduce)))
                for role, reduce in (("kv_usage", "max"), ("waiting", "sum"), ("running", "sum")) if spec.has(role)]
    if spec.has("preemptions"):
        per_instance = raw.instance_group
        if raw.preemption_is_counter:
            records.append((names.preemptions(), model_name(raw.preemption_rate(window=p.window))))
            records.append((names.preemptions_per_request(), promql.divide(rec.preemption_rate(), rec.requests())))
            records.append((names.instance_preemptions(p.short_window),
                            model_name(raw.preemption_rate(per_instance, p.short_window))))
        else:
            records.append((names.paused(), model_name(raw.preemption_rate(window=p.window))))
        records += [(names.instance_preemption_share(w), model_name(raw.preemption_share(per_instance, w)))
                    for w in (p.short_window, p.long_window)]
    if raw.has_retracted_sides:
        records += [(names.retracted_tokens(side), model_name(raw.retracted_tokens(side, window=p.window)))
                    for side in ("input", "output")]
    return records


def recorded_series(spec: EngineSpec, config) -> frozenset[str]:
    """Every series name the recording rules write for this engine (what recorded dashboards may read)."""
    return frozenset(name for name, _ in recording_rules(spec, config))


def build_rules(spec: EngineSpec, config) -> dict:
    """The engine's rule file: one group, recording rules first, then the alerts composed from them."""
    rules: list[dict] = [{"record": name, "expr": expr, "labels": {ENGINE_LABEL: spec.id}}
                         for name, expr in recording_rules(spec, config)]
    sig = RecordedSignals(spec, config, rule_scope(spec, config), config.divergence.window)
    raw = Signals(spec, config, rule_scope(spec, config), config.divergence.window)
    rules += [alert for alert in (preemptions_high(sig, config), divergence(sig, config),
                                  latency_high(sig, config, "ttft"), latency_high(sig, config, "token"))
              if alert is not None]
    rules += signals_missing(raw, config)
    if (alert := log_preemptions_high(raw, config)) is not None:
        rules.append(alert)
    return {"groups": [{"name": f"llmdash-{spec.id}", "interval": config.rules.interval, "rules": rules}]}


def split_rules(models: dict[str, dict]) -> tuple[dict, dict]:
    """Engine -> rule file model, as two rule files: (every alert, every recording rule), one group per
    engine in each, named `<group>-alerts` and `<group>-records` so both files load into one Prometheus."""
    alerts, records = [], []
    for model in models.values():
        for group in model["groups"]:
            for kind, target in (("alert", alerts), ("record", records)):
                rules = [rule for rule in group["rules"] if kind in rule]
                if rules:
                    target.append({**group, "name": f"{group['name']}-{kind}s", "rules": rules})
    return {"groups": alerts}, {"groups": records}


def render_rules(model: dict) -> str:
    return "# Generated by llmdash from engines/*.yaml and llmdash.yaml; do not edit.\n" + \
        yaml.dump(model, Dumper=SAFE_DUMPER, sort_keys=False, width=10_000, allow_unicode=True)


def inhibit_rules(config) -> dict:
    """Alertmanager `inhibit_rules`: a preemption page silences the divergence and static-latency alerts
    of the same engine, model and fleet group, which describe the same incident from outside."""
    equal = [ENGINE_LABEL, MODEL_LABEL, *config.fleet.group_by]
    return {"inhibit_rules": [{
        "source_matchers": [f'alertname="{PREEMPTIONS_HIGH}"'],
        "target_matchers": [f'alertname=~"{DIVERGENCE}|{TTFT_HIGH}|{ITL_HIGH}"'],
        "equal": equal,
    }]}


def render_inhibit_rules(model: dict) -> str:
    return ("# Generated by llmdash from llmdash.yaml; merge into your Alertmanager configuration's "
            "inhibit_rules.\n") + yaml.dump(model, Dumper=SAFE_DUMPER, sort_keys=False, width=10_000)


def _with_model_name(spec: EngineSpec, expr: str) -> str:
    """Alerts always carry `model_name`, whatever the engine calls its model label."""
    if spec.model_label == MODEL_LABEL:
        return expr
    return f'label_replace({expr}, "{MODEL_LABEL}", "$1", "{spec.model_label}", "(.*)")'


def _as_model_name(spec: EngineSpec, expr: str) -> str:
    """Recorded series carry the model as `model_name` only (an empty replacement deletes a label), so every
    engine's recorded series have the same labels and the fleet dashboard reads them together."""
    if spec.model_label == MODEL_LABEL:
        return expr
    return f'label_replace({_with_model_name(spec, expr)}, "{spec.model_label}", "", "", "")'


def _where(config) -> str:
    """`model on Engine` plus the fleet's grouping labels, for summaries and descriptions."""
    groups = "".join(f"{{{{ with $labels.{label} }}}} {label}={{{{ . }}}}{{{{ end }}}}" for label in config.fleet.group_by)
    return "{{ $labels.model_name }}" + groups


def runbook_url(config, alertname: str) -> str | None:
    """The alert's runbook from `alerts.runbook_url_template`, or None when no template is set."""
    template = config.alerts.runbook_url_template
    return template.replace("{alertname}", alertname) if template else None


def alert_names(spec: EngineSpec, config) -> list[str]:
    """The alerts the engine's rule file carries (which depends on the signals its catalog offers)."""
    return [rule["alert"] for group in build_rules(spec, config)["groups"] for rule in group["rules"]
            if "alert" in rule]


def _alert(sig: Signals, config, name: str, expr: str, duration: str, severity: str,
           summary: str, description: str, labels: dict | None = None, keep_firing_for: str | None = None) -> dict:
    url = runbook_url(config, name)
    annotations = {"summary": summary, "description": description}
    if url:
        annotations["runbook_url"] = url
    else:
        annotations["description"] += f" Runbook: {RUNBOOK_DIR}/{name}.md in the llmdash repository."
    rule = {"alert": name, "expr": expr, "for": duration}
    if keep_firing_for:
        rule["keep_firing_for"] = keep_firing_for
    rule["labels"] = {ENGINE_LABEL: sig.spec.id, **(labels or {}), "severity": severity}
    rule["annotations"] = annotations
    return rule


def preemptions_high(sig: RecordedSignals, config) -> dict | None:
    """Per instance: one replica thrashing pages and is named; rare preemptions spread over a fleet do not."""
    if not sig.spec.has("preemptions"):
        return None
    p = config.preemption
    instance = "{{ $labels." + config.fleet.instance_label + " }}"
    short = sig.preemption_share(sig.instance_group, p.short_window)
    long = sig.preemption_share(sig.instance_group, p.long_window)
    if sig.preemption_is_counter:
        min_rate = p.min_events / promql.seconds(p.short_window)
        expr = (f"({short} >= {p.page_share:g}) and ({long} >= {p.confirm_share:g}) "
                f"and ({sig.instance_preemptions(p.short_window)} >= {min_rate:.6g})")
        what = (f"{{{{ $value | humanizePercentage }}}} as many preemptions as finished requests over {p.short_window} "
                f"(page at {p.page_share:.1%}, confirmed by {p.confirm_share:.1%} over {p.long_window} and at least "
                f"{p.min_events:g} preemptions)")
    else:
        expr = f"({short} >= {p.paused_share:g}) and ({long} >= {p.paused_confirm_share:g})"
        what = (f"requests were paused in {{{{ $value | humanizePercentage }}}} of the last {p.short_window} "
                f"(page at {p.paused_share:.0%}, confirmed by {p.paused_confirm_share:.0%} of the last {p.long_window})")
    side = (" On SGLang the *Retracted tokens/s* panel tells whether the recompute is prompt-side (long contexts "
            "evicted) or decode-side (generation redone)." if sig.has_retracted_sides else "")
    return _alert(
        sig, config, PREEMPTIONS_HIGH, expr, p.alert_for, "critical",
        f"{sig.spec.title} instance {instance} is preempting requests of {_where(config)}",
        f"{instance} serving {_where(config)} on {sig.spec.title}: {what}. Its KV cache is full: running requests "
        "lose their KV blocks and are recomputed later, so their users wait while throughput looks normal."
        f"{side} {sig.spec.note('preemptions')}".strip(),
        keep_firing_for=p.keep_firing_for)


def divergence(sig: RecordedSignals, config) -> dict:
    """A warning where the engine counts preemptions (the preemption page says more and inhibits it); the
    page itself where it cannot."""
    d = config.divergence
    latency = INFO[sig.latency_role].title
    direct = sig.spec.has("preemptions")
    return _alert(
        sig, config, DIVERGENCE, sig.divergence_condition(), d.alert_for, "warning" if direct else "critical",
        f"{latency} of {_where(config)} diverges from throughput on {sig.spec.title}",
        f"{_where(config)} on {sig.spec.title}: {latency} over {d.window} is "
        f"{{{{ $value | printf \"%.1f\" }}}}x its median over the {d.baseline_window} that ended {d.baseline_offset} ago, "
        f"while output tokens/s stays within ±{d.throughput_band:.0%} of its median over that same window. Latency rising with flat "
        "throughput is what KV-cache preemption looks like from outside; a load increase would raise throughput too."
        + (" Without preemptions (see LLMServingPreemptionsHigh) it can also be longer prompts or a slower "
           "workload, hence a warning." if direct else
           f" {sig.spec.title} exports no preemption metric, so this is the only direct alert for it."))


def latency_high(sig: RecordedSignals, config, which: str) -> dict | None:
    """Static p99 thresholds; where the threshold is at or above the histogram's top bound (Triton's TTFT
    tops out at 5 s), the share of observations above that bound instead, since a quantile cannot pass it."""
    if which == "ttft":
        role, name, levels = "ttft", TTFT_HIGH, config.thresholds.ttft_p99_seconds
    else:
        role = sig.token_latency_role
        name, levels = ITL_HIGH, config.thresholds.itl_p99_seconds
    if role is None or not sig.spec.has(role) or sig.is_mean(role):
        return None     # a p99 threshold compared with a mean would stay silent through most stalls
    info = INFO[role]
    w = config.divergence.window
    stand_in = " (per-request TPOT: this engine has no ITL histogram)" if which != "ttft" and role == "tpot" else ""
    floor = f"{sig.throughput(window=w)} >= {config.divergence.min_tokens_per_second:g}"
    top = sig.top_bound(role)
    if levels.critical >= top:
        expr = f"({sig.share_above_top_bucket(role)} > {CAPPED_TAIL_SHARE:g}) and ({floor})"
        what = (f"{{{{ $value | humanizePercentage }}}} of observations over {w} are above the histogram's top "
                f"bound of {top:g}s, so {info.title} is at least {top:g}s, at or above the {levels.critical:g}s threshold")
    else:
        expr = f"({sig.quantile(role, 0.99)} > {levels.critical:g}) and ({floor})"
        what = f"{info.title}{stand_in} over {w} is {{{{ $value | humanizeDuration }}}}, above the {levels.critical:g}s threshold"
    return _alert(
        sig, config, name, expr, config.rules.latency_alert_for, "warning",
        f"{info.title} of {_where(config)} is above {levels.critical:g}s on {sig.spec.title}",
        f"{_where(config)} on {sig.spec.title}: {what}. Check the preemption row first: a static latency threshold "
        "cannot tell KV-cache pressure from a heavier workload.")


def log_preemptions_high(sig: Signals, config) -> dict | None:
    """With `logs.enabled`: per mtail instance (one per engine replica), at least `min_events` preemptions
    logged over `short_window`, where no series of the same fleet group and `logs.replica_labels` exports
    the engine's preemption metric (there LLMServingPreemptionsHigh pages, normalised by work; a log
    alone cannot be, since it carries no request count)."""
    if not (config.logs.enabled and sig.spec.log_patterns):
        return None
    p = config.preemption
    logs = sig.logs
    instance = "{{ $labels." + config.fleet.instance_label + " }}"
    join = tuple(config.fleet.group_by) + tuple(config.logs.replica_labels)
    expr = f"{logs.preemptions(logs.instance_group + tuple(config.logs.replica_labels), p.short_window)} >= {p.min_events:g}"
    silenced = ""
    if sig.spec.has("preemptions"):
        expr = f"({expr}) unless on ({', '.join(join)}) {sig.exported('preemptions', join)}"
        silenced = (f" It stays silent where a series with the same {', '.join(join) or 'fleet'} labels exports "
                    f"{', '.join(f'`{s.series}`' for s in sig.sources('preemptions'))}: there "
                    f"{PREEMPTIONS_HIGH} pages instead.")
    groups = "".join(f"{{{{ with $labels.{label} }}}} {label}={{{{ . }}}}{{{{ end }}}}" for label in config.fleet.group_by)
    return _alert(
        sig, config, LOG_PREEMPTIONS_HIGH, expr, p.alert_for, "critical",
        f"{sig.spec.title} log read by {instance}{groups} reports preemptions",
        f"mtail at {instance}{groups} counted {{{{ $value | printf \"%.0f\" }}}} {sig.spec.title} preemptions "
        f"in the log over {p.short_window} (page at {p.min_events:g}). The KV cache is full: running requests "
        "lose their KV blocks and are recomputed later, so their users wait while throughput looks normal. "
        f"Counted by generated/mtail/{sig.spec.id}.mtail from lines the engine prints; the log names no model.{silenced}",
        keep_firing_for=p.keep_firing_for)


MISSING_ROLES = ("preemptions", "throughput", "itl", "tpot", "ttft", "token_latency_mean")


def signals_missing(sig: Signals, config) -> list[dict]:
    """Per replica that exports its engine's running-requests gauge but not a signal the alerts need, for
    15 minutes: after an upgrade renames a series, the page it feeds would otherwise go silent."""
    instance = "{{ $labels." + config.fleet.instance_label + " }}"
    identity = ", ".join(sig.instance_group)
    rules = []
    for role in MISSING_ROLES:
        if not sig.spec.has(role) or not _covers_every_version(sig, role):
            continue
        names = ", ".join(f"`{s.series}`" for s in sig.sources(role))
        rules.append(_alert(
            sig, config, SIGNAL_MISSING,
            _with_model_name(sig.spec, f"{sig.present('running')} unless on ({identity}) {sig.present(role)}"),
            MISSING_FOR, "warning",
            f"{sig.spec.title} instance {instance} exports no {role} series",
            f"{instance} serving {_where(config)} exports {sig.spec.title}'s running-requests gauge but none of "
            f"{names} for {MISSING_FOR}. Dashboards and alerts that read the {role} signal are blind for it: a "
            "renamed series after an upgrade, a disabled metrics option, or a relabelling rule that drops it.",
            labels={"signal": role}))
    return rules


def _covers_every_version(sig: Signals, role: str) -> bool:
    """Only roles that every supported version exports: an old release without the series is not a fault."""
    sources = sig.sources(role)
    if not sources:
        return False
    first = min(s.metric.since for s in sources)
    untils = [s.metric.exposed_until for s in sources]
    return first <= sig.spec.supported_from and (None in untils or max(untils) > sig.spec.supported_to)
