"""What the golden and two-cluster tests read out of a built expression, by parsing it with promql-parser (a port
of Prometheus's own parser), not by matching the text llmdash wrote: the comparisons against a number, the
aggregations with their `by`/`without` labels, and the range windows.

The series a comparison reads are named by their recorded suffix (`llm_preemption_share:ratio_rate2m`, the
part after the level prefix), so a key says which question and which window without the grouping labels; a
raw series inside a range function is named `metric[2m]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

import promql_parser as pp

from llmdash.dashboards.promql_walk import parseable

COMPARISONS = frozenset({">=", "<=", ">", "<", "==", "!="})
RECORDED = re.compile(r"^[a-z_]+:(llm_[a-z0-9_]+:[a-z0-9_]+)$")


def parse(expr: str):
    """A rule's or a dashboard target's expression as a tree (Grafana variables replaced so it parses)."""
    return pp.parse(parseable(expr))


def children(node):
    for attr in ("expr", "lhs", "rhs", "vector_selector", "param"):
        child = getattr(node, attr, None)
        if child is not None and not isinstance(child, (str, int, float)):
            yield child
    yield from getattr(node, "args", None) or ()


def walk(node):
    yield node
    for child in children(node):
        yield from walk(child)


def unparen(node):
    while isinstance(node, pp.ParenExpr):
        node = node.expr
    return node


def duration(delta: timedelta) -> str:
    """Prometheus's spelling of a window: the largest unit that divides it (`2m`, `1h`, `3d`)."""
    total = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if total and total % size == 0:
            return f"{total // size}{unit}"
    return f"{total}s"


def tokens(node) -> list[str]:
    """The series an expression reads: recorded ones by suffix, raw ones in a range function with the range."""
    found = []
    for sub in walk(node):
        if isinstance(sub, pp.MatrixSelector):
            found.append(f"{sub.vector_selector.name}[{duration(sub.range)}]")
        elif isinstance(sub, pp.VectorSelector):
            match = RECORDED.match(sub.name)
            token = match.group(1) if match else sub.name
            if not any(t.startswith(f"{sub.name}[") for t in found):
                found.append(token)
    return sorted(set(found))


@dataclass(frozen=True)
class Comparison:
    """`<reads> <op> <value>`; `scaled` holds the other side's series where the number multiplies a vector
    (`mine > fleet * 3`)."""

    reads: tuple[str, ...]
    op: str
    value: float
    scaled: tuple[str, ...] = ()
    windows: tuple[str, ...] = ()    # the range windows the compared side reads

    @property
    def key(self) -> str:
        return "+".join(self.reads) + (" vs " + "+".join(self.scaled) if self.scaled else "")


def comparisons(expr: str) -> list[Comparison]:
    """Every comparison of a vector with a number (or with a vector times a number), in the order written."""
    found = []
    for node in walk(parse(expr)):
        if not (isinstance(node, pp.BinaryExpr) and str(node.op) in COMPARISONS):
            continue
        lhs, rhs = unparen(node.lhs), unparen(node.rhs)
        scale = ""
        if (isinstance(lhs, pp.BinaryExpr) and str(lhs.op) == "*"
                and isinstance(unparen(lhs.rhs), pp.NumberLiteral)):   # `errors:rate1h * 3600`: events in 1h
            scale = f"*{unparen(lhs.rhs).val:g}"
        windows = tuple(sorted(ranges_of(lhs)))
        if isinstance(rhs, pp.NumberLiteral):
            found.append(Comparison(tuple(t + scale for t in tokens(lhs)), str(node.op), rhs.val, windows=windows))
        elif (isinstance(rhs, pp.BinaryExpr) and str(rhs.op) == "*"
              and isinstance(unparen(rhs.rhs), pp.NumberLiteral)):
            found.append(Comparison(tuple(tokens(lhs)), str(node.op), unparen(rhs.rhs).val, tuple(tokens(rhs.lhs)),
                                    windows))
    return found


@dataclass(frozen=True)
class Aggregation:
    op: str
    kind: str            # "by", "without" or "" (no modifier)
    labels: tuple[str, ...]
    text: str


def aggregations(expr: str) -> list[Aggregation]:
    found = []
    for node in walk(parse(expr)):
        if isinstance(node, pp.AggregateExpr):
            modifier = node.modifier
            kind = "" if modifier is None else ("by" if "By" in str(modifier.type) else "without")
            found.append(Aggregation(str(node.op), kind, tuple(modifier.labels) if modifier else (), str(node)))
    return found


def matchings(expr: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(operator, on|ignoring, labels) of every binary operation that says how its sides match."""
    found = []
    for node in walk(parse(expr)):
        if isinstance(node, pp.BinaryExpr) and node.modifier is not None and node.modifier.matching is not None:
            matching = node.modifier.matching
            kind = "on" if "Include" in str(matching.type) else "ignoring"
            found.append((str(node.op), kind, tuple(matching.labels)))
    return found


def ranges_of(tree) -> set[str]:
    """Every range window a (sub)tree reads: range selectors and subqueries."""
    return {duration(node.range) for node in walk(tree) if isinstance(node, (pp.MatrixSelector, pp.SubqueryExpr))}


def ranges(expr: str) -> set[str]:
    return ranges_of(parse(expr))
