"""`promtool test rules` over a rule file and hand-shaped input series: the one runner every rules test uses.

Which promtool: the caller's, from a fixture, so that every test running one is marked e2e (tests/conftest.py) and
stays out of `make test-unit`: the `promtool` fixture's (Debian's 2.42, on PATH), or, for a test that must hold on
Prometheus 2's closed and Prometheus 3's left-open ranges, the `stack` fixture's `stack.binary("promtool")`."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml


def promtool() -> str:
    """The real promtool on PATH; its absence fails the test (CI installs it), it never skips."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: install Debian's prometheus package (apt-get install prometheus); "
                    ".ci/run does this on CI")
    return path


def run_rule_tests(binary: str, tmp_path: Path, rules: Path | Sequence[Path], input_series: list[dict],
                   checks: list[dict], timeout: float = 600, alert_checks: list[dict] | None = None,
                   interval: str = "1m", group_eval_order: list[str] | None = None) -> None:
    """Evaluate `rules` (one rule file or several, loaded together) with the promtool at `binary` every minute over
    `input_series` (samples `interval` apart) and assert every `promql_expr_test` check (and `alert_rule_test`
    check, given). `group_eval_order`: the groups evaluated first at each instant, in this order (else every
    group in file order: promtool's own order is random, and it evaluates every group at the test's interval,
    whatever the group's own `interval`)."""
    files = [rules] if isinstance(rules, Path) else list(rules)
    group_eval_order = group_eval_order or in_file_order(files)
    case = {"interval": interval, "input_series": input_series, "promql_expr_test": checks}
    if alert_checks:
        case["alert_rule_test"] = alert_checks
    test = {"rule_files": [str(path) for path in files], "evaluation_interval": "1m",
            **({"group_eval_order": group_eval_order} if group_eval_order else {}), "tests": [case]}
    path = tmp_path / "test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=10_000))
    result = subprocess.run([binary, "test", "rules", str(path)], capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def in_file_order(files: Sequence[Path]) -> list[str]:
    """Every group of the rule files, in file order: a rule file's second group reads what its first writes."""
    return list(dict.fromkeys(group["name"] for path in files
                              for group in yaml.safe_load(Path(path).read_text())["groups"]))


def firing_alerts(name: str, at_min: float, expected: list[dict], **matchers) -> dict:
    """A `promql_expr_test` check: at `at_min`, the firing `name` alerts (of `matchers`) are exactly `expected`
    (each a label set beside alertname and alertstate)."""
    extra = "".join(f', {k}="{v}"' for k, v in matchers.items())
    return {"expr": f'ALERTS{{alertname="{name}", alertstate="firing"{extra}}}', "eval_time": f"{at_min:g}m",
            "exp_samples": [{"labels": "ALERTS{" + ",".join(f'{k}="{v}"' for k, v in sorted(
                {"alertname": name, "alertstate": "firing", **labels}.items())) + "}", "value": 1}
                for labels in expected]}
