"""`llmdash diff` run for real, in the repository the user stands in: an infrastructure repository
holding only llmdash.yaml and generated/, and a clone of the llmdash source."""

import os
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.e2e   # real git repositories, a clone of this one, builds of both revisions

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def llmdash(*args, cwd):
    return subprocess.run([sys.executable, "-m", "llmdash.cli.main", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items() if k != "LLMDASH_CATALOG_DIR"})


def test_infrastructure_repository_reviews_its_own_config_change(tmp_path):
    infra = tmp_path / "infra" / "observability"  # the project directory need not be the repository's top
    infra.mkdir(parents=True)
    (infra / "llmdash.yaml").write_text("engines: [vllm, sglang]\nselectors:\n  job: vllm-prod\n")
    assert llmdash("build", cwd=infra).returncode == 0
    git(tmp_path / "infra", "init", "-q", "-b", "main")
    git(tmp_path / "infra", "add", "-A")
    git(tmp_path / "infra", "commit", "-q", "-m", "dashboards")

    unchanged = llmdash("diff", cwd=infra)
    assert unchanged.returncode == 0, unchanged.stderr
    assert unchanged.stdout.startswith("llmdash diff: generated/ at HEAD -> working tree (config: ./llmdash.yaml)\n")
    assert "no dashboard or rule changes" in unchanged.stdout

    (infra / "llmdash.yaml").write_text("engines: [vllm, sglang]\nselectors:\n  job: vllm-canary\n")
    changed = llmdash("diff", cwd=infra)
    assert changed.returncode == 1, changed.stderr
    before = [line for line in changed.stdout.splitlines() if line.lstrip().startswith("- ")]
    after = [line for line in changed.stdout.splitlines() if line.lstrip().startswith("+ ")]
    assert before and len(before) == len(after)
    # Exactly the queries: every changed line differs only in the selector's value.
    assert all(old.replace('job="vllm-prod"', 'job="vllm-canary"').replace("- ", "+ ", 1) == new
               for old, new in zip(before, after))
    assert "vllm-prod" not in "".join(after)

    # Against a revision, that revision's own committed llmdash.yaml builds the old side.
    against_head = llmdash("diff", "HEAD", cwd=infra)
    assert against_head.returncode == 1
    assert against_head.stdout.startswith(
        "llmdash diff: HEAD (config: llmdash.yaml at HEAD) -> working tree (config: ./llmdash.yaml)\n")


def test_llmdash_source_with_one_config_for_both_sides_reports_no_change(tmp_path):
    clone = tmp_path / "llmdash"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True, capture_output=True)
    config = tmp_path / "shared.yaml"
    config.write_text("selectors:\n  job: vllm\n")
    (clone / "llmdash.yaml").write_text("selectors:\n  cluster: eu-1\n")  # untracked, for the working tree only

    shared = llmdash("--config", str(config), "diff", "HEAD", cwd=clone)
    assert shared.returncode == 0, shared.stdout + shared.stderr
    assert "no dashboard or rule changes" in shared.stdout

    own = llmdash("diff", "HEAD", cwd=clone)
    assert own.returncode == 1
    assert own.stderr == "building revision HEAD...\nbuilding the working tree...\n"  # progress, not silence
    assert own.stdout.startswith("llmdash diff: HEAD (config: defaults) -> working tree (config: ./llmdash.yaml)\n")
    assert 'cluster="eu-1"' in own.stdout
