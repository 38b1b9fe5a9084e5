"""The one duration parser: what Prometheus accepts is read exactly, anything else is refused, and seconds
written back read the same."""

from __future__ import annotations

import pytest

from llmdash.durations import duration, milliseconds, seconds


@pytest.mark.parametrize("text, expected_s", [
    ("90s", 90), ("5m", 300), ("1h", 3600), ("1d", 86400), ("1w", 7 * 86400), ("1y", 365 * 86400),
    ("500ms", 0.5), ("1h30m", 5400), ("1m30s", 90), ("2d12h", 216000), ("1s500ms", 1.5), ("0", 0), ("0s", 0),
])
def test_prometheus_durations_are_read_as_seconds(text, expected_s):
    assert seconds(text) == expected_s


@pytest.mark.parametrize("text", [
    "", "5", "1.5m", "5M", " 5m", "5m ", "-5m", "30m1h", "1m1m", "1mm", "ms", "5 m", "$__rate_interval",
    "9" * 21 + "s", "9" * 5000 + "m",
])
def test_anything_prometheus_refuses_is_a_value_error_naming_it(text):
    with pytest.raises(ValueError, match="not a Prometheus duration"):
        seconds(text)


def test_milliseconds_are_exact_where_seconds_would_round():
    """The config compares against Go's int64-nanosecond limit; 20-digit counts must not lose precision."""
    assert milliseconds("99999999999999999999d") == 99999999999999999999 * 86_400_000
    assert milliseconds("9223372037s") == 9223372037000


@pytest.mark.parametrize("value_s, text", [(75, "75s"), (60.0, "60s"), (0.5, "500ms"), (90.5, "90500ms"),
                                           (1.001, "1001ms"), (0, "0s"), (86400, "86400s")])
def test_seconds_are_written_back_as_a_duration_promql_reads(value_s, text):
    assert duration(value_s) == text
    assert seconds(text) == pytest.approx(value_s)
