"""Prometheus rule files per engine: the recording-rule layer, and alerts that page on preemption
(or on the latency/throughput divergence where an engine cannot count preemptions), never on
throughput; plus the Alertmanager inhibitions that keep one incident one page.

Expressions come from `llmdash.panels.signals`: the recording rules are raw `Signals` with
fixed windows, written under the names `llmdash.panels.recorded` gives them; the alerts are
the same questions asked of `RecordedSignals`, so an alert, an annotation and a recorded
dashboard compute a signal the same way (on a ruler whose recorded series come back an evaluation
late, vmalert, the page asks the recording rules' own raw-series expressions instead). Alert labels
are only those of the aggregation (engine, model, the fleet's grouping labels and, for per-instance
pages, the instance), so a label never flips while an alert is pending. Which alerts a file holds, their
severities, labels, runbook URLs and inhibitions are `llmdash.rules.identity`'s (what dashboards read).

`config` is the `llmdash.config.Config` object the caller passes in.
"""

from __future__ import annotations

import re

import yaml

from llmdash.durations import duration, seconds
from llmdash.engines.model import EngineSpec
from llmdash.panels import promql
from llmdash.panels.recorded import RecordedSignals, recording_layer
from llmdash.panels.signals import INFO, Signals, SignalsBase
from llmdash.rules.identity import (CRITICAL, INHIBITED, SIGNAL_LABEL, carries, latency_alert_role, missing_roles,
                                    rule_scope, runbook_url, severity)
from llmdash.rules.slo import slo_alerts
from llmdash.rules.targets import RULERS, for_target
from llmdash.vocabulary import (ALERTNAME_LABEL, ALERTS_SERIES, ALERTSTATE_LABEL, ENGINE_LABEL, HEADLINE_QUANTILE,
                                MODEL_LABEL, RUNBOOK_DIR, SEVERITY_LABEL, UID_PREFIX, Alert, Role)

MISSING_FOR = "15m"
RECORD_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*(?::[a-zA-Z0-9_]+)+")   # a recorded name as written
SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's, where installed: the same text, faster
CAPPED_TAIL_SHARE = 0.01  # above the top bucket for more than 1 % of observations: the p99 is past the cap
OUTSIDE_PAGE_STEP = "1m"  # how often a paged unit's short-window share is read outside its page (a rule interval)
# The second group: what a minute's delay does not hurt, evaluated once a minute: every rule that is not a page
# (severity critical) nor read by one (`by_urgency`). It reads the first group's series (evaluated at least as often)
# and its own earlier rules; no rule of the first group reads it.
SLOW_SUFFIX, SLOW_INTERVAL = "-slow", "1m"
PAGE_SEVERITY = CRITICAL
SERVER_INTERVAL = "evaluation_interval of the server (docs/prometheus.yml ships 15s)"   # a group without `interval`


def recorded_series(spec: EngineSpec, config) -> frozenset[str]:
    """Every series name the recording rules write for this engine (what recorded dashboards may read)."""
    return frozenset(series.name for series in recording_layer(spec, config).series)


def build_rules(spec: EngineSpec, config) -> dict:
    """The engine's rule file: recording rules first, then the alerts composed from them, in two groups by how
    soon their answer is needed (`by_urgency`): the pages and everything they read at the server's interval, and
    everything else once a minute (`SLOW_INTERVAL`)."""
    layer = recording_layer(spec, config, RULERS[config.rules.target].fresh_recordings)
    rules: list[dict] = [{"record": series.name, "expr": series.expr,
                          "labels": {ENGINE_LABEL: spec.id, **dict(series.labels)}} for series in layer.series]
    sig = RecordedSignals(spec, config, rule_scope(spec, config), config.divergence.window, layer)
    raw = Signals(spec, config, rule_scope(spec, config), config.divergence.window)
    rules += [alert for alert in (preemptions_high(sig, config), preemptions_chronic(sig, config),
                                  divergence(sig, config), latency_high(sig, config, Alert.TTFT_HIGH),
                                  latency_high(sig, config, Alert.ITL_HIGH), instance_latency_high(sig, config))
              if alert is not None]
    rules += [_alert(sig, config, **fields) for fields in slo_alerts(sig, config, _where(config))]
    if spec.has(Role.PREEMPTIONS):
        rules = [wait_for_the_page(rule, spec, config) if rule.get("alert") in INHIBITED else rule for rule in rules]
    rules += signals_missing(raw, config)
    if (alert := log_preemptions_high(raw, config)) is not None:
        rules.append(alert)
    fast, slow = by_urgency(rules)
    groups = [rule_group(f"{UID_PREFIX}{spec.id}", config, fast)]
    if slow:
        groups.append(rule_group(f"{UID_PREFIX}{spec.id}{SLOW_SUFFIX}", config, slow, SLOW_INTERVAL))
    return for_target({"groups": groups}, config.rules.target)


