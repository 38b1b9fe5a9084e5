"""`llmdash diff`, `build`, `rules` and `provision` never create, change or delete a path outside the directory
they were asked to write (issue 28), whatever names git or a manifest offers or a symlink swapped in mid-run
points at. One sibling directory, beside the repository and the output, is snapshotted across every attack."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llmdash.atomic import MANIFEST
from llmdash.engines.catalog import CATALOG_DIR
from tests.support import gitobjects
from tests.support.handshake import Halfway
from tests.support.trees import snapshot

pytestmark = pytest.mark.process   # runs the llmdash command in a fresh interpreter, as a user does

LLMDASH = Path(sys.executable).with_name("llmdash")
SIBLING_FILES = {"existing.yaml": b"kept as it is\n", "existing.json": b"{}\n"}


def run(*args, cwd, env=None, wait=True):
    environment = {k: v for k, v in os.environ.items() if k != "LLMDASH_CATALOG_DIR"} | (env or {})
    process = subprocess.Popen([str(LLMDASH), *args], cwd=cwd, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    if not wait:
        return process
    stdout, stderr = process.communicate(timeout=300)
    return process.returncode, stdout, stderr


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, **gitobjects.GIT_ENV})


@pytest.fixture
def place(tmp_path):
    """(sibling, private TMPDIR): the sibling sits where a `..`-name from llmdash's work directory lands."""
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    for name, content in SIBLING_FILES.items():
        (sibling / name).write_bytes(content)
    (tmp_path / "tmp").mkdir()
    return sibling, {"TMPDIR": str(tmp_path / "tmp")}


def source_repo(tmp_path) -> Path:
    repo = tmp_path / "llmdash-clone"
    (repo / "engines").mkdir(parents=True)
    shutil.copy(CATALOG_DIR / "vllm.yaml", repo / "engines" / "vllm.yaml")
    (repo / "llmdash.yaml").write_text("engines: [vllm]\n")
    (repo / "pyproject.toml").write_text('[project]\nname = "llmdash"\n')
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    return repo


def evil_branch(repo: Path, folder: str, names: list[str], base: str = "HEAD", branch: str = "evil") -> None:
    payload = gitobjects.blob(repo, b"written by the branch author\n")
    tree = gitobjects.replace_folder(repo, base, folder, [("100644", name, payload) for name in names])
    gitobjects.commit_tree_on(repo, branch, tree, base)


def assert_refused(result, message):
    code, stdout, stderr = result
    assert code == 2, stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1] == f"error: {message}"


# llmdash's work directory is $TMPDIR/llmdash-diff-*/tree-<commit>/engines: four levels up is the test's folder.
ENGINE_ESCAPES = ["../" * 4 + "sibling/existing.yaml", "../" * 4 + "sibling/new.yaml"]


def test_diff_refuses_a_revisions_catalog_name_leaving_the_work_directory(tmp_path, place):
    sibling, env = place
    repo = source_repo(tmp_path)
    evil_branch(repo, "engines", ENGINE_ESCAPES)
    for args in (["diff", "main", "evil"], ["diff", "evil"]):
        assert_refused(run(*args, cwd=repo, env=env),
                       f"evil: git entry 'engines/{ENGINE_ESCAPES[0]}' has an empty, '.' or '..' component; "
                       "refusing to write it")
    assert snapshot(sibling) == SIBLING_FILES


def test_plain_diff_refuses_a_committed_dashboard_name_leaving_the_work_directory(tmp_path, place):
    sibling, env = place
    repo = tmp_path / "infra"
    repo.mkdir()
    (repo / "llmdash.yaml").write_text("engines: [vllm]\n")
    assert run("build", cwd=repo)[0] == 0
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    # $TMPDIR/llmdash-diff-*/committed/generated/dashboards: five levels up is the test's folder
    escape = "../" * 5 + "sibling/existing.json"
    evil_branch(repo, "generated/dashboards", [escape], branch="main")   # HEAD itself
    assert_refused(run("diff", cwd=repo, env=env),
                   f"HEAD: git entry 'generated/dashboards/{escape}' has an empty, '.' or '..' component; "
                   "refusing to write it")
    assert snapshot(sibling) == SIBLING_FILES


