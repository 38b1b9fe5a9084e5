"""Alert identity: which llmdash alerts an engine's rule file carries under a config, their severities, the
labels that tell one alert from another, their runbook URLs and the Alertmanager inhibitions between them.

Why a module of its own: dashboards link panels to the runbook of the alert that watches them and group
`ALERTS` by the alerts' labels, and the Alertmanager configuration inhibits by name; none of them needs an
alert's expression. They read these facts here, without building any rule file; `llmdash.rules.generate`
builds the alerts and asks the same questions (`carries`, `severity`, `latency_alert_role`, `missing_roles`),
so what a dashboard links to and what the rule file holds cannot disagree.

`config` is the `llmdash.config.Config` object the caller passes in.
"""

from __future__ import annotations

from llmdash.engines.catalog import load_engine
from llmdash.engines.model import FRONTEND_ROLE, EngineSpec
from llmdash.panels.promql import Matcher
from llmdash.panels.signals import Signals, SignalsBase, fixed_selectors
from llmdash.panels.slo import indicators
from llmdash.vocabulary import ALERTNAME_LABEL, ENGINE_LABEL, MODEL_LABEL, SEVERITY_LABEL, Alert, Role

SIGNAL_LABEL = "signal"   # which signal an LLMServingSignalMissing alert is about
CRITICAL, WARNING = "critical", "warning"   # a page, a ticket (what the example Alertmanager route sends where)

SEVERITY = {
    Alert.PREEMPTIONS_HIGH: CRITICAL, Alert.PREEMPTIONS_CHRONIC: WARNING, Alert.INSTANCE_LATENCY_HIGH: WARNING,
    Alert.DIVERGENCE: WARNING,   # the page itself on an engine without a preemption metric (`severity`)
    Alert.TTFT_HIGH: WARNING, Alert.ITL_HIGH: WARNING, Alert.SIGNAL_MISSING: WARNING,
    Alert.LOG_PREEMPTIONS_HIGH: CRITICAL, Alert.SLO_BURN_FAST: CRITICAL, Alert.SLO_BURN_SLOW: WARNING,
    Alert.SLO_COVERAGE_LOW: WARNING,
}
INHIBITED = (Alert.DIVERGENCE, Alert.TTFT_HIGH, Alert.ITL_HIGH)   # what a firing preemption page silences
# the signals whose absence LLMServingSignalMissing reports, in the rule file's order
MISSING_ROLES = (Role.PREEMPTIONS, Role.THROUGHPUT, Role.ITL, Role.TPOT, Role.TTFT, Role.TOKEN_LATENCY_MEAN)


def severity(alert: Alert, spec: EngineSpec) -> str:
    """The alert's severity on `spec`: the divergence pages where the engine cannot count preemptions."""
    if alert == Alert.DIVERGENCE and not spec.has(Role.PREEMPTIONS):
        return CRITICAL
    return SEVERITY[alert]


def rule_scope(spec: EngineSpec, config) -> tuple[Matcher, ...]:
    """Selectors only (the catalog's defaults, the config's): with neither, rules select series by name alone."""
    return fixed_selectors(spec, config)


def latency_alert_role(sig: SignalsBase, alert: Alert) -> Role | None:
    """The histogram a static latency alert (`TTFT_HIGH`, `ITL_HIGH`) reads, None where the engine has none:
    a p99 threshold compared with a mean would stay silent through most stalls."""
    role = Role.TTFT if alert == Alert.TTFT_HIGH else sig.token_latency_role
    if role is None or not sig.spec.has(role) or sig.is_mean(role):
        return None
    return Role(role)


def missing_roles(sig: SignalsBase) -> tuple[Role, ...]:
    """The roles whose absence is a fault: only those every supported version exports (an old release without
    the series is not one)."""
    return tuple(role for role in MISSING_ROLES if sig.spec.has(role) and _covers_every_version(sig, role))


def _covers_every_version(sig: SignalsBase, role: Role) -> bool:
    sources = sig.sources(role)
    if not sources:
        return False
    first = min(s.metric.since for s in sources)
    untils = [s.metric.exposed_until for s in sources]
    return first <= sig.spec.supported_from and (None in untils or max(untils) > sig.spec.supported_to)


