"""PromQL building blocks. Every expression llmdash emits is composed from these functions.

The rules they enforce, once: label values escaped; quantiles always over
`sum by (le, <group>)` of bucket rates; ratios and quantiles that yield no series
(rather than NaN or Inf) when there is no traffic; a native histogram read as the classic
series it replaces (`native_buckets`, `native_at_or_under`, `first_per_replica`), so one expression
answers over replicas that store either form. Which series to combine, and at which
labels, is `llmdash.panels.signals`' business.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from llmdash.vocabulary import BASELINE_QUANTILE, BUCKET_LABEL, MODEL_LABEL

FORM_LABEL = "llmdash_read"   # which of a fallback's reads a partial result came from; dropped by its last reduce


def escape(value: str) -> str:
    """Escape a label value for a double-quoted PromQL string."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str  # one of = != =~ !~
    value: str

    def render(self) -> str:
        return f'{self.label}{self.op}"{escape(self.value)}"'


def prometheus3_float(value: float) -> str:
    """How Prometheus 3 stores a classic histogram's `le` (and a summary's `quantile`) at ingestion:
    `labels.FormatOpenMetricsFloat`, Go's shortest `%g` with ".0" added where it has neither "." nor "e"
    (`5000` -> `5000.0`, `1` -> `1.0`, `1e-05` stays, `1000000` -> `1e+06`)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    digits, exponent = _shortest(value)
    point = exponent + 1                                   # digits before the decimal point
    sign = "-" if value < 0 else ""
    if exponent < -4 or exponent >= 6:                     # Go's shortest %g: %e outside [1e-4, 1e6)
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if point <= 0:
        text = "0." + "0" * -point + digits
    elif point >= len(digits):
        text = digits + "0" * (point - len(digits))
    else:
        text = digits[:point] + "." + digits[point:]
    return sign + (text if "." in text else text + ".0")


def _shortest(value: float) -> tuple[str, int]:
    """The shortest digits that read back as `value`, and the decimal exponent of the first one."""
    mantissa, _, exponent = f"{abs(value):.17e}".partition("e")
    for precision in range(17):
        candidate = f"{abs(value):.{precision}e}"
        if float(candidate) == abs(value):
            mantissa, _, exponent = candidate.partition("e")
            break
    return mantissa.replace(".", "").rstrip("0") or "0", int(exponent)


def bucket_texts(exporter_text: str, bound: float) -> tuple[str, ...]:
    """The `le` texts of the bucket at `bound`: as the exporter wrote it (`5000`) and as Prometheus 3
    normalises it (`5000.0`), once where they agree."""
    return tuple(dict.fromkeys((exporter_text, prometheus3_float(bound))))


def bucket_matcher(exporter_text: str, bound: float) -> Matcher:
    """Exactly the bucket at `bound`, whether it is stored as the exporter wrote it (`le="5000"`) or as
    Prometheus 3 normalises it (`le="5000.0"`): one regex of both texts where they differ."""
    texts = bucket_texts(exporter_text, bound)
    if len(texts) == 1:
        return Matcher("le", "=", texts[0])
    return Matcher("le", "=~", "|".join(re.escape(t) for t in texts))


def bucket_set_matcher(buckets: list[Matcher]) -> Matcher:
    """One `le` matcher for a set of buckets (each from `bucket_matcher`) and `+Inf`: what a quantile over a
    layout common to several exporters' releases reads."""
    texts = [m.value if m.op == "=~" else re.escape(m.value) for m in buckets]
    return Matcher("le", "=~", "|".join(texts + [re.escape("+Inf")]))


def native_at_or_under(hist: str, bound: float) -> str:
    """The observations at or under `bound` in the native histogram `hist` (a rate of one), the number a classic
    histogram's `le` bucket holds: `histogram_fraction` from -Inf times `histogram_count`. Exact where `bound` is a
    bucket boundary, as it is for a classic histogram stored with custom buckets (NHCB, from
    `convert_classic_histograms_to_nhcb`): the fraction then sums whole buckets; elsewhere (an exponential
    histogram) it interpolates, as `histogram_quantile` does. 0 while the histogram counts nothing (the fraction is
    NaN then), as the classic bucket's rate is, so a sum over replicas stays a number."""
    return (f"((histogram_fraction(-Inf, {_number(bound)}, {hist}) * histogram_count({hist}) >= 0) "
            f"or histogram_count({hist}))")


def native_buckets(hist: str, bounds: tuple[float, ...]) -> str:
    """The native histogram `hist` (a rate of one) as the cumulative `le` buckets at `bounds` and +Inf of the
    classic histogram it replaces, `le` written as Prometheus 3 stores a classic bucket's, so they sum with classic
    bucket rates under one `histogram_quantile`. No series while the histogram counts nothing (a quantile of
    empty buckets is NaN, which `quantile` drops anyway)."""
    shares = " or ".join(f'label_replace(histogram_fraction(-Inf, {_number(bound)}, {hist}), "{BUCKET_LABEL}", '
                         f'"{prometheus3_float(bound)}", "", "")' for bound in (*bounds, math.inf))
    return f"({shares}) * ignoring ({BUCKET_LABEL}) group_left () histogram_count({hist}) >= 0"


def _number(value: float) -> str:
    """A float as a PromQL literal that reads back as exactly `value` (`+Inf` for infinity)."""
    return "+Inf" if value == math.inf else repr(float(value))


def native_part(part: str, hist: str) -> str:
    """A classic histogram's `_count` or `_sum` read from the native histogram `hist`."""
    return f"histogram_{part}({hist})"