def _swap_for_link_mid_run(out: Path, folder: str, sibling: Path, halfway: Halfway) -> subprocess.Popen:
    """Start a build that removes files from out/folder; once it is held halfway through its renames, move
    out/folder away and put a symlink to a copy of it (the same bytes: the same digests) in the sibling in its
    place, then let it go on."""
    copy = sibling / f"copy-of-{folder}"
    shutil.copytree(out / folder, copy)
    process = run("build", "--out", str(out), cwd=out.parent, env=halfway.env, wait=False)
    halfway.wait(process)
    (out / folder).rename(out.parent / f"moved-{folder}")
    (out / folder).symlink_to(copy, target_is_directory=True)
    halfway.resume(process)
    return process


def test_no_command_touches_a_sibling_directory_across_every_attack(tmp_path, place):
    sibling, env = place
    before = snapshot(sibling)

    # names from git: a revision's catalogs, HEAD's committed dashboards
    repo = source_repo(tmp_path)
    evil_branch(repo, "engines", ENGINE_ESCAPES)
    assert run("diff", "main", "evil", cwd=repo, env=env)[0] == 2
    assert run("diff", "evil", cwd=repo, env=env)[0] == 2

    # names from a manifest: an entry leaving the output, listed with the digest of the sibling's file
    work = tmp_path / "work"
    work.mkdir()
    (work / "llmdash.yaml").write_text("engines: [vllm, sglang]\n")
    for args in (["build", "--out", "gen"], ["rules", "--out", "gen-rules"], ["provision", "prov"]):
        assert run(*args, cwd=work)[0] == 0, args
    for out in ("gen", "gen-rules", "prov"):
        manifest = json.loads((work / out / MANIFEST).read_text())
        manifest["files"]["../../sibling/existing.yaml"] = hashlib.sha256(SIBLING_FILES["existing.yaml"]).hexdigest()
        (work / out / MANIFEST).write_text(json.dumps(manifest))
    (work / "llmdash.yaml").write_text("engines: [vllm]\n")
    assert run("build", "--out", "gen", cwd=work)[0] == 0
    assert run("rules", "--out", "gen-rules", cwd=work)[0] == 0
    assert run("provision", "prov", cwd=work)[0] == 0

    # an owned directory that is a symlink to the sibling when the run starts
    for args, folder in ((["build", "--out", "gen"], "mtail"), (["rules", "--out", "gen-rules"], "rules"),
                         (["provision", "prov"], "dashboards")):
        out = work / args[-1]
        shutil.rmtree(out / folder)
        (out / folder).symlink_to(sibling, target_is_directory=True)
        code, _, stderr = run(*args, cwd=work)
        assert code == 2 and "is a symlink" in stderr and "Traceback" not in stderr, stderr
        (out / folder).unlink()
    assert snapshot(sibling) == before

    # an owned directory swapped for a symlink while the run goes on: its removals stay in the real directory
    (work / "llmdash.yaml").write_text("engines: [vllm, sglang]\n")
    fresh = work / "fresh"
    assert run("build", "--out", str(fresh), cwd=work)[0] == 0
    (work / "llmdash.yaml").write_text("engines: [vllm]\n")
    copy_before = snapshot(fresh / "rules")
    handshake = tmp_path / "handshake"
    handshake.mkdir()
    process = _swap_for_link_mid_run(fresh, "rules", sibling, Halfway(handshake))
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert snapshot(sibling / "copy-of-rules") == copy_before        # nothing deleted through the link
    assert not (work / "moved-rules" / "sglang.rules.yaml").exists()   # removed where it was written
    (sibling / "copy-of-rules").rename(tmp_path / "copy-of-rules")   # the test's own file, not an attack's
    assert snapshot(sibling) == before