def carries(alert: Alert, sig: SignalsBase, config) -> bool:
    """Whether the engine's rule file holds `alert` (which depends on the signals its catalog offers and on
    the config); `sig` reads the engine under the rules' scope."""
    spec = sig.spec
    if alert in (Alert.PREEMPTIONS_HIGH, Alert.PREEMPTIONS_CHRONIC):
        return spec.has(Role.PREEMPTIONS) and (alert == Alert.PREEMPTIONS_HIGH or sig.preemption_is_counter)
    if alert in (Alert.TTFT_HIGH, Alert.ITL_HIGH):
        return latency_alert_role(sig, alert) is not None
    if alert == Alert.INSTANCE_LATENCY_HIGH:
        return sig.token_latency_role is not None and not sig.is_mean(sig.token_latency_role)
    if alert == Alert.SIGNAL_MISSING:
        return bool(missing_roles(sig))
    if alert == Alert.LOG_PREEMPTIONS_HIGH:
        return bool(config.logs.enabled and spec.log_patterns)
    if alert in (Alert.SLO_BURN_FAST, Alert.SLO_BURN_SLOW, Alert.SLO_COVERAGE_LOW):
        return bool(indicators(spec, config))
    if alert == Alert.DIVERGENCE:
        return True
    raise ValueError(f"unknown alert {alert!r}")


def carried_alerts(spec: EngineSpec, config) -> frozenset[Alert]:
    """Every alert the engine's rule file holds, decided without building it."""
    sig = Signals(spec, config, rule_scope(spec, config), config.divergence.window)
    return frozenset(alert for alert in Alert if carries(alert, sig, config))


def alert_labels(config) -> tuple[str, ...]:
    """Every label that tells one llmdash alert from another (name, severity, the aggregation's labels), and
    none a ruler replica adds: what `ALERTS` readers keep so that HA rulers writing one store count once."""
    return tuple(dict.fromkeys((ALERTNAME_LABEL, SEVERITY_LABEL, ENGINE_LABEL, MODEL_LABEL, *config.fleet.group_by,
                                config.fleet.instance_label, *config.logs.replica_labels, SIGNAL_LABEL)))


def runbook_url(config, alertname: str) -> str | None:
    """The alert's runbook from `alerts.runbook_url_template`, or None when no template is set."""
    template = config.alerts.runbook_url_template
    return template.replace("{alertname}", alertname) if template else None


def inhibit_rules(config) -> dict:
    """Alertmanager `inhibit_rules`: a preemption page silences the divergence and static-latency alerts
    of the same engine, model and fleet group, which describe the same incident from outside; the
    capacity and straggler warnings of the same KV-cache unit (instance and the catalogs' unit labels), which it
    explains; and, across `llm_engine`, the same alerts of a frontend (catalog `role: frontend`, Dynamo's) for the
    same model and fleet group: a worker's page and its frontend's latency are one incident, one page."""
    equal = [ENGINE_LABEL, MODEL_LABEL, *config.fleet.group_by]
    specs = [load_engine(engine) for engine in config.engine_ids]
    units = tuple(dict.fromkeys(label for spec in specs for label in spec.ranks.unit))
    frontends = [spec.id for spec in specs if spec.role == FRONTEND_ROLE]
    rules = [{
        "source_matchers": [f'{ALERTNAME_LABEL}="{Alert.PREEMPTIONS_HIGH}"'],
        "target_matchers": [f'{ALERTNAME_LABEL}=~"{"|".join(INHIBITED)}"'],
        "equal": equal,
    }, {
        "source_matchers": [f'{ALERTNAME_LABEL}="{Alert.PREEMPTIONS_HIGH}"'],
        "target_matchers": [f'{ALERTNAME_LABEL}=~"{Alert.PREEMPTIONS_CHRONIC}|{Alert.INSTANCE_LATENCY_HIGH}"'],
        "equal": [*equal, config.fleet.instance_label, *units],
    }]
    if frontends:
        rules.append({
            "source_matchers": [f'{ALERTNAME_LABEL}="{Alert.PREEMPTIONS_HIGH}"'],
            "target_matchers": [f'{ALERTNAME_LABEL}=~"{"|".join(INHIBITED)}"',
                                f'{ENGINE_LABEL}=~"{"|".join(frontends)}"'],
            "equal": [MODEL_LABEL, *config.fleet.group_by],
        })
    return {"inhibit_rules": rules}
