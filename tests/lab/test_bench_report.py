"""Benchmark pages go to docs/benchmarks/ and say which commit and day produced them."""

from __future__ import annotations

import datetime
import subprocess

from llmdash.cli.lab import bench_cost_command, bench_detect_command, bench_rules_command
from llmdash.lab import bench_report

NOW = datetime.datetime(2026, 12, 1, 14, 5, tzinfo=datetime.timezone.utc)


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def repo_with_one_commit(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git(tmp_path, "add", "code.py")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "one")
    return git(tmp_path, "rev-parse", "--short", "HEAD")


def test_the_page_names_the_commit_and_the_utc_date(tmp_path, monkeypatch):
    short = repo_with_one_commit(tmp_path)
    monkeypatch.setattr(bench_report, "SOURCE_DIR", tmp_path)
    (tmp_path / "untracked.md").write_text("output of an earlier run\n")   # not code: stays clean
    text = bench_report.page("Query cost", "make bench-cost", "| a |\n|---|\n| 1 |\n", now=NOW)
    assert text.startswith("# Query cost\n\n")
    assert f"Measured on commit {short}, 2026-12-01 14:05 UTC." in text and "+dirty" not in text
    assert text.endswith("| a |\n|---|\n| 1 |\n")


def test_uncommitted_changes_to_tracked_files_mark_the_commit_dirty(tmp_path, monkeypatch):
    short = repo_with_one_commit(tmp_path)
    monkeypatch.setattr(bench_report, "SOURCE_DIR", tmp_path)
    (tmp_path / "code.py").write_text("x = 2\n")
    assert bench_report.commit() == f"{short}+dirty"


def test_outside_a_git_checkout_the_page_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_report, "SOURCE_DIR", tmp_path)
    assert "unknown commit" in bench_report.stamp(NOW)


def test_bench_commands_write_under_docs_benchmarks_by_default():
    defaults = {command.name: next(p.default for p in command.params if p.name == "out")
                for command in (bench_detect_command, bench_cost_command, bench_rules_command)}
    assert {name: str(path) for name, path in defaults.items()} == {
        "bench-detect": "docs/benchmarks/bench-detect.md", "bench-cost": "docs/benchmarks/bench-cost.md",
        "bench-rules": "docs/benchmarks/bench-rules.md"}
