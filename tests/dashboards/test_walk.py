"""The one panel walk: which row a panel is in, in Grafana's order, on well-formed and malformed models,
and every reader of panels agreeing with it."""

from llmdash.dashboards.validate import expressions
from llmdash.dashboards.walk import grid_value, walk_panels
from llmdash.doctor.diagnose import _dashboard_checks
from llmdash.lab.bench_cost import dashboard_queries
from llmdash.lab.evaluate import panels_in_order
from llmdash.review.compare import place_panels


def _panel(title, y, x=0, expr="up"):
    return {"type": "timeseries", "title": title, "gridPos": {"x": x, "y": y, "w": 12, "h": 8},
            "targets": [{"refId": "A", "expr": expr}]}


def _row(title, y, collapsed=False, panels=()):
    return {"type": "row", "title": title, "collapsed": collapsed, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
            "panels": list(panels)}


def _walked(dashboard):
    return [(p.panel.get("title"), p.row_title, p.nested) for p in walk_panels(dashboard)]


def test_a_panel_belongs_to_the_nearest_row_above_it_in_grid_order_not_list_order():
    dashboard = {"panels": [_panel("Queue", 10), _row("Latency", 9), _panel("Top right", 0, x=12),
                            _panel("Top left", 0), _row("Throughput", 1), _panel("Tokens/s", 2)]}
    assert _walked(dashboard) == [("Top left", "", False), ("Top right", "", False), ("Throughput", "", False),
                                  ("Tokens/s", "Throughput", False), ("Latency", "", False),
                                  ("Queue", "Latency", False)]


def test_a_collapsed_rows_children_follow_it_and_belong_to_it():
    collapsed = _row("Preemption", 9, collapsed=True, panels=[_panel("KV cache", 11), _panel("Preemptions/s", 10)])
    dashboard = {"panels": [_row("Latency", 0), _panel("ITL p99", 1), collapsed, _row("Queue", 10),
                            _panel("Waiting", 11)]}
    assert _walked(dashboard) == [("Latency", "", False), ("ITL p99", "Latency", False), ("Preemption", "", False),
                                  ("Preemptions/s", "Preemption", True), ("KV cache", "Preemption", True),
                                  ("Queue", "", False), ("Waiting", "Queue", False)]


def test_malformed_models_are_walked_without_raising():
    no_grid = {"type": "stat", "title": "No gridPos"}
    string_y = {"type": "stat", "title": "String y", "gridPos": {"y": "3", "x": None}}
    dashboard = {"panels": [_panel("Below", 5), string_y, "not a panel", None, no_grid,
                            {"type": "row", "title": "Odd row", "gridPos": "top", "panels": "none"}]}
    assert _walked(dashboard) == [("String y", "", False), ("No gridPos", "", False), ("Odd row", "", False),
                                  ("Below", "Odd row", False)]
    assert grid_value(string_y, "y") == 0 and grid_value(string_y, "h", 1) == 1
    assert grid_value({"gridPos": {"y": True}}, "y", 7) == 7  # a bool is not a grid position
    for malformed in (None, [], {"panels": "x"}, {"panels": None}, {}):
        assert list(walk_panels(malformed)) == []


def test_every_reader_of_panels_sees_the_same_rows():
    """Review, lab, doctor and validation used to walk panels each their own way: doctor and validation
    skipped a collapsed row's panels, lab's evaluation raised on a panel without gridPos."""
    collapsed = _row("Preemption", 10, collapsed=True, panels=[_panel("Preemptions/s", 11, expr="rate(p[1m])")])
    no_grid = {"type": "stat", "title": "Up", "targets": [{"refId": "A", "expr": "up"}]}  # at the top
    dashboard = {"panels": [collapsed, _panel("ITL p99", 2, expr="itl"), _row("Latency", 1), no_grid]}
    expected = [("Latency", "ITL p99"), ("Preemption", "Preemptions/s")]

    assert [(row, panel["title"]) for row, panel in panels_in_order(dashboard) if panel["type"] != "row"] == \
        [("", "Up"), *expected]
    assert [(c.group, c.title) for c, _ in _dashboard_checks(dashboard)] == [("", "Up"), *expected]
    assert [q.title for q in dashboard_queries(dashboard)] == ["Up", "ITL p99", "Preemptions/s"]
    assert [expr for _, expr in expressions(dashboard)] == ["up", "itl", "rate(p[1m])"]
    assert [p.label for p in place_panels(dashboard) if not p.is_row] == [
        'panel "Up"', 'row "Latency" / panel "ITL p99"', 'row "Preemption" / panel "Preemptions/s"']
