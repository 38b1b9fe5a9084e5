"""Every name llmdash shares between layers, defined once: change one here and every dashboard, rule,
runbook link and recorded series that refers to it follows.

This module is the lowest layer: it imports nothing from the project, so the catalog loader, the
PromQL layer, dashboards, rules and the tool all read the same words. What belongs here is a name
that more than one module must agree on (a quantile, an alert, a label, a uid, an annotation, a role,
a panel); what a single module uses alone stays in that module.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# ---- quantiles --------------------------------------------------------------------------------
HEADLINE_QUANTILE = 0.99   # the tail every latency panel, recorded series, baseline and alert is about
MEDIAN_QUANTILE = 0.5      # drawn beside the headline on the latency charts
RECORDED_QUANTILES = (HEADLINE_QUANTILE, MEDIAN_QUANTILE)
BASELINE_QUANTILE = 0.5    # a baseline is the median of a signal over its trailing window


def quantile_name(q: float) -> str:
    """How a quantile is written in titles and legends: 0.99 -> "p99", 0.999 -> "p99.9", 0.5 -> "p50"."""
    return f"p{q * 100:.10g}"


def percentile_words(q: float) -> str:
    """How a quantile is written in prose: 0.99 -> "99th percentile", 0.5 -> "50th percentile"."""
    number = f"{q * 100:.10g}"
    teen = number[-2:-1] == "1"
    suffix = "th" if "." in number or teen else {"1": "st", "2": "nd", "3": "rd"}.get(number[-1], "th")
    return f"{number}{suffix} percentile"


HEADLINE = quantile_name(HEADLINE_QUANTILE)
MEDIAN = quantile_name(MEDIAN_QUANTILE)


# ---- labels -----------------------------------------------------------------------------------
ENGINE_LABEL = "llm_engine"    # not `engine`: vLLM and LMDeploy already use it for the data-parallel rank
MODEL_LABEL = "model_name"     # what recorded series and alerts call the model, whatever the engine calls it
BUCKET_LABEL = "le"
ALERTNAME_LABEL = "alertname"
ALERTSTATE_LABEL = "alertstate"
SEVERITY_LABEL = "severity"
ALERTS_SERIES = "ALERTS"       # written by the ruler itself for pending and firing alerts
LOG_PREEMPTIONS = "llmdash_log_preemptions_total"  # what the generated mtail programs count log lines into
SLO_LABEL = "slo"              # the objective's name on its recorded series and burn-rate alerts


# ---- roles: what a catalog series means -------------------------------------------------------
class Role(StrEnum):
    THROUGHPUT = "throughput"
    REQUESTS = "requests"
    TTFT = "ttft"
    ITL = "itl"
    TPOT = "tpot"
    TOKEN_LATENCY_MEAN = "token_latency_mean"   # seconds counter divided by a token counter, where no histogram exists
    PREEMPTIONS = "preemptions"
    PREEMPTIONS_PER_REQUEST = "preemptions_per_request"
    RETRACTED_INPUT_TOKENS = "retracted_input_tokens"
    RETRACTED_OUTPUT_TOKENS = "retracted_output_tokens"
    KV_USAGE = "kv_usage"
    WAITING = "waiting"
    RUNNING = "running"
    ERRORS = "errors"    # finished requests that failed on the server's side (among `requests` unless outside_requests)
    ABORTS = "aborts"    # finished requests the client ended (a cancel): neither good nor bad, not valid events


LATENCY_HISTOGRAM_ROLES = (Role.ITL, Role.TPOT, Role.TTFT)            # finest first
TOKEN_LATENCY_ROLES = (Role.ITL, Role.TPOT, Role.TOKEN_LATENCY_MEAN)  # per-token latency, finest first
LATENCY_ROLES = LATENCY_HISTOGRAM_ROLES + (Role.TOKEN_LATENCY_MEAN,)  # the divergence's choice


# ---- alerts -----------------------------------------------------------------------------------
ALERT_PREFIX = "LLMServing"


class Alert(StrEnum):
    PREEMPTIONS_HIGH = f"{ALERT_PREFIX}PreemptionsHigh"
    PREEMPTIONS_CHRONIC = f"{ALERT_PREFIX}PreemptionsChronic"
    INSTANCE_LATENCY_HIGH = f"{ALERT_PREFIX}InstanceLatencyHigh"
    DIVERGENCE = f"{ALERT_PREFIX}LatencyThroughputDivergence"
    TTFT_HIGH = f"{ALERT_PREFIX}TTFT{HEADLINE.upper()}High"
    ITL_HIGH = f"{ALERT_PREFIX}ITL{HEADLINE.upper()}High"
    SIGNAL_MISSING = f"{ALERT_PREFIX}SignalMissing"
    LOG_PREEMPTIONS_HIGH = f"{ALERT_PREFIX}LogPreemptionsHigh"
    SLO_BURN_FAST = f"{ALERT_PREFIX}SLOBurnRateFast"   # page: the error budget goes within days
    SLO_BURN_SLOW = f"{ALERT_PREFIX}SLOBurnRateSlow"   # ticket: the budget will not last the SLO window
    SLO_COVERAGE_LOW = f"{ALERT_PREFIX}SLOCoverageLow"   # warning: some replicas cannot be counted by an SLI


# raised only where `slo.objectives` are configured
SLO_ALERTS = (Alert.SLO_BURN_FAST, Alert.SLO_BURN_SLOW, Alert.SLO_COVERAGE_LOW)


# ---- service-level objectives -----------------------------------------------------------------
class Sli(StrEnum):
    """What an objective counts as a good event."""

    TTFT = "ttft"                     # a request whose first token came within the target
    TOKEN_LATENCY = "token_latency"   # an ITL sample (per-request TPOT where the engine has no ITL) within the target
    AVAILABILITY = "availability"     # a finished request that did not fail on the server's side


@dataclass(frozen=True)
class BurnPair:
    """A burn rate and the two windows that must both reach it (`llmdash.rules.slo` explains the choice)."""

    burn: float
    long: str
    short: str


# The SRE Workbook's multiwindow, multi-burn-rate pairs: the one home of every SLO window. The recorded windows
# (`llmdash.panels.recorded.slo_windows`), the config's limits and the dashboards' burn lines derive from these,
# as Sloth derives its recorded windows from its alert windows.
BURN_PAIRS = {
    Alert.SLO_BURN_FAST: (BurnPair(14.4, "1h", "5m"), BurnPair(6, "6h", "30m")),
    Alert.SLO_BURN_SLOW: (BurnPair(3, "1d", "2h"), BurnPair(1, "3d", "6h")),
}


ALERT_PATTERN = f"{ALERT_PREFIX}.*"   # every llmdash alert, as an `alertname=~` regex
RUNBOOK_DIR = "generated/runbooks"    # one <alertname>.md each, written by `llmdash build`


# ---- dashboards -------------------------------------------------------------------------------
UID_PREFIX = "llmdash-"
FLEET = "fleet"                        # the cross-engine dashboard's name; no engine may be called this
RESERVED_ENGINE_IDS = frozenset({FLEET})
TAG = "llmdash"
DOMAIN_TAG = "llm-serving"
FLEET_TAG = f"{UID_PREFIX}{FLEET}"


def dashboard_uid(name: str) -> str:
    """The stable uid of an engine's dashboard (or the fleet's): what links and publish key on."""
    return f"{UID_PREFIX}{name}"


FLEET_UID = dashboard_uid(FLEET)


@dataclass(frozen=True)
class Annotation:
    name: str
    color: str


class Annotations:
    """The dashboards' annotations: name as Grafana lists it, and the colour it is drawn in."""

    PREEMPTION = Annotation("Preemption", "rgba(255, 152, 48, 1)")
    LOG_PREEMPTION = Annotation("Preemption (logs)", "rgba(255, 120, 10, 1)")
    ALERTS_FIRING = Annotation("Alerts firing (llmdash rules)", "rgba(184, 119, 217, 1)")
    # the per-engine name adds "<latency> up, throughput flat"
    DIVERGENCE = Annotation("Divergence", "rgba(242, 73, 92, 1)")
    PREEMPTION_PAGES = Annotation("Preemption pages", "rgba(255, 152, 48, 1)")
    BUILT_IN = Annotation("Annotations & Alerts", "rgba(0, 211, 255, 1)")


