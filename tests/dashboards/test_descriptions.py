"""Panel descriptions as a reader sees them: no empty clause left over from a panel that has no metric."""

from __future__ import annotations

import re

from llmdash.dashboards.walk import walk_panels

EMPTY_METRICS = re.compile(r"Metrics?( \([^)]*\))?: *[.,]?\s*$|Metrics?( \([^)]*\))?: *[.,]")


def test_no_description_has_an_empty_metrics_clause(default_build):
    """The engines' "no preemption metric" and "no KV-cache usage" text panels used to end in "Metrics: ."."""
    empty = [(name, placed.panel.get("title")) for name, model in default_build.items()
             for placed in walk_panels(model) if EMPTY_METRICS.search(placed.panel.get("description") or "")]
    assert empty == []


def test_a_no_metric_panel_ends_in_its_own_words(default_build):
    """TGI exports no preemption metric (engines/tgi.yaml): its text panel says so and names no metric."""
    [panel] = [p.panel for p in walk_panels(default_build["tgi"])
               if p.panel.get("type") == "text" and p.panel.get("title") == "Preemptions"]
    assert panel["description"].startswith("This engine exports no preemption metric.")
    assert "Metrics" not in panel["description"] and panel["description"].endswith(".")
