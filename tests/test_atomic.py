"""llmdash.atomic's manifest in-process (the command-line tests in tests/cli run it through llmdash): a file is
removed only while the manifest lists it and its digest is still what was written, files llmdash never wrote
are left alone and counted, other commands' manifest entries are kept, and a damaged manifest is never trusted."""

from __future__ import annotations

import hashlib
import json

import pytest

from llmdash import atomic
from llmdash.atomic import MANIFEST, plan_outputs, update_outputs
from llmdash.errors import LlmdashError

FILES = {"rules/a.yaml": "a\n", "rules/b.yaml": "b\n"}


def manifest(root) -> dict[str, str]:
    return json.loads((root / MANIFEST).read_text())["files"]


def test_the_manifest_lists_each_file_written_with_its_sha256(tmp_path):
    update_outputs(tmp_path, FILES, ["rules"])
    assert manifest(tmp_path) == {
        "rules/a.yaml": "87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7",   # sha256 of "a\n"
        "rules/b.yaml": "0263829989b6fd954f72baaf2fc64bc2e2f01d692d4de72986ea808f6e99813f"}   # sha256 of "b\n"


def test_a_file_no_longer_written_is_removed_while_unchanged(tmp_path):
    update_outputs(tmp_path, FILES, ["rules"])
    outcome = update_outputs(tmp_path, {"rules/a.yaml": "a\n"}, ["rules"])
    assert (outcome.removed, outcome.edited) == (["rules/b.yaml"], [])
    assert not (tmp_path / "rules/b.yaml").exists()
    assert manifest(tmp_path) == {"rules/a.yaml": hashlib.sha256(b"a\n").hexdigest()}


def test_an_edited_file_no_longer_written_is_left_and_named(tmp_path):
    update_outputs(tmp_path, FILES, ["rules"])
    (tmp_path / "rules/b.yaml").write_text("b, edited by hand\n")
    outcome = update_outputs(tmp_path, {"rules/a.yaml": "a\n"}, ["rules"])
    assert (outcome.removed, outcome.edited) == ([], ["rules/b.yaml"])
    assert (tmp_path / "rules/b.yaml").read_text() == "b, edited by hand\n"


def test_the_plan_names_an_edited_file_edited_not_removed(tmp_path):
    """`plan_outputs` is `build --check`'s answer: it reads the digest itself (the write's second check would
    keep the file, but the plan would say it is removed)."""
    update_outputs(tmp_path, FILES, ["rules"])
    (tmp_path / "rules/b.yaml").write_text("b, edited by hand\n")
    plan = plan_outputs(tmp_path, {"rules/a.yaml": "a\n"}, ["rules"])
    assert (plan.removed, plan.edited) == ([], ["rules/b.yaml"])


def test_a_file_llmdash_never_wrote_is_left_alone_and_counted(tmp_path):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules/theirs.yaml").write_text("another team's\n")
    outcome = update_outputs(tmp_path, FILES, ["rules"])
    assert outcome.foreign == ["rules/theirs.yaml"] and outcome.removed == []
    assert (tmp_path / "rules/theirs.yaml").read_text() == "another team's\n"
    assert "note: left alone 1 file llmdash did not write: 1 in rules/" in outcome.lines()


def test_entries_of_another_scope_are_kept_and_never_removed(tmp_path):
    update_outputs(tmp_path, {"dashboards/d.json": "{}\n"}, ["dashboards"])
    outcome = update_outputs(tmp_path, FILES, ["rules"])
    assert outcome.removed == [] and (tmp_path / "dashboards/d.json").exists()
    assert set(manifest(tmp_path)) == {"dashboards/d.json", *FILES}


@pytest.mark.parametrize("entry, why", [
    ({"../outside": "0" * 64}, "entry '../outside' is not a path inside the directory with its sha256"),
    ({"rules/b.yaml": "not-a-digest"}, "entry 'rules/b.yaml' is not a path inside the directory with its sha256"),
    ({"/etc/passwd": "0" * 64}, "entry '/etc/passwd' is not a path inside the directory with its sha256"),
], ids=["parent-path", "bad-digest", "absolute-path"])
def test_a_damaged_manifest_is_set_aside_and_nothing_it_lists_is_removed(tmp_path, entry, why):
    update_outputs(tmp_path, FILES, ["rules"])
    (tmp_path / MANIFEST).write_text(json.dumps({"files": entry}))
    outcome = update_outputs(tmp_path, {"rules/a.yaml": "a\n"}, ["rules"])
    assert outcome.ignored_manifest == why
    assert outcome.removed == [] and (tmp_path / "rules/b.yaml").exists()


def test_a_symlinked_directory_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out/rules").symlink_to(elsewhere)
    with pytest.raises(LlmdashError, match="is a symlink; llmdash writes only in real directories"):
        update_outputs(tmp_path / "out", FILES, ["rules"])
    assert list(elsewhere.iterdir()) == []


def test_a_users_own_file_at_an_aside_path_is_kept(tmp_path):
    (tmp_path / "kustomization.yaml").write_text("mine\n")
    outcome = update_outputs(tmp_path, {"kustomization.yaml": "ours\n"}, ["kustomization.yaml", "llmdash"],
                             aside={"kustomization.yaml": "llmdash/kustomization.yaml"})
    assert outcome.diverted == {"kustomization.yaml": "llmdash/kustomization.yaml"}
    assert (tmp_path / "kustomization.yaml").read_text() == "mine\n"
    assert (tmp_path / "llmdash/kustomization.yaml").read_text() == "ours\n"


def test_a_directory_swapped_for_a_symlink_after_the_plan_is_refused_by_the_write_itself(tmp_path):
    """The writes go through directories opened without following a link (O_NOFOLLOW): a directory replaced by a
    link between the plan's symlink check and the renames cannot redirect them."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    update_outputs(out, FILES, ["rules"])
    (out / "rules").rename(tmp_path / "moved")
    (out / "rules").symlink_to(elsewhere)
    with pytest.raises(LlmdashError, match="is a symlink or not a directory; llmdash writes only in real directories"):
        atomic._replace(out, out, {"rules/a.yaml": "new\n"}, {})
    assert list(elsewhere.iterdir()) == []


def test_a_file_saved_by_its_user_after_the_plan_is_kept_not_removed(tmp_path):
    """The digest of a file to remove is checked again right before the unlink."""
    update_outputs(tmp_path, FILES, ["rules"])
    (tmp_path / "rules/b.yaml").write_text("saved by its user\n")
    kept = atomic._replace(tmp_path, tmp_path, {}, {"rules/b.yaml": hashlib.sha256(b"b\n").hexdigest()})
    assert kept == ["rules/b.yaml"] and (tmp_path / "rules/b.yaml").read_text() == "saved by its user\n"