def by_urgency(rules: list[dict]) -> tuple[list[dict], list[dict]]:
    """(fast, slow), each in the rules' order: the pages (severity critical) and every recording rule a fast rule
    reads, however indirectly, to be evaluated at the server's interval; the rest (warnings, tickets, what only they
    and the dashboards read) can wait a minute. Why: at a thousand replicas the latency bucket rates the warnings
    and dashboards read cost more than an evaluation interval can spare, and no page waits for them. A rule reads
    only rules above it, so one pass from the end finds every input of a fast rule before reaching it."""
    recorded = {rule["record"] for rule in rules if "record" in rule}
    needed: set[str] = set()
    fast: list[int] = []
    for i in range(len(rules) - 1, -1, -1):
        rule = rules[i]
        if rule.get("record") in needed or rule.get("labels", {}).get(SEVERITY_LABEL) == PAGE_SEVERITY:
            fast.append(i)
            needed |= recorded & set(RECORD_NAME.findall(rule["expr"]))
    kept = set(fast)
    return [rules[i] for i in reversed(fast)], [rule for i, rule in enumerate(rules) if i not in kept]


def rule_group(name: str, config, rules: list[dict], at_least: str | None = None) -> dict:
    """One rule group; its `interval` only where the config sets one, else the server's evaluation_interval;
    pinned where SLO objectives exist, since their counts add what the counters gained since the evaluation
    one interval ago (`llmdash.panels.recorded.slo_step`). `at_least`: the group's interval is never shorter
    (the slow group: once a minute, or as often as the others where they are pinned to longer)."""
    pinned = config.rules.interval or (config.rules.evaluation_interval if config.slo.objectives else None)
    if at_least is not None:
        pinned = max(at_least, pinned or at_least, key=seconds)
    interval = {"interval": pinned} if pinned else {}
    return {"name": name, **interval, "rules": rules}


def split_rules(models: dict[str, dict]) -> tuple[dict, dict]:
    """Engine -> rule file model, as two rule files: (every alert, every recording rule), one group per
    engine and group of its file in each (its interval kept), named `<group>-alerts` and `<group>-records` so
    both files load into one Prometheus."""
    alerts, records = [], []
    for model in models.values():
        for group in model["groups"]:
            for kind, target in (("alert", alerts), ("record", records)):
                rules = [rule for rule in group["rules"] if kind in rule]
                if rules:
                    target.append({**group, "name": f"{group['name']}-{kind}s", "rules": rules})
    return {"groups": alerts}, {"groups": records}


def render_rules(model: dict) -> str:
    """The rule file's text, headed by how often each group is evaluated."""
    pinned = "; ".join(f"{group['name']} every {group['interval']}" for group in model["groups"] if "interval" in group)
    every = f"# Groups are evaluated every {SERVER_INTERVAL}{', except ' + pinned if pinned else ''}.\n"
    return "# Generated by llmdash from engines/*.yaml and llmdash.yaml; do not edit.\n" + every + \
        yaml.dump(model, Dumper=SAFE_DUMPER, sort_keys=False, width=10_000, allow_unicode=True)


