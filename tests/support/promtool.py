"""`promtool test rules` over a rule file and hand-shaped input series: the one runner every rules test uses."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml


def promtool() -> str:
    """The real promtool; its absence fails the test (CI installs it), it never skips."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: install Debian's prometheus package (apt-get install prometheus); "
                    ".ci/run does this on CI")
    return path


def run_rule_tests(tmp_path: Path, rules: Path, input_series: list[dict], checks: list[dict],
                   timeout: float = 600, group_eval_order: list[str] | None = None) -> None:
    """Evaluate `rules` every minute over `input_series` (1m apart) and assert every `promql_expr_test` check.
    `group_eval_order`: the groups evaluated first at each instant, in this order (else promtool's is random)."""
    test = {"rule_files": [str(rules)], "evaluation_interval": "1m",
            **({"group_eval_order": group_eval_order} if group_eval_order else {}),
            "tests": [{"interval": "1m", "input_series": input_series, "promql_expr_test": checks}]}
    path = tmp_path / "test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=10_000))
    result = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
