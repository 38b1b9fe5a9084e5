"""PromQL building blocks. Every expression llmdash emits is composed from these functions.

The rules they enforce, once: label values escaped; quantiles always over
`sum by (le, <group>)` of bucket rates; ratios and quantiles that yield no series
(rather than NaN or Inf) when there is no traffic. Which series to combine, and at which
labels, is `llmdash.panels.signals`' business.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmdash.vocabulary import BASELINE_QUANTILE


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


def bucket_bound(texts: tuple[str, ...]) -> Matcher:
    """The `le` matcher of one bucket, given every text its bound may be stored under: the exporter's own (`1`)
    and Prometheus 3's normalised float (`1.0`), so an exact-bucket read survives either."""
    unique = tuple(dict.fromkeys(texts))
    return Matcher("le", "=", unique[0]) if len(unique) == 1 else Matcher("le", "=~", "|".join(re.escape(t) for t in unique))


def selector(series: str, matchers: tuple[Matcher, ...] = ()) -> str:
    if not matchers:
        return series
    return f"{series}{{{', '.join(m.render() for m in matchers)}}}"


def rate(series_selector: str, window: str, offset: str | None = None) -> str:
    return f"rate({series_selector}[{window}]{f' offset {offset}' if offset else ''})"


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
    return name.replace("_", "a").replace(":", "a").isalnum() and (not rest or (rest.endswith("}") and "}" not in rest[:-1]))


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
    window = f"{expr}[{d.baseline_window}]" if is_selector(expr) else f"({expr})[{d.baseline_window}:{d.baseline_resolution}]"
    return f"quantile_over_time({BASELINE_QUANTILE:g}, {window} offset {d.baseline_offset})"


def as_flag(condition: str) -> str:
    """1 while `condition` returns a series, nothing otherwise: the form annotations expect."""
    return f"({condition}) * 0 + 1"