def wait_for_the_page(rule: dict, spec: EngineSpec, config) -> dict:
    """An alert the preemption page inhibits, made to wait for the page's decision: Alertmanager cannot recall a
    warning it already sent, so in a collapse the warning must not reach a receiver before the page does.

    It holds no series while the page is pending for the same model and fleet group (read from `ALERTS`, which
    the ruler writes for the page, so its `for` restarts there); the divergence warning, whose latency often
    rises a few minutes before the first preemption, also waits the page's own decision time (its short window
    and `for`) on top of its `for`. Once the page fires, the inhibition silences it."""
    where = ", ".join((ENGINE_LABEL, *config.fleet.group_by, MODEL_LABEL))
    pending = (f'{ALERTS_SERIES}{{{ALERTNAME_LABEL}="{Alert.PREEMPTIONS_HIGH}", {ALERTSTATE_LABEL}="pending", '
               f'{ENGINE_LABEL}="{spec.id}"}}')
    waited = {**rule, "expr": f"({rule['expr']}) unless on ({where}) {pending}"}
    if rule["alert"] == Alert.DIVERGENCE:
        p = config.preemption
        total = seconds(config.divergence.alert_for) + seconds(p.short_window) + seconds(p.alert_for)
        waited["for"] = f"{total / 60:g}m" if total % 60 == 0 else duration(total)
    return waited


def render_inhibit_rules(model: dict) -> str:
    return ("# Generated by llmdash from llmdash.yaml; merge into your Alertmanager configuration's "
            "inhibit_rules.\n") + yaml.dump(model, Dumper=SAFE_DUMPER, sort_keys=False, width=10_000)


def _groups(config) -> str:
    """The fleet's grouping labels of the alert's series, for summaries and descriptions (each only where set)."""
    return "".join(f"{{{{ with $labels.{label} }}}} {label}={{{{ . }}}}{{{{ end }}}}"
                   for label in config.fleet.group_by)


def _where(config) -> str:
    """`model on Engine` plus the fleet's grouping labels, for summaries and descriptions."""
    return f"{{{{ $labels.{MODEL_LABEL} }}}}" + _groups(config)


def _instance(config) -> str:
    """The alert's instance, for summaries and descriptions."""
    return "{{ $labels." + config.fleet.instance_label + " }}"


def _alert(sig: SignalsBase, config, name: Alert, expr: str, duration: str,
           summary: str, description: str, labels: dict | None = None, keep_firing_for: str | None = None) -> dict:
    url = runbook_url(config, name)
    annotations = {"summary": summary, "description": description}
    if url:
        annotations["runbook_url"] = url
    else:
        annotations["description"] += f" Runbook: {RUNBOOK_DIR}/{name}.md in the llmdash repository."
    rule = {"alert": str(name), "expr": expr, "for": duration}
    if keep_firing_for:
        rule["keep_firing_for"] = keep_firing_for
    rule["labels"] = {ENGINE_LABEL: sig.spec.id, **(labels or {}), SEVERITY_LABEL: severity(name, sig.spec)}
    rule["annotations"] = annotations
    return rule


def _rank(sig: Signals) -> str:
    """` label=value` for each label of the engine's KV-cache unit inside an instance that the alert carries
    (vLLM's `engine`, Ray Serve's `ReplicaId`): the label as the engine writes it, since its meaning is the
    catalog's (vLLM writes engine="0" on every V1 server, data-parallel or not)."""
    return "".join(f"{{{{ with $labels.{label} }}}} {label}={{{{ . }}}}{{{{ end }}}}" for label in sig.spec.ranks.unit)


