"""Alert panels and annotations count an alert once however many replicas of a ruler write `ALERTS`.

With HA rulers (two Prometheus replicas, or vmalert pairs) remote-writing into one store, every firing
alert exists once per replica, told apart by the replica's external label. Evaluated by Prometheus' own
engine (`promtool test rules`) on such series: the fleet table's *Firing alerts* column must say 1, and the
annotations must return one series per alert, not one per replica.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from llmdash.dashboards.variables import ALL, substitute
from llmdash.dashboards.walk import walk_panels
from llmdash.vocabulary import Alert, Annotations, FLEET_UID

pytestmark = pytest.mark.e2e

REPLICAS = ("prometheus-0", "prometheus-1")
ALERT = {"alertname": str(Alert.PREEMPTIONS_HIGH), "alertstate": "firing", "llm_engine": "vllm",
         "model_name": "llama", "cluster": "c1", "namespace": "serving", "instance": "vllm-0:8000",
         "severity": "critical"}


def _series(labels: dict) -> str:
    return "ALERTS{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _promtool_results(tmp_path, exprs: dict[str, str]) -> dict[str, list[str]]:
    """Each expression's result at 5m on two replicas' copies of one firing alert, as promtool prints it."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found: install Debian's prometheus package (apt-get install prometheus)")
    inputs = [{"series": _series({**ALERT, "replica": r}), "values": "1x10"} for r in REPLICAS]
    results = {}
    for name, expr in exprs.items():
        test = {"rule_files": [], "evaluation_interval": "1m", "tests": [{
            "interval": "1m", "input_series": inputs,
            "promql_expr_test": [{"expr": expr, "eval_time": "5m", "exp_samples": []}]}]}
        path = tmp_path / "test.yaml"
        path.write_text(yaml.safe_dump(test, sort_keys=False, width=10_000))
        out = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
        got = [line.strip() for line in (out.stdout + out.stderr).splitlines() if line.strip().startswith("got:")]
        assert got, f"{name}: promtool said {out.stdout[-500:]} {out.stderr[-500:]}"
        results[name] = got[0]
    return results


def _query(expr: str) -> str:
    return substitute(expr, {}, 60, 3600, 15, default=ALL)


def test_alert_panels_and_annotations_count_each_alert_once(tmp_path, default_build):
    fleet = default_build["fleet"]
    assert fleet["uid"] == FLEET_UID
    targets = [t["expr"] for placed in walk_panels(fleet) for t in placed.panel.get("targets", [])
               if "ALERTS" in t.get("expr", "")]
    assert targets, "the fleet dashboard has no ALERTS-based panel"
    annotations = {f"{board}: {a['name']}": a["target"]["expr"] for board in ("fleet", "vllm")
                   for a in default_build[board]["annotations"]["list"]
                   if "ALERTS" in (a.get("target") or {}).get("expr", "")}
    assert f"vllm: {Annotations.ALERTS_FIRING.name}" in annotations
    results = _promtool_results(tmp_path, {**{f"fleet target {i}": _query(e) for i, e in enumerate(targets)},
                                           **{name: _query(e) for name, e in annotations.items()}})
    for name, got in results.items():
        samples = re.findall(r"\{([^{}]*)\} (\S+)", got)
        # one series, value 1, without the replica label: the alert once
        assert len(samples) == 1 and "replica=" not in samples[0][0] and float(samples[0][1]) == 1, f"{name}: {got}"