# ---- panels: stable keys and the titles shown for them -----------------------------------------
class Panel(StrEnum):
    """Stable keys of the panels other code refers to (the linter's exemptions, tests, docs)."""

    THROUGHPUT = "throughput"
    THROUGHPUT_TILE = "throughput_tile"
    REQUESTS = "requests"
    NO_PREEMPTION_METRIC = "no_preemption_metric"
    DIVERGENCE = "divergence"
    PREEMPTIONS = "preemptions"
    PAUSED = "paused"
    LOG_PREEMPTIONS = "log_preemptions"
    PREEMPTIONS_PER_REQUEST = "preemptions_per_request"
    RETRACTED_TOKENS = "retracted_tokens"
    KV_USAGE = "kv_usage"
    WAITING = "waiting"
    QUEUE = "queue"
    TOP_INSTANCES_BY_PREEMPTION = "top_instances_by_preemption"
    SLO_BUDGET = "slo_budget"
    SLO_BURN_RATE = "slo_burn_rate"
    SLO_ATTAINMENT = "slo_attainment"
    FLEET_SLO_BUDGET = "fleet_slo_budget"
    SLO_COVERAGE = "slo_coverage"


PANEL_TITLES = {
    Panel.THROUGHPUT: "Output tokens/s",
    Panel.THROUGHPUT_TILE: "Output tok/s",
    Panel.REQUESTS: "Requests/s",
    Panel.NO_PREEMPTION_METRIC: "Preemptions",
    Panel.DIVERGENCE: "Latency vs throughput divergence",
    Panel.PREEMPTIONS: "Preemptions/s",
    Panel.PAUSED: "Paused requests",
    Panel.LOG_PREEMPTIONS: "Preemptions/s (logs)",
    Panel.PREEMPTIONS_PER_REQUEST: "Preemptions per finished request",
    Panel.RETRACTED_TOKENS: "Retracted tokens/s: prompt vs generated",
    Panel.KV_USAGE: "KV-cache usage",
    Panel.WAITING: "Waiting requests",
    Panel.QUEUE: "Running and waiting requests",
    Panel.TOP_INSTANCES_BY_PREEMPTION: "Top instances by preemption",
    Panel.SLO_BUDGET: "Error budget remaining",
    Panel.SLO_BURN_RATE: "Burn rate",
    Panel.SLO_ATTAINMENT: "SLO attainment",
    Panel.FLEET_SLO_BUDGET: "Models by error budget remaining, worst first",
    Panel.SLO_COVERAGE: "SLO coverage",
}