def preemptions_high(sig: RecordedSignals, config) -> dict | None:
    """Per KV-cache unit (instance and data-parallel rank): one replica or rank thrashing pages and is named;
    rare preemptions spread over a fleet, a steady low share and a single moment's evictions do not."""
    if not carries(Alert.PREEMPTIONS_HIGH, sig, config):
        return None
    p = config.preemption
    instance = _instance(config)
    read = sig if RULERS[config.rules.target].fresh_recordings else sig.inlined()
    short = read.preemption_share(read.unit_group, p.short_window)
    long = read.preemption_share(read.unit_group, p.long_window)
    if sig.preemption_is_counter:
        min_rate = p.min_events / seconds(p.short_window)
        expr = (f"({short} >= {p.page_share:g}) and ({long} >= {p.confirm_share:g}) "
                f"and ({read.instance_preemptions(p.short_window)} >= {min_rate:.6g})")
        what = (f"{{{{ $value | humanizePercentage }}}} as many preemptions as finished requests over {p.short_window} "
                f"(page at {p.page_share:.1%} held for {p.alert_for}, confirmed by {p.confirm_share:.1%} over "
                f"{p.long_window} and at least {p.min_events:g} preemptions; finished requests count as at least "
                f"{p.min_finished:g} per window, so preempting while nothing completes pages too)")
    else:
        expr = f"({short} >= {p.paused_share:g}) and ({long} >= {p.paused_confirm_share:g})"
        what = (f"requests were paused in {{{{ $value | humanizePercentage }}}} of the last {p.short_window} "
                f"(page at {p.paused_share:.0%}, confirmed by {p.paused_confirm_share:.0%} "
                f"of the last {p.long_window})")
    side = (" On SGLang the *Retracted tokens/s* panel tells whether the recompute is prompt-side (long contexts "
            "evicted) or decode-side (generation redone)." if sig.has_retracted_sides else "")
    return _alert(
        sig, config, Alert.PREEMPTIONS_HIGH, expr, p.alert_for,
        f"{sig.spec.title} instance {instance}{_rank(sig)} is preempting requests of {_where(config)}",
        f"{instance}{_rank(sig)} serving {_where(config)} on {sig.spec.title}: {what}. Its KV cache is full: running "
        "requests lose their KV blocks and are recomputed later, so their users wait while throughput looks normal."
        f"{side} {sig.spec.note(Role.PREEMPTIONS)}".strip(),
        keep_firing_for=p.keep_firing_for)


def preemptions_chronic(sig: RecordedSignals, config) -> dict | None:
    """A capacity warning, not a page: a unit losing a steady small share of its work to preemption."""
    if not carries(Alert.PREEMPTIONS_CHRONIC, sig, config):
        return None
    p = config.preemption
    instance = _instance(config)
    share = sig.preemption_share(sig.unit_group, p.chronic_window)
    unit = ", ".join(sig.recorded_unit)
    expr = (f"({share} >= {p.chronic_share:g}) and on ({unit}) {sig.scraped(Role.PREEMPTIONS)} "
            f"unless on ({unit}) ({_healed_page(sig, config)})")
    return _alert(
        sig, config, Alert.PREEMPTIONS_CHRONIC, expr, p.chronic_for,
        f"{sig.spec.title} instance {instance}{_rank(sig)} keeps preempting requests of {_where(config)}",
        f"{instance}{_rank(sig)} serving {_where(config)} on {sig.spec.title}: {{{{ $value | humanizePercentage }}}} "
        f"as many preemptions as finished requests over {p.chronic_window} (warn at {p.chronic_share:.1%} for "
        f"{p.chronic_for}). No burst that pages, but its KV cache runs full often enough that every preempted request "
        f"is recomputed: a capacity problem to plan for in working hours ({Alert.PREEMPTIONS_HIGH} pages when it "
        "turns into a thrash).")


def _healed_page(sig: RecordedSignals, config) -> str:
    """1 per unit paged within the chronic window whose share outside its paged minutes (the short-window share
    at every minute the page was neither pending nor firing) stays below the chronic share: the burst the page
    was about explains the window's share, so a capacity ticket about it would come after the page has healed."""
    p = config.preemption
    unit = ", ".join(sig.recorded_unit)
    page = f'{ALERTS_SERIES}{{{ALERTNAME_LABEL}="{Alert.PREEMPTIONS_HIGH}", {ENGINE_LABEL}="{sig.spec.id}"}}'
    short = sig.preemption_share(sig.unit_group, p.short_window)
    outside = f"avg_over_time(({short} unless on ({unit}) {page})[{p.chronic_window}:{OUTSIDE_PAGE_STEP}])"
    return (f"max by ({unit}) (max_over_time({page}[{p.chronic_window}])) "
            f"unless on ({unit}) ({outside} >= {p.chronic_share:g})")