def first_per_replica(reads: list[tuple[str, str]], reduce: str, labels: tuple[str, ...],
                      replica: tuple[str, ...]) -> str:
    """`reduce by (labels)` over replicas (`replica`: the labels that tell them apart), each replica read from the
    first of `reads` that covers it: (read, mark) pairs in order of preference, `mark` an expression with a series
    for exactly the replicas `read` has one for. So a fleet half converted to native histograms, or half renamed,
    counts every replica once, and a replica stored both ways (`always_scrape_classic_histograms`) once, from its
    classic series, whose `le` texts may differ from the native read's.

    Each read is reduced on its own, over the replicas no earlier mark covers (`unless on (replica)`), and only
    those few reduced series are combined (a `FORM_LABEL` keeps them apart until the last `reduce`): no vector of
    every replica's series (14-20 buckets each) is built, copied and hashed at every step, as `(a) or on (replica)
    (b)` of per-replica reductions would (Prometheus evaluates a range query operator by operator, each over every
    step). The marks, one series per replica, are what is read twice. `reduce` is sum, max or group: each of them
    of the disjoint parts' results is theirs of the whole."""
    on = ", ".join(replica)
    parts = []
    for k, (read, _) in enumerate(reads):
        covered = [mark for _, mark in reads[:k]]
        if covered:
            read = f"({read}) unless on ({on}) ({' or '.join(covered)})"
        part = f"{reduce}{by(labels)} ({read})"
        parts.append(f'label_replace({part}, "{FORM_LABEL}", "{k}", "", "")' if k else part)
    return f"{reduce}{by(labels)} ({' or '.join(parts)})"


def clamp_min(expr: str, floor: float) -> str:
    return f"clamp_min({expr}, {floor:.6g})"


def selector(series: str, matchers: tuple[Matcher, ...] = ()) -> str:
    if not matchers:
        return series
    return f"{series}{{{', '.join(m.render() for m in matchers)}}}"


def rate(series_selector: str, window: str, offset: str | None = None) -> str:
    return f"rate({series_selector}[{window}]{f' offset {offset}' if offset else ''})"


def as_model_name(expr: str, model_label: str, keep: bool = True) -> str:
    """`expr` with the engine's model label (`model_label`) copied to `model_name`, what recorded series and
    alerts call the model whatever the engine calls it; without `keep`, the engine's own label removed (an
    empty replacement deletes a label), so every engine's series have the same labels."""
    if model_label == MODEL_LABEL:
        return expr
    named = f'label_replace({expr}, "{MODEL_LABEL}", "$1", "{model_label}", "(.*)")'
    return named if keep else f'label_replace({named}, "{model_label}", "", "", "")'


def increments(series_selector: str, step: str, read=None) -> str:
    """What each counter series gained since the previous rule evaluation, `step` ago, without extrapolation:
    the latest sample now minus the latest sample `step` ago (the counter's own value after a reset, which starts
    it from 0). Summed over consecutive evaluations these telescope to exactly the samples' difference, where
    `increase()` scales the samples inside its range to the whole range. A series without a sample `step` ago
    (new, or back after a gap longer than the lookback) adds nothing until its second evaluation: nothing is
    counted that no two samples show. `read(selector)`: a number from each series (of a native histogram, its count
    or its observations up to a bound), taken now and `step` ago alike."""
    now, before = series_selector, f"{series_selector} offset {step}"
    if read is not None:
        now, before = read(now), read(before)
    return f"(({now} - ({before} <= {now})) or ({now} and ({before} > {now})))"


def by(labels: tuple[str, ...]) -> str:
    return f" by ({', '.join(labels)})" if labels else ""


def first_of(exprs: list[str]) -> str:
    """`new or old`: per label set, the first expression that has a series wins."""
    if len(exprs) == 1:
        return exprs[0]
    return " or ".join(f"({e})" for e in exprs)


def divide(numerator: str, denominator: str) -> str:
    """numerator / denominator, with no series at all where the denominator is zero (idle)."""
    return f"({numerator}) / ({denominator} > 0)"


def quantile(q: float, bucket_rates_by_le: str, scale: float = 1.0) -> str:
    """histogram_quantile over already `sum by (le, …)`-aggregated bucket rates.

    `>= 0` drops the NaN series that an idle window produces; `scale` converts the
    histogram's unit to seconds (e.g. 0.001 for milliseconds).
    """
    expr = f"histogram_quantile({q:g}, {bucket_rates_by_le})"
    if scale != 1.0:
        expr = f"{expr} * {scale:g}"
    return f"{expr} >= 0"


def is_selector(expr: str) -> bool:
    """A bare series selector (`name` or `name{…}`), which takes a range directly; anything else needs a subquery."""
    name, _, rest = expr.partition("{")
    return (name.replace("_", "a").replace(":", "a").isalnum()
            and (not rest or (rest.endswith("}") and "}" not in rest[:-1])))


def baseline(expr: str, divergence) -> str:
    """The median of `expr` over the baseline window that ended `baseline_offset` ago (`divergence` is the
    config's `divergence` section).

    A median of the windowed values, not one value over the whole window (a p99 of the hour's
    buckets needs only 1 % slow samples, so a collapse would become its own baseline within
    minutes; an hour's rate is skewed by a series that starts inside it), and offset, so the
    incident itself stays out of it for the offset plus half the window. A recorded series is read
    at its own samples; any other expression through a subquery at `baseline_resolution`.
    """
    d = divergence
    window = (f"{expr}[{d.baseline_window}]" if is_selector(expr)
              else f"({expr})[{d.baseline_window}:{d.baseline_resolution}]")
    return f"quantile_over_time({BASELINE_QUANTILE:g}, {window} offset {d.baseline_offset})"


def as_flag(condition: str) -> str:
    """1 while `condition` returns a series, nothing otherwise: the form annotations expect."""
    return f"({condition}) * 0 + 1"

