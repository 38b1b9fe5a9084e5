"""One walk over a parsed PromQL expression, for every reader that judges one (the validator's lint, the
doctor's "why is this panel empty").

Why one: promql-parser's tree has a handful of node types, and which of them hold a series (a vector
selector, the one inside a range selector) and which only wrap another expression is the same question for
every reader. `PromqlWalk` answers it once; a reader overrides what it judges (a selector, a call, a binary
operation) and passes down its own context (the validator: whether a selector sits inside rate()).
Expressions are parsed as Grafana sends them, variables replaced (`parse`).
"""

from __future__ import annotations

from typing import Any

import promql_parser as pp

from llmdash.dashboards import variables

# A query's variables are replaced by the values Grafana sends for a 1 h range on a 15 s scrape (step =
# the scrape interval), every template variable = All.
SAMPLE_STEP_S, SAMPLE_RANGE_S, SAMPLE_SCRAPE_S = 15, 3600, 15


def parseable(expr: str) -> str:
    """`expr` with its Grafana variables replaced, so it parses: durations for intervals, .* for the rest."""
    return variables.substitute(expr, {}, SAMPLE_STEP_S, SAMPLE_RANGE_S, SAMPLE_SCRAPE_S, default=variables.ALL)


def parse(expr: str):
    """The tree of a dashboard or rule expression (raises promql-parser's own errors on bad PromQL). Not cached:
    a tree holds its compiled regular expressions, and a build's 234 trees kept would take 700 MB."""
    return pp.parse(parseable(expr))


class PromqlWalk:
    """Problems found in a tree, node by node: each method returns a list of problems (strings), and by
    default a node's problems are its children's, in order. `context` is whatever the reader passes down."""

    def walk(self, node, context: Any = None) -> list[str]:
        if isinstance(node, pp.VectorSelector):
            return self.selector(node, context)
        if isinstance(node, pp.MatrixSelector):
            return self.selector(node.vector_selector, context)
        if isinstance(node, pp.Call):
            return self.call(node, context)
        if isinstance(node, pp.BinaryExpr):
            return self.binary(node, context)
        if isinstance(node, pp.AggregateExpr):
            return self.aggregate(node, context)
        if isinstance(node, (pp.ParenExpr, pp.UnaryExpr, pp.SubqueryExpr)):
            return self.wrapper(node, context)
        return []   # number and string literals

    def selector(self, node: pp.VectorSelector, context: Any) -> list[str]:
        return []

    def call(self, node: pp.Call, context: Any) -> list[str]:
        return [problem for arg in node.args for problem in self.walk(arg, context)]

    def binary(self, node: pp.BinaryExpr, context: Any) -> list[str]:
        return self.walk(node.lhs, context) + self.walk(node.rhs, context)

    def aggregate(self, node: pp.AggregateExpr, context: Any) -> list[str]:
        return self.walk(node.expr, context)

    def wrapper(self, node, context: Any) -> list[str]:
        """A parenthesis, a unary minus or a subquery: the expression inside it."""
        return self.walk(node.expr, context)
