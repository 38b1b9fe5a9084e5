"""An output directory changed under a running `update_outputs` (issue 28): a directory swapped for a symlink
to somewhere else, a listed file saved by its user, the same directory named through a link by a second run.
The change is made at the run's halfway point (its rename pause hook), in this process: no sleep, no timing."""

import fcntl
import hashlib
import json
import os

import pytest

from llmdash import atomic
from llmdash.errors import LlmdashError
from tests.support.trees import snapshot

FIRST = {"mtail/a.mtail": "A\n", "mtail/b.mtail": "B\n"}
SECOND = {"mtail/a.mtail": "A2\n"}          # b.mtail is no longer produced: the run removes it


@pytest.fixture
def out(tmp_path):
    out = tmp_path / "gen"
    atomic.update_outputs(out, FIRST, ["mtail"])
    return out


def test_a_directory_swapped_for_a_symlink_during_the_run_cannot_redirect_a_removal(out, tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "b.mtail").write_text("B\n")        # what the manifest lists, byte for byte: its digest matches
    (outside / "a.mtail").write_text("someone else's\n")
    before = snapshot(outside)

    def swap():
        (out / "mtail").rename(tmp_path / "moved-away")
        (out / "mtail").symlink_to(outside, target_is_directory=True)

    monkeypatch.setattr(atomic, "_pause_for_tests", swap)
    atomic.update_outputs(out, SECOND, ["mtail"])
    assert snapshot(outside) == before
    # every write and removal went to the directory opened before the swap
    assert (tmp_path / "moved-away" / "a.mtail").read_text() == "A2\n"
    assert not (tmp_path / "moved-away" / "b.mtail").exists()


def test_a_listed_file_its_user_saves_during_the_run_is_kept(out, monkeypatch):
    monkeypatch.setattr(atomic, "_pause_for_tests", lambda: (out / "mtail" / "b.mtail").write_text("my edit\n"))
    outcome = atomic.update_outputs(out, SECOND, ["mtail"])
    assert (out / "mtail" / "b.mtail").read_text() == "my edit\n"
    assert outcome.removed == [] and outcome.edited == ["mtail/b.mtail"]
    assert "mtail/b.mtail" not in json.loads((out / atomic.MANIFEST).read_text())["files"]


def test_two_spellings_of_one_output_directory_take_turns(out, tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    alias = tmp_path / "elsewhere" / "alias"
    alias.symlink_to(out, target_is_directory=True)   # `--out alias` and `--out gen` write one directory
    monkeypatch.setattr(atomic, "LOCK_WAIT_SECONDS", 0)
    held = os.open(out.parent, os.O_RDONLY | os.O_DIRECTORY)    # a run writing `gen` holds its parent's lock
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(LlmdashError, match="another llmdash run has held"):
            atomic.update_outputs(alias, SECOND, ["mtail"])
    finally:
        os.close(held)
    assert (out / "mtail" / "a.mtail").read_text() == "A\n"


def test_a_huge_manifest_is_set_aside_unread(out):
    with open(out / atomic.MANIFEST, "w") as manifest:
        manifest.truncate(1 << 30)   # 1 GiB, sparse: reading it whole would take 1 GiB of memory
    outcome = atomic.plan_outputs(out, SECOND, ["mtail"])
    assert outcome.ignored_manifest == "not a regular UTF-8 file of at most 16777216 bytes"
    assert outcome.removed == []


def test_a_deeply_nested_manifest_is_set_aside_naming_the_file(out):
    (out / atomic.MANIFEST).write_text("[" * 100_000 + "]" * 100_000)
    outcome = atomic.plan_outputs(out, SECOND, ["mtail"])
    assert outcome.ignored_manifest == "nested too deeply to be llmdash's"
    assert outcome.notes()[0].startswith(f"note: ignored {out / atomic.MANIFEST} (nested too deeply")


@pytest.mark.parametrize("entry", ["mtail/" + "x" * 300, "/etc/passwd", "mtail/../../x", "mtail//b", "mtail/\0b"])
def test_a_manifest_entry_that_is_no_plain_relative_path_sets_the_manifest_aside(out, entry):
    manifest = json.loads((out / atomic.MANIFEST).read_text())
    manifest["files"][entry] = hashlib.sha256(b"B\n").hexdigest()
    (out / atomic.MANIFEST).write_text(json.dumps(manifest))
    outcome = atomic.update_outputs(out, SECOND, ["mtail"])
    assert outcome.ignored_manifest.startswith("entry ")
    assert "is not a path inside the directory" in outcome.ignored_manifest
    assert (out / "mtail" / "b.mtail").exists()      # nothing a damaged manifest lists is removed


def test_a_huge_existing_output_is_replaced_without_being_read(out):
    """Issue 28: a 1 GB dashboards/vllm.json was read whole (2.1 GB of memory) to compare it with the new one."""
    import tracemalloc
    with open(out / "mtail" / "a.mtail", "w") as huge:
        huge.truncate(256 << 20)   # sparse: no disk, but 256 MiB to read
    tracemalloc.start()
    try:
        outcome = atomic.plan_outputs(out, SECOND, ["mtail"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert outcome.written == ["mtail/a.mtail"]
    assert peak < 8 << 20, f"{peak} bytes allocated"