def divergence(sig: RecordedSignals, config) -> dict:
    """A warning where the engine counts preemptions (the preemption page says more and inhibits it); the
    page itself where it cannot."""
    d = config.divergence
    latency = INFO[sig.latency_role].title
    direct = sig.spec.has(Role.PREEMPTIONS)
    return _alert(
        sig, config, Alert.DIVERGENCE, sig.divergence_condition(), d.alert_for,
        f"{latency} of {_where(config)} diverges from throughput on {sig.spec.title}",
        f"{_where(config)} on {sig.spec.title}: {latency} over {d.window} is "
        f"{{{{ $value | printf \"%.1f\" }}}}x its median over the {d.baseline_window} "
        f"that ended {d.baseline_offset} ago, "
        f"while output tokens/s stays within ±{d.throughput_band:.0%} of its median over that same window. "
        "Latency rising with flat "
        "throughput is what KV-cache preemption looks like from outside; a load increase would raise throughput too."
        + (f" Without preemptions (see {Alert.PREEMPTIONS_HIGH}) it can also be longer prompts or a slower "
           "workload, hence a warning." if direct else
           f" {sig.spec.title} exports no preemption metric, so this is the only direct alert for it."),
        keep_firing_for=config.rules.warning_keep_firing_for)


def latency_high(sig: RecordedSignals, config, name: Alert) -> dict | None:
    """Static p99 thresholds (`name` TTFT_HIGH or ITL_HIGH); where the threshold is at or above the histogram's
    top bound (Triton's TTFT tops out at 5 s), the share of observations above that bound instead, since a
    quantile cannot pass it."""
    role = latency_alert_role(sig, name)
    if role is None:
        return None
    levels = config.thresholds.ttft_p99_seconds if name == Alert.TTFT_HIGH else config.thresholds.itl_p99_seconds
    info = INFO[role]
    w = config.divergence.window
    stand_in = " (per-request TPOT: this engine has no ITL histogram)" if role == Role.TPOT else ""
    floor = f"{sig.throughput(window=w)} >= {config.divergence.min_tokens_per_second:g}"
    top = sig.top_bound(role)
    if levels.critical >= top:
        expr = f"({sig.share_above_top_bucket(role)} > {CAPPED_TAIL_SHARE:g}) and ({floor})"
        what = (f"{{{{ $value | humanizePercentage }}}} of observations over {w} are above the histogram's top "
                f"bound of {top:g}s, so {info.title} is at least {top:g}s, "
                f"at or above the {levels.critical:g}s threshold")
    else:
        expr = f"({sig.quantile(role, HEADLINE_QUANTILE)} > {levels.critical:g}) and ({floor})"
        what = (f"{info.title}{stand_in} over {w} is {{{{ $value | humanizeDuration }}}}, "
                f"above the {levels.critical:g}s threshold")
    return _alert(
        sig, config, name, expr, config.rules.latency_alert_for,
        f"{info.title} of {_where(config)} is above {levels.critical:g}s on {sig.spec.title}",
        f"{_where(config)} on {sig.spec.title}: {what}. Check the preemption row first: a static latency threshold "
        "cannot tell KV-cache pressure from a heavier workload.",
        keep_firing_for=config.rules.warning_keep_firing_for)


def instance_latency_high(sig: RecordedSignals, config) -> dict | None:
    """One replica far slower than its model's fleet: a straggler (a bad GPU, a noisy neighbour, a hot
    shard) that the model's p99 hides when it is one replica of many."""
    if not carries(Alert.INSTANCE_LATENCY_HIGH, sig, config):
        return None
    role = sig.token_latency_role
    s = config.straggler
    instance = _instance(config) + _rank(sig)
    mine = sig.instance_quantile(role)
    model = ", ".join(sig.recorded_model)
    fleet = sig.quantile(role, HEADLINE_QUANTILE)
    expr = (f"({mine} > on ({model}) group_left () ({fleet}) * {s.factor:g}) and ({mine} > {s.min_seconds:g}) "
            f"and ({sig.instance_throughput()} >= {s.min_tokens_per_second:g}) "
            f"and on ({', '.join(sig.recorded_unit)}) {sig.scraped(role)}")
    title = INFO[role].title
    return _alert(
        sig, config, Alert.INSTANCE_LATENCY_HIGH, expr, s.alert_for,
        f"{sig.spec.title} instance {instance} is much slower than the rest of {_where(config)}",
        f"{instance} serving {_where(config)} on {sig.spec.title}: its own {title} over {config.divergence.window} is "
        f"{{{{ $value | humanizeDuration }}}}, at least {s.factor:g}x the model's {title} across the fleet (and above "
        f"{s.min_seconds:g}s). One replica among many moves the model's {title} little; its users still wait. "
        f"Not preemption on this instance ({Alert.PREEMPTIONS_HIGH} would silence this): look at the replica's GPU, "
        "its neighbours and its share of long requests.",
        keep_firing_for=config.rules.warning_keep_firing_for)


