"""Grafana's template variables in a query, replaced the way Grafana replaces them before it sends it.

Why one module: the validator (which only needs the query to parse), the dashboard evaluator and the
query-cost benchmark (which send it to a real Prometheus) must agree on the variable syntax and on
Grafana's built-in intervals, `$__rate_interval` above all, whose formula is written here only.
Every form Grafana reads is recognised: `$var`, `${var}`, `${var:format}` and `[[var]]`; a name is read
whole, so `$model` never replaces the start of `$model_name`.
"""

from __future__ import annotations

import re

from llmdash.durations import duration
from llmdash.errors import LlmdashError

# Grafana's own variable pattern (public/app/features/variables/utils.ts): $name, [[name:format]],
# ${name.fieldPath:format}; the field path and format do not change the value of an All selection.
VARIABLE = re.compile(r"\$(\w+)|\[\[(\w+?)(?::\w+)?\]\]|\$\{(\w+)(?:\.[^:^}]+)?(?::[^}]+)?\}")
ALL = ".*"                         # a multi-value variable's default allValue: every value
DATASOURCE_VALUE = "prometheus"    # what a datasource variable stands for in the lab's queries


def rate_interval(step_s: float, scrape_s: float) -> float:
    """Grafana's $__rate_interval: max($__interval + scrape interval, 4 x scrape interval)."""
    return max(step_s + scrape_s, 4 * scrape_s)


def builtins(step_s: float, range_s: float, scrape_s: float) -> dict[str, str]:
    """Grafana's built-in variables for a query at step `step_s` over `range_s` on a data source
    whose scrape interval setting is `scrape_s`."""
    return {
        "__rate_interval": duration(rate_interval(step_s, scrape_s)),
        "__interval": duration(step_s),
        "__interval_ms": str(int(step_s * 1000)),
        "__range": duration(range_s),
        "__range_s": str(int(range_s)),
    }


def variable_values(dashboard: dict) -> dict[str, str]:
    """A dashboard's template variables as PromQL text: multi-value/All as their allValue (default .*),
    the data source as `prometheus`, any other as its current value."""
    values = {}
    for var in dashboard.get("templating", {}).get("list", []):
        name = var["name"]
        if var.get("type") == "datasource":
            values[name] = DATASOURCE_VALUE
        elif var.get("includeAll") or var.get("multi"):
            values[name] = var.get("allValue") or ALL
        else:
            current = (var.get("current") or {}).get("value")
            if isinstance(current, list):
                current = current[0] if current else None
            if current is None:
                raise LlmdashError(f"dashboard variable ${name} has no current value to substitute")
            values[name] = str(current)
    return values


def substitute(expr: str, values: dict[str, str], step_s: float, range_s: float, scrape_s: float,
               default: str | None = None) -> str:
    """`expr` with every variable replaced: built-ins from the step, range and scrape interval, the
    others from `values`; a variable in neither takes `default`, or is an error when there is none."""
    known = values | builtins(step_s, range_s, scrape_s)   # a built-in name wins, as in Grafana

    def replace(match: re.Match) -> str:
        name = match[1] or match[2] or match[3]
        if name in known:
            return known[name]
        if default is None:
            raise LlmdashError(f"unknown dashboard variable ${name} in {expr[:80]!r}")
        return default
    return VARIABLE.sub(replace, expr)
