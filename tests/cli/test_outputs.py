"""`llmdash build` and `llmdash rules` in a directory they share with others: only what llmdash wrote is ever
removed, a symlinked directory is refused, and the report counts writes, unchanged files and removals apart."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llmdash.atomic import MANIFEST
from tests.support.trees import plant, snapshot

pytestmark = pytest.mark.process   # runs the llmdash command in a fresh interpreter, as a user does

ROOT = Path(__file__).resolve().parents[2]
VLLM_ONLY = "engines: [vllm]\n"
VLLM_AND_SGLANG = "engines: [vllm, sglang]\n"
SGLANG_FILES = ["dashboards-v2/sglang.json", "dashboards/sglang.json", "mixin/dashboards_out/sglang.json",
                "mtail/sglang.mtail", "rules/sglang.rules.yaml"]


def llmdash(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "llmdash.cli.main", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def build(out: Path, *args, config: str | None = None, command: str = "build"):
    options = ()
    if config is not None:
        path = out.parent / f"config-{hashlib.sha256(config.encode()).hexdigest()[:8]}.yaml"
        path.write_text(config)
        options = ("--config", str(path))
    return llmdash(*options, command, "--out", str(out), *args)


OTHER_TEAMS = {"rules/payments.rules.yaml": "groups: []\n", "alertmanager/routes.yaml": "route: {}\n",
               "dashboards/payments.json": '{"uid": "payments"}\n', "mixin/notes.yaml": "x: 1\n",
               "mixin/dashboards_out/payments.json": "{}\n", "mtail/nginx.mtail": "counter requests\n"}


def test_rules_into_a_shared_prometheus_directory_keeps_other_teams_rule_files(tmp_path):
    etc = tmp_path / "prometheus"
    theirs = plant(etc, {"rules/payments.rules.yaml": "groups: []\n", "rules/node.rules.yaml": "groups: []\n",
                         "alertmanager/routes.yaml": "route: {}\n"})
    result = build(etc, command="rules")
    assert result.returncode == 0, result.stderr
    assert "note: left alone 3 files llmdash did not write: 1 in alertmanager/, 2 in rules/" in result.stdout
    result = build(etc, config=VLLM_ONLY, command="rules")   # fewer engines: their rules go, the others' stay
    assert result.returncode == 0, result.stderr
    after = snapshot(etc)
    assert {rel: after.get(rel) for rel in theirs} == theirs
    assert sorted(p.name for p in (etc / "rules").iterdir()) == ["node.rules.yaml", "payments.rules.yaml",
                                                                 "vllm.rules.yaml"]


def test_a_build_removes_only_the_dropped_engines_files_and_never_a_foreign_one(tmp_path):
    out = tmp_path / "gen"
    assert build(out, config=VLLM_AND_SGLANG).returncode == 0
    theirs = plant(out, OTHER_TEAMS)
    before = snapshot(out)
    result = build(out, config=VLLM_ONLY)
    assert result.returncode == 0, result.stderr
    after = snapshot(out)
    assert sorted(set(before) - set(after)) == SGLANG_FILES
    changed = sorted(rel for rel in after if before.get(rel) != after[rel])
    # the inhibitions' same-unit rule matches every built engine's unit labels: without sglang, no dp_rank
    assert changed == [MANIFEST, "alertmanager/alertmanager.yml", "alertmanager/llmdash-inhibit-rules.yaml",
                       "mixin/prometheus_alerts.yaml", "mixin/prometheus_rules.yaml"]
    assert {rel: after[rel] for rel in theirs} == theirs
    assert result.stdout.count("note: left alone") == 1
    assert "left alone 6 files llmdash did not write" in result.stdout
    assert build(out, "--check", config=VLLM_ONLY).returncode == 0


def test_the_report_counts_written_unchanged_and_removed_apart(tmp_path):
    out = tmp_path / "gen"
    assert build(out, config=VLLM_AND_SGLANG).returncode == 0
    (out / "rules/vllm.rules.yaml").write_text("stale\n")
    result = build(out, config=VLLM_ONLY)
    assert result.returncode == 0, result.stderr
    # vllm's rules rewritten, both mixin rule files now without sglang's and both Alertmanager files without its
    # dp_rank unit label; the other 15 of the 20 files (the eight runbooks and vllm's v2 twin among them) as they
    # were; sglang's five files removed: a removal is no write
    summary = result.stdout.splitlines()[0]
    assert summary == f"files under {out}/: 5 written, 15 unchanged, 5 removed"
    assert "  wrote rules/vllm.rules.yaml" in result.stdout.splitlines()
    assert [line for line in result.stdout.splitlines() if line.startswith("  removed")] == \
        [f"  removed {rel}" for rel in SGLANG_FILES]
    assert "of" not in summary.split(":", 1)[1]


def test_a_file_llmdash_wrote_but_someone_edited_is_left_and_named(tmp_path):
    out = tmp_path / "gen"
    assert build(out, config=VLLM_AND_SGLANG).returncode == 0
    (out / "rules/sglang.rules.yaml").write_text("# tuned by hand\ngroups: []\n")
    result = build(out, config=VLLM_ONLY)
    assert result.returncode == 0, result.stderr
    assert (out / "rules/sglang.rules.yaml").read_text() == "# tuned by hand\ngroups: []\n"
    assert not (out / "dashboards/sglang.json").exists()
    assert "note: left 1 file llmdash no longer writes but that was edited since: rules/sglang.rules.yaml" \
        in result.stdout
    # no longer ours: the next run counts it with the files llmdash did not write
    again = build(out, config=VLLM_ONLY)
    assert "left alone 1 file llmdash did not write: 1 in rules/" in again.stdout


@pytest.mark.parametrize("link", ["dashboards", "mixin", "mixin/dashboards_out"])
def test_a_symlinked_directory_inside_out_is_refused_and_its_target_untouched(tmp_path, link):
    out, elsewhere = tmp_path / "gen", tmp_path / "elsewhere"
    assert build(out).returncode == 0
    shutil.rmtree(out / link)
    plant(elsewhere, {"keep.json": "{}\n", "vllm.json": "mine\n"})
    (out / link).symlink_to(elsewhere, target_is_directory=True)
    before, outside = snapshot(out), snapshot(elsewhere)
    result = build(out, config=VLLM_ONLY)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: ") and f"{str(out / link)!r} is a symlink" in result.stderr
    assert snapshot(elsewhere) == outside and snapshot(out) == before


def test_the_committed_output_without_a_manifest_is_adopted(tmp_path):
    out = tmp_path / "generated"
    shutil.copytree(ROOT / "generated", out)
    (out / MANIFEST).unlink()                          # generated/ as committed before manifests existed
    (out / "dashboards/old-engine.json").write_text('{"uid": "llmdash-old-engine"}\n')
    result = build(out)
    assert result.returncode == 0, result.stderr
    assert re.match(rf"files under {re.escape(str(out))}/: 0 written, \d+ unchanged, 0 removed$",
                    result.stdout.splitlines()[0])
    listed = json.loads((out / MANIFEST).read_text())["files"]
    assert sorted(listed) == sorted(rel for rel in snapshot(ROOT / "generated") if rel != MANIFEST)
    assert (out / "dashboards/old-engine.json").exists()   # not provably ours: left, and said so
    assert "left alone 1 file llmdash did not write: 1 in dashboards/" in result.stdout
    assert snapshot(out) == {**snapshot(ROOT / "generated"),
                             "dashboards/old-engine.json": b'{"uid": "llmdash-old-engine"}\n'}
    assert build(out, "--check").returncode == 0


def test_a_manifest_naming_a_path_outside_out_removes_nothing(tmp_path):
    out, victim = tmp_path / "gen", tmp_path / "victim.txt"
    victim.write_text("precious\n")
    assert build(out).returncode == 0
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["files"]["dashboards/../../victim.txt"] = hashlib.sha256(b"precious\n").hexdigest()
    (out / MANIFEST).write_text(json.dumps(manifest))
    result = build(out, config=VLLM_ONLY)
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "precious\n"
    assert "note: ignored" in result.stdout and "nothing it listed was removed" in result.stdout
    assert (out / "dashboards/sglang.json").exists()   # a damaged manifest proves nothing is ours


def test_a_path_with_a_newline_stays_on_the_one_error_line(tmp_path):
    config = tmp_path / "bad\nname.yaml"
    result = llmdash("--config", str(config), "build", "--out", str(tmp_path / "gen"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: ") and "bad\\x0aname.yaml" in result.stderr
    out = tmp_path / "two\nlines"
    assert build(out).returncode == 0
    shutil.rmtree(out / "rules")
    (out / "rules").symlink_to(tmp_path, target_is_directory=True)
    result = build(out)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{str(out / 'rules')!r} is a symlink" in result.stderr   # quoted: two\nlines, escaped once


def test_help_of_every_writing_command_states_the_rule():
    for command in ("build", "rules", "provision"):
        result = llmdash(command, "--help")
        flat = " ".join(result.stdout.split())
        assert re.search(r"removes a file only when \S+/\.llmdash-manifest\.json says an earlier run wrote it and it "
                         r"is unchanged since, leaving every other file alone", flat), command


def test_no_traceback_on_a_read_only_filesystem_over_an_older_output(read_only_mount):
    root, make_read_only = read_only_mount
    out = root / "gen"
    assert build(out).returncode == 0
    (out / "dashboards/vllm.json").write_text("{}\n")   # an older output: the build has to write
    assert llmdash("provision", str(root / "gitops")).returncode == 0
    (root / "gitops/dashboards/vllm.json").write_text("{}\n")
    make_read_only()
    for result in (build(out), llmdash("provision", str(root / "gitops"))):
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert "Traceback" not in result.stderr and "Read-only file system" in result.stderr


@pytest.fixture
def read_only_mount(tmp_path):
    """A tmpfs mounted here, to be remounted read-only: only root can mount."""
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only tmpfs needs root")
    root = tmp_path / "mnt"
    root.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(root)], check=True)
    try:
        yield root, lambda: subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
    finally:
        subprocess.run(["umount", str(root)], check=True)
