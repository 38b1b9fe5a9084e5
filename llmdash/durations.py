"""Prometheus durations (`90s`, `5m`, `1h30m`, `500ms`), read and written in one place.

Why one module: the config, the rule generator and the lab harnesses all turn durations into seconds,
and each used to carry its own parser that accepted a slightly different subset. This one accepts the
grammar Prometheus' own `model.ParseDuration` does: units y, w, d, h, m, s, ms, each at most once and
largest first, integers only, or a bare "0". It imports nothing from the project, so every layer may use it.
"""

from __future__ import annotations

import re

UNIT_MS = {"y": 365 * 86_400_000, "w": 7 * 86_400_000, "d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000,
           "ms": 1}
# Digits bounded per unit: int() of thousands of digits raises, and nothing that long is a real duration.
_DURATION = re.compile("".join(rf"(?:(?P<{unit}>[0-9]{{1,20}}){unit})?" for unit in UNIT_MS))


def milliseconds(text: str) -> int:
    """Whole milliseconds in a Prometheus duration; ValueError naming the text when it is not one."""
    if text == "0":
        return 0
    match = _DURATION.fullmatch(text) if text else None
    if match is None:
        raise ValueError(f"not a Prometheus duration: {text[:40]!r}")
    return sum(int(count) * UNIT_MS[unit] for unit, count in match.groupdict().items() if count is not None)


def seconds(text: str) -> float:
    """Seconds in a Prometheus duration such as 90s, 5m, 1h30m or 500ms."""
    return milliseconds(text) / 1000


def duration(value_s: float) -> str:
    """Seconds back as a duration PromQL accepts: whole seconds as `75s`, anything finer as `500ms`."""
    ms = round(value_s * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"
