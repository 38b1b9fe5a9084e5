"""One rule file model, shaped for the ruler that will load it (`rules.target`).

Why: the alert builders describe what should page; which fields a ruler accepts is the ruler's
business. Debian's vmalert 1.79 refuses a whole file over one `keep_firing_for` ("unknown fields in
rule") and a live vmalert exits, so for a ruler without it the hold moves into the expression.
Every builder stays target-agnostic: `for_target` is applied once, to the finished model. One exception is
what the page reads (`Ruler.fresh_recordings`): where recorded series come back late, it is built over raw
series, which only the builder can do (the recording rules' expressions are its own).

What each ruler supports is the matrix in docs/rulers.md; `RULERS` is its source of truth.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmdash.errors import LlmdashError


@dataclass(frozen=True)
class Ruler:
    """What one ruler accepts, with the versions the claim rests on."""

    keep_firing_for: bool
    versions: str
    # whether an alert reads the recorded series its group wrote earlier in the same evaluation; where it does
    # not (vmalert writes them back by remote write, asynchronously, so its alert sees the previous evaluation's),
    # the page reads raw series itself: a minute sooner at a 1m interval (docs/benchmarks/bench-detect.md)
    fresh_recordings: bool = True
    # whether its query language has PromQL's native-histogram functions (histogram_count, histogram_sum,
    # histogram_fraction): VictoriaMetrics' MetricsQL has no histogram_count or histogram_sum (1.151: `unsupported
    # function "histogram_count"`, and vmalert refuses the file), so rules for it read classic series only
    native_histograms: bool = True


RULERS = {
    "prometheus": Ruler(True, "Prometheus >= 2.42 accepts keep_firing_for"),
    "vmalert": Ruler(False, "vmalert < 1.92 rejects keep_firing_for (1.79 is Debian's); 1.92 added it", False, False),
    "mimir": Ruler(True, "Mimir's ruler runs Prometheus' rule engine; keep_firing_for since grafana/mimir#4099"),
    "thanos": Ruler(False, "Thanos Ruler's keep_firing_for support is unconfirmed: the hold is kept in the expression"),
}
TARGETS = tuple(RULERS)


def held(expr: str, keep_firing_for: str, interval: str = "") -> str:
    """`expr`, still returned for `keep_firing_for` after it last returned a series: the condition's
    last value within that window, sampled at the rule interval (the server's default without one).
    Stateless, so it needs no `ALERTS` series written back into the store the ruler queries (vmalert
    writes it only by remote write, and its replay mode never reads it back), and HA ruler replicas
    agree. Unlike keep_firing_for, a condition true for less than `for` is held too, and so can fire."""
    return f"({expr}) or last_over_time(({expr})[{keep_firing_for}:{interval}])"


def for_target(model: dict, target: str) -> dict:
    """The rule file model `model` as `target` accepts it; the default target returns it unchanged."""
    if target not in RULERS:
        raise LlmdashError(f"rules.target: unknown ruler {target!r} (known: {', '.join(TARGETS)})")
    if RULERS[target].keep_firing_for:
        return model
    groups = []
    for group in model["groups"]:
        rules = []
        for rule in group["rules"]:
            if "keep_firing_for" in rule:
                hold = rule["keep_firing_for"]
                rule = {key: value for key, value in rule.items() if key != "keep_firing_for"}
                rule["expr"] = held(rule["expr"], hold, group.get("interval", ""))
            rules.append(rule)
        groups.append({**group, "rules": rules})
    return {**model, "groups": groups}
