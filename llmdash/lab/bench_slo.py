"""Rule-evaluation cost of the SLO recording rules and burn-rate alerts at 20 and 200 replicas.

Why: the SLO rules look at windows up to 30 days; read from raw per-replica histograms every minute they
would be the most expensive rules of the file. Here only the 5m rates read raw series; every longer window
is computed from recorded per-model rates. This loads bench_cost's synthetic vLLM fleet (2 models, 15 s
scrapes) into a real Prometheus, backfills all recording rules level by level, and evaluates each SLO rule as
an instant query with `stats=all` at the end of the data: samples read per evaluation, times evaluations per
minute. The data covers `HOURS`, so windows longer than that read what exists; their steady-state cost is the
number of samples a full window holds (printed beside it), which does not depend on the replica count.

Run: `python -m llmdash.lab.bench_slo` (minutes; not part of the test suite).
"""

from __future__ import annotations

import re
import math
import sys
import time

from llmdash.config import Config, Objective, Slo
from llmdash.durations import seconds
from llmdash.engines.catalog import load_engine
from llmdash.lab import replay
from llmdash.lab.bench_cost import write_fleet
from llmdash.lab.promserver import PrometheusServer
from llmdash.rules.generate import build_rules

HOURS = 1.6
REPLICAS = (20, 200)
OBJECTIVES = (Objective(name="ttft", target_seconds=1.0, objective=0.99),
              Objective(name="token_latency", target_seconds=0.1, objective=0.99),
              Objective(name="availability", objective=0.999))
CONFIG = Config(engines=("vllm",), slo=Slo(objectives=OBJECTIVES))
RANGE = re.compile(r"\[(\d+[smhdw])(?::(\d+[smhdw]))?\]")


def _reads_raw(expr: str) -> bool:
    """Whether a rule reads raw series: the per-evaluation increments (`x - x offset 1m`), or the coverage's
    presence of raw series (no recorded `llm_slo_` series in it)."""
    return " offset " in expr or "llm_slo_" not in expr


def full_window_samples(expr: str) -> int:
    """Samples one evaluation reads from recorded series once every window is full (1 per minute recorded, or
    1 per subquery step); 0 for raw reads, which are measured."""
    if _reads_raw(expr):
        return 0
    total = 0
    for window, step in RANGE.findall(expr):   # ranges are half a step short of their window: round up
        total += math.ceil(seconds(window) / (seconds(step) if step else 60))
    return total or expr.count("llm_slo_")   # a ratio of two instant reads


def measure(server: PrometheusServer, rules: list[dict], at: float) -> list[tuple[str, int]]:
    out = []
    for rule in rules:
        data = server._api("query", {"query": rule["expr"], "time": f"{at:.0f}", "stats": "all"})
        out.append((rule.get("record") or rule["alert"], int(data["stats"]["samples"]["totalQueryableSamples"])))
    return out


def main() -> None:
    spec = load_engine("vllm")
    model = build_rules(spec, CONFIG)
    groups = model["groups"]
    every_rule = [r for g in groups for r in g["rules"]]
    slo_rules = [r for r in every_rule if "slo" in r.get("labels", {})]
    records = {"groups": [{**g, "rules": [r for r in g["rules"] if "record" in r]} for g in groups]}
    # with objectives and no rules.interval, both groups are pinned to the same minute
    per_minute = 60 / seconds(groups[0]["interval"])
    print(f"{len(slo_rules)} SLO rules for {len(OBJECTIVES)} objectives on vLLM, 2 models; {HOURS} h of data")
    for replicas in REPLICAS:
        end = (time.time() // 3600) * 3600 - 3600
        server = PrometheusServer()
        try:
            path = server.dir / "fleet.om"
            write_fleet(path, spec, replicas, HOURS, end)
            server.backfill(path)
            path.unlink()
            server.start()
            replay.prometheus_record(server, [records], end - HOURS * 3600, end)
            costs = measure(server, slo_rules, end)
            raw = sum(n for (name, n), r in zip(costs, slo_rules) if _reads_raw(r["expr"]))
            derived = sum(n for (name, n), r in zip(costs, slo_rules) if not _reads_raw(r["expr"]))
            steady = sum(full_window_samples(r["expr"]) for r in slo_rules) * 2   # 2 models
            others = sum(n for _, n in measure(server, [r for r in every_rule if r not in slo_rules], end))
            print(f"{replicas:>4} replicas/model: SLO rules read {raw * per_minute:,.0f} raw + "
                  f"{derived * per_minute:,.0f} recorded samples/min now "
                  f"(recorded, full windows: {steady * per_minute:,.0f}/min); "
                  f"the other {len(every_rule) - len(slo_rules)} rules: {others * per_minute:,.0f}/min")
            sys.stdout.flush()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