def log_preemptions_high(sig: Signals, config) -> dict | None:
    """With `logs.enabled`: per mtail instance (one per engine replica), at least `logs.min_events` preemptions
    logged over `short_window`, where no series of the same fleet group and `logs.replica_labels` exports
    the engine's preemption metric (there LLMServingPreemptionsHigh pages, normalised by work; a log
    alone cannot be, since it carries no request count)."""
    if not carries(Alert.LOG_PREEMPTIONS_HIGH, sig, config):
        return None
    p = config.preemption
    logs = sig.logs
    instance = _instance(config)
    join = tuple(config.fleet.group_by) + tuple(config.logs.replica_labels)
    expr = (f"{logs.preemptions(logs.instance_group + tuple(config.logs.replica_labels), p.short_window)} "
            f">= {config.logs.min_events:g}")
    silenced = ""
    if sig.spec.has(Role.PREEMPTIONS):
        expr = f"({expr}) unless on ({', '.join(join)}) {sig.exported(Role.PREEMPTIONS, join)}"
        silenced = (f" It stays silent where a series with the same {', '.join(join) or 'fleet'} labels exports "
                    f"{', '.join(f'`{s.series}`' for s in sig.sources(Role.PREEMPTIONS))}: there "
                    f"{Alert.PREEMPTIONS_HIGH} pages instead.")
    groups = _groups(config)
    return _alert(
        sig, config, Alert.LOG_PREEMPTIONS_HIGH, expr, p.alert_for,
        f"{sig.spec.title} log read by {instance}{groups} reports preemptions",
        f"mtail at {instance}{groups} counted {{{{ $value | printf \"%.0f\" }}}} {sig.spec.title} preemptions "
        f"in the log over {p.short_window} (page at {config.logs.min_events:g}). "
        "The KV cache is full: running requests "
        "lose their KV blocks and are recomputed later, so their users wait while throughput looks normal. "
        f"Counted by generated/mtail/{sig.spec.id}.mtail from lines the engine prints; "
        f"the log names no model.{silenced}",
        keep_firing_for=p.keep_firing_for)


def signals_missing(sig: Signals, config) -> list[dict]:
    """Per replica that exports its engine's running-requests gauge but not a signal the alerts need, for
    15 minutes: after an upgrade renames a series, the page it feeds would otherwise go silent."""
    instance = _instance(config)
    identity = ", ".join(sig.instance_group)
    rules = []
    for role in missing_roles(sig):
        names = ", ".join(f"`{s.series}`" for s in sig.sources(role))
        rules.append(_alert(
            sig, config, Alert.SIGNAL_MISSING,
            promql.as_model_name(f"{sig.present(Role.RUNNING)} unless on ({identity}) {sig.present(role)}",
                                 sig.spec.model_label),
            MISSING_FOR,
            f"{sig.spec.title} instance {instance} exports no {role} series",
            f"{instance} serving {_where(config)} exports {sig.spec.title}'s running-requests gauge but none of "
            f"{names} for {MISSING_FOR}. Dashboards and alerts that read the {role} signal are blind for it: a "
            "renamed series after an upgrade, a disabled metrics option, or a relabelling rule that drops it.",
            labels={SIGNAL_LABEL: str(role)}))
    return rules
