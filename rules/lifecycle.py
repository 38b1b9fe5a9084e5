"""What one instance of each alert is about (its unit) and when it resolves: data on the alert definitions, printed
by the alerts page (`llmdash.docblocks`, block `alert-units`) with the labels and figures of the built rules.

Why data: an on-call reading a ticket needs to know what the alert names (a KV-cache unit, a model, one replica's
signal) and what ends it; stated in prose by hand, it drifts from the rules the day a unit gains a label (Ray
Serve's replica) or a warning gains an end (a deleted pod). `UNITS` says which labels make one instance, and the
labels are read from the engine's catalog and the config, as the rules read them.

`config` is the `llmdash.config.Config` object the caller passes in.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from llmdash.engines.model import EngineSpec
from llmdash.rules.identity import SIGNAL_LABEL
from llmdash.vocabulary import MODEL_LABEL, SLO_LABEL, Alert


class Unit(StrEnum):
    KV_CACHE = "kv-cache unit"    # instance and the catalog's unit labels (vLLM's engine, Ray Serve's ReplicaId)
    MODEL = "model"               # one model in one fleet group
    REPLICA_SIGNAL = "replica signal"   # one replica and one signal it should export
    LOG = "log"                   # one mtail instance, beside one replica
    OBJECTIVE = "objective"       # one service-level objective of one model in one fleet group


@dataclass(frozen=True)
class Lifecycle:
    unit: Unit
    about: str       # what one alert instance is about, in a few words
    resolves: str    # when it resolves; `{keep_firing_for}` is the built rule's


LIFECYCLE: dict[Alert, Lifecycle] = {
    Alert.PREEMPTIONS_HIGH: Lifecycle(
        Unit.KV_CACHE, "one KV-cache unit (one replica's KV cache, named by its labels)",
        "{keep_firing_for} after its short-window share falls under the page share, its long-window share under the "
        "confirmation or its preemptions under the floor; a unit preempting while nothing completes stays paged"),
    Alert.PREEMPTIONS_CHRONIC: Lifecycle(
        Unit.KV_CACHE, "one KV-cache unit",
        "at once when its share over the chronic window falls under the warning share, when its series stop being "
        "scraped (a deleted pod: its staleness marker), or when it was paged within the window and its share "
        "outside the paged minutes is under the warning share; inhibited while the unit is paged"),
    Alert.INSTANCE_LATENCY_HIGH: Lifecycle(
        Unit.KV_CACHE, "one KV-cache unit, against its model's fleet",
        "{keep_firing_for} after its p99 is under the factor times its model's (or the floor), its output under "
        "the traffic floor, or its series stop being scraped; inhibited while the unit is paged"),
    Alert.DIVERGENCE: Lifecycle(
        Unit.MODEL, "one model in one fleet group",
        "{keep_firing_for} after the divergence condition ends; inhibited while a preemption page of the same model "
        "fires (of the same engine; on a frontend, of any engine behind it)"),
    Alert.TTFT_HIGH: Lifecycle(
        Unit.MODEL, "one model in one fleet group",
        "{keep_firing_for} after the p99 is back under the threshold or the traffic under the floor; inhibited as "
        "the divergence is"),
    Alert.ITL_HIGH: Lifecycle(
        Unit.MODEL, "one model in one fleet group",
        "{keep_firing_for} after the p99 is back under the threshold or the traffic under the floor; inhibited as "
        "the divergence is"),
    Alert.SIGNAL_MISSING: Lifecycle(
        Unit.REPLICA_SIGNAL, "one replica and one signal its engine should export",
        "at the first evaluation where the replica exports a series of the signal again, or no longer exports its "
        "running-requests gauge (removed, or no longer scraped)"),
    Alert.LOG_PREEMPTIONS_HIGH: Lifecycle(
        Unit.LOG, "one mtail instance, beside one replica",
        "{keep_firing_for} after fewer preemptions than the floor are logged over the short window, or once a "
        "series with the same fleet group and replica labels exports the engine's preemption metric"),
    Alert.SLO_BURN_FAST: Lifecycle(
        Unit.OBJECTIVE, "one objective of one model in one fleet group",
        "when no pair of windows burns above its rate any more (the short window ends it within minutes)"),
    Alert.SLO_BURN_SLOW: Lifecycle(
        Unit.OBJECTIVE, "one objective of one model in one fleet group",
        "when no pair of windows burns above its rate any more (the short window ends it within minutes)"),
    Alert.SLO_COVERAGE_LOW: Lifecycle(
        Unit.OBJECTIVE, "one objective of one model in one fleet group",
        "at the first evaluation where every replica serving the model exports what the SLI needs (the bucket at "
        "the latency target, or the failed-request series), or when no replica serves the model any more"),
}


def unit_labels(alert: Alert, spec: EngineSpec, config) -> tuple[str, ...]:
    """The labels (besides alertname, severity and llm_engine) that tell one instance of `alert` on `spec` from
    another: the aggregation its rule keeps."""
    groups, instance = tuple(config.fleet.group_by), config.fleet.instance_label
    unit = LIFECYCLE[alert].unit
    if unit is Unit.KV_CACHE:
        return groups + (MODEL_LABEL, instance) + spec.ranks.unit
    if unit is Unit.MODEL:
        return groups + (MODEL_LABEL,)
    if unit is Unit.REPLICA_SIGNAL:
        return groups + (MODEL_LABEL, instance, SIGNAL_LABEL)
    if unit is Unit.LOG:
        return groups + (instance,) + tuple(config.logs.replica_labels)
    return groups + (MODEL_LABEL, SLO_LABEL)
