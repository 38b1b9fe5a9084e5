"""`promtool test rules` over a rule file and hand-shaped input series: the one runner every rules test uses."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
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


def run_rule_tests(tmp_path: Path, rules: Path | Sequence[Path], input_series: list[dict], checks: list[dict],
                   timeout: float = 600, interval: str = "1m") -> None:
    """Evaluate `rules` (one rule file or several, loaded together) every minute over `input_series` (samples
    `interval` apart) and assert every `promql_expr_test` check."""
    files = [rules] if isinstance(rules, Path) else list(rules)
    test = {"rule_files": [str(path) for path in files], "evaluation_interval": "1m",
            "tests": [{"interval": interval, "input_series": input_series, "promql_expr_test": checks}]}
    path = tmp_path / "test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=10_000))
    result = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
