"""Rules replayed level by level: a level reads only series recorded at earlier levels."""

from __future__ import annotations

from llmdash.lab import replay


def test_rule_levels_put_rules_after_the_series_they_read():
    model = {"groups": [{"name": "g", "interval": "1m", "rules": [
        {"record": "m:x:ratio", "expr": "m:x:rate5m / m:y:rate5m"},
        {"record": "m:x:rate5m", "expr": "sum(rate(x[5m]))"},
        {"record": "m:y:rate5m", "expr": "sum(rate(y[5m]))"},
        {"alert": "A", "expr": "m:x:ratio > 2"}]}]}
    recorded, alerts = replay.levels(model)
    assert [[r["record"] for g in level["groups"] for r in g["rules"]] for level in recorded] == \
        [["m:x:rate5m", "m:y:rate5m"], ["m:x:ratio"]]
    assert [r["alert"] for g in alerts["groups"] for r in g["rules"]] == ["A"]
