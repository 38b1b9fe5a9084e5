"""Updating an output directory (`generated/`, a provisioning directory): only llmdash's files, all at once.

Ours only where we wrote it: every run records the files it wrote in DIR/.llmdash-manifest.json
(path -> sha256 of the content), replaced together with them. A run replaces the files at the paths
it writes, removes a file only when the manifest lists it and its content is still what was written
(an edited one is left and named), and leaves every other file alone, counting them in one line:
`llmdash rules --out /etc/prometheus` must never delete another team's rules. Output without a
manifest (an older llmdash's, or one whose manifest is damaged) adopts the files that are exactly
what the run writes, and nothing else. A symlinked directory inside DIR is refused: writing or
removing through it would touch files somewhere else. Every directory written or removed in is opened
once, component by component without following a link (O_DIRECTORY|O_NOFOLLOW), before anything is
staged, and every write, rename and removal is made relative to that descriptor: a directory swapped for
a symlink while the run goes on cannot redirect it. A listed file's digest is checked again right before
it is unlinked, so a file its user saved during the run is kept. Every file read back (the manifest,
an existing output) is read without following a link and refused above MAX_READ_BACK_BYTES, which no
file llmdash writes comes near.

All at once: every new file is first written in full to a temporary file beside its target; only
then are they renamed into place, one after the other, while SIGINT and SIGTERM wait, so an interrupt
leaves every file old or every file new, never a mix. Files are replaced inside the existing
directories (never the directories themselves), so bind mounts, Kubernetes volumes and Grafana's file
watcher keep seeing them. An exclusive lock on the parent of the directory actually written (every
symlink resolved: `--out link/gen` and `--out real/gen` are one directory) serialises concurrent runs. A run
killed outright (SIGKILL, power loss) during the few milliseconds of renames can leave a mix, which the
next run completes; its temporary files (`.NAME.llmdash-tmp-PID`) are never output and are removed by
the next run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import re
import signal
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath

from llmdash import safepath
from llmdash.errors import EXIT_USAGE, LlmdashError

LOCK_WAIT_SECONDS = 60
# Test hook: a directory holding two FIFOs, `halfway` and `resume`. Halfway through the renames the run writes a
# line to `halfway` (blocking until the test reads it) and then waits for a line on `resume`, so a test can
# interrupt it exactly there without guessing how long anything takes.
SWAP_HANDSHAKE_ENV = "LLMDASH_TEST_SWAP_HANDSHAKE"
MANIFEST = ".llmdash-manifest.json"
MANIFEST_ABOUT = ("The files llmdash wrote in this directory, each with the sha256 of what it wrote. llmdash removes "
                  "a file only while it is listed here and unchanged, and leaves every other file alone.")
TEMPORARY_MARK = ".llmdash-tmp-"
SHA256 = re.compile(r"^[0-9a-f]{64}$")
NAMED_AT_MOST = 5   # files named in one note line; the rest are counted
MAX_READ_BACK_BYTES = 16 << 20   # a manifest or an existing output above this is not llmdash's (its largest is < 1 MB)
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC   # never waits on a FIFO, never follows a link


def quoted(path) -> str:
    """A path as it goes into an error line: repr-escaped, so a newline or an escape in it cannot split
    or colour the one line."""
    return repr(os.fspath(path))


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one run does (or, for a check, would do) to an output directory; paths relative to it."""

    root: Path
    written: list[str]        # new, or with new content
    unchanged: list[str]
    removed: list[str]        # listed in the manifest, no longer produced, unchanged since: removed
    edited: list[str]         # listed in the manifest, no longer produced, but edited since: left
    foreign: list[str]        # in the run's directories, never written by llmdash: left alone
    diverted: dict[str, str]  # path holding a user's file -> where the run wrote its content instead
    ignored_manifest: str     # why a damaged manifest was set aside ("" when it was fine or absent)
    writes: dict[str, str]    # what goes to disk: the written files and, when it changes, the manifest

    def summary(self, what: str = "files") -> str:
        """One line: written, unchanged and removed counted apart (a removal is no write)."""
        return (f"{what} under {self.root}/: {len(self.written)} written, {len(self.unchanged)} unchanged, "
                f"{len(self.removed)} removed")

    def lines(self, what: str = "files") -> list[str]:
        """What a command prints: the counts, each path written or removed, then what was left alone and why."""
        return [self.summary(what), *(f"  wrote {rel}" for rel in self.written),
                *(f"  removed {rel}" for rel in self.removed), *self.notes()]

    def notes(self) -> list[str]:
        """One line for each kind of file the run left alone, and for a write set aside beside a user's file."""
        lines = []
        if self.ignored_manifest:
            lines.append(f"note: ignored {self.root / MANIFEST} ({self.ignored_manifest}); "
                         "nothing it listed was removed")
        if self.foreign:
            folders: dict[str, int] = {}
            for rel in self.foreign:
                folder = str(PurePosixPath(rel).parent)
                folders[folder] = folders.get(folder, 0) + 1
            where = ", ".join(f"{count} in {'./' if folder == '.' else folder + '/'}"
                              for folder, count in sorted(folders.items()))
            lines.append(f"note: left alone {_files(len(self.foreign))} llmdash did not write: {where}")
        if self.edited:
            lines.append(f"note: left {_files(len(self.edited))} llmdash no longer writes but that "
                         f"{'was' if len(self.edited) == 1 else 'were'} edited since: {_named(self.edited)}")
        for rel, instead in sorted(self.diverted.items()):
            lines.append(f"note: {self.root / rel} is not llmdash's, so it was kept and llmdash's is "
                         f"{self.root / instead}")
        return lines


def _files(count: int) -> str:
    return f"{count} file{'' if count == 1 else 's'}"


def _named(paths: list[str]) -> str:
    more = len(paths) - NAMED_AT_MOST
    return ", ".join(paths[:NAMED_AT_MOST]) + (f" and {more} more" if more > 0 else "")


def update_outputs(root: str | Path, files: Mapping[str, str], scopes: Iterable[str],
                   aside: Mapping[str, str] | None = None) -> Outcome:
    """Make `root` hold `files` (relative path -> content), all at once and under the lock, and drop what
    earlier runs wrote in `scopes` that is no longer in `files`; returns what was done.

    `scopes` are the directories (relative, possibly nested) and top-level files this run answers for;
    every path in `files` lies in one. Manifest entries elsewhere (another command's) are kept as they are.
    `aside` maps a path that may hold a user's own file (a kustomization.yaml) to where llmdash's goes then.
    """
    root = Path(root)
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LlmdashError(f"cannot create {quoted(root.parent)}: {exc.strerror}") from None
    if root.exists() and not root.is_dir():
        raise LlmdashError(f"{quoted(root)} exists and is not a directory")
    scopes = tuple(scopes)
    real = Path(os.path.realpath(root))  # the directory actually written: two spellings of it take turns
    with _locked(real.parent):
        _remove_leftovers(root, scopes)
        outcome = plan_outputs(root, files, scopes, aside)
        if outcome.writes or outcome.removed:
            recorded, _ = _read_manifest(root)
            kept = _replace(real, root, outcome.writes, {rel: recorded[rel] for rel in outcome.removed})
            if kept:  # saved by its user while this run went on: left, and named, as any edited file is
                outcome = dataclasses.replace(outcome, removed=[rel for rel in outcome.removed if rel not in kept],
                                              edited=sorted([*outcome.edited, *kept]))
    return outcome


def plan_outputs(root: str | Path, files: Mapping[str, str], scopes: Iterable[str],
                 aside: Mapping[str, str] | None = None) -> Outcome:
    """What `update_outputs` would do, touching nothing: `llmdash build --check` is exactly this."""
    root = Path(root)
    scopes = tuple(scopes)
    recorded, ignored = _read_manifest(root)
    aside = aside or {}
    _refuse_symlinks(root, [*files, *aside.values(), *(rel for rel in recorded if _within(rel, scopes))], scopes)
    files = dict(files)
    diverted = {}
    for rel, instead in aside.items():
        # the user's: there, not what this run writes, and not what an earlier run wrote (or edited since)
        if rel in files and os.path.lexists(root / rel) and regular_file_text(root / rel) != files[rel] \
                and _digest_of_file(root / rel) != recorded.get(rel):
            files[instead] = files.pop(rel)
            diverted[rel] = instead

    written = sorted(rel for rel, content in files.items() if regular_file_text(root / rel) != content)
    unchanged = sorted(set(files) - set(written))
    removed, edited = [], []
    for rel, digest in sorted(recorded.items()):
        if rel in files or rel in diverted or not _within(rel, scopes) or not os.path.lexists(root / rel):
            continue
        (removed if _digest_of_file(root / rel) == digest else edited).append(rel)

    manifest = {rel: digest for rel, digest in recorded.items() if not _within(rel, scopes)}
    manifest |= {rel: _digest(content) for rel, content in files.items()}
    left = set(manifest) | set(removed) | set(edited) | set(diverted)
    foreign = [rel for rel in _present(root, scopes) if rel not in left]
    writes = {rel: files[rel] for rel in written}
    manifest_text = _render_manifest(manifest)
    if regular_file_text(root / MANIFEST) != manifest_text:
        writes[MANIFEST] = manifest_text
    return Outcome(root, written, unchanged, removed, edited, foreign, diverted, ignored, writes)


def regular_file_text(path: Path) -> str | None:
    """The text of `path` when it is a regular file (never opening a FIFO or device), else None."""
    raw = _regular_file_bytes(path)
    try:
        return None if raw is None else raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _regular_file_bytes(path: Path | str, dir_fd: int | None = None) -> bytes | None:
    """The bytes of a regular file of at most MAX_READ_BACK_BYTES, read without following a link; else None."""
    try:
        fd = os.open(path, _FILE, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_READ_BACK_BYTES:
            return None
        raw = os.read(fd, min(info.st_size, MAX_READ_BACK_BYTES) + 1)   # a buffer of the file's size, not the cap's
    except OSError:
        return None
    finally:
        os.close(fd)
    return None if len(raw) > MAX_READ_BACK_BYTES else raw


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _digest_of_file(path: Path) -> str | None:
    raw = _regular_file_bytes(path)
    return None if raw is None else hashlib.sha256(raw).hexdigest()


def _render_manifest(files: dict[str, str]) -> str:
    return json.dumps({"about": MANIFEST_ABOUT, "files": dict(sorted(files.items()))}, indent=2) + "\n"


def _read_manifest(root: Path) -> tuple[dict[str, str], str]:
    """(path -> digest, "") from `root`'s manifest; ({}, why) when it is damaged, so nothing it lists is
    removed (set aside, never trusted: a path in it could point anywhere)."""
    path = root / MANIFEST
    if not os.path.lexists(path):
        return {}, ""
    text = regular_file_text(path)
    if text is None:
        return {}, f"not a regular UTF-8 file of at most {MAX_READ_BACK_BYTES} bytes"
    try:
        files = json.loads(text)["files"]
    except (ValueError, TypeError, KeyError):
        return {}, "not JSON with a files mapping"
    except RecursionError:
        return {}, "nested too deeply to be llmdash's"
    if not isinstance(files, dict):
        return {}, "not JSON with a files mapping"
    for rel, digest in files.items():
        if rel == MANIFEST or safepath.problem(rel) or not isinstance(digest, str) or not SHA256.fullmatch(digest):
            return {}, f"entry {safepath.shown(rel)} is not a path inside the directory with its sha256"
    return files, ""


def _within(rel: str, scopes: tuple[str, ...]) -> bool:
    return any(rel == scope or rel.startswith(scope + "/") for scope in scopes)


def _refuse_symlinks(root: Path, paths: Iterable[str], scopes: tuple[str, ...]) -> None:
    """Refuse (exit 2) a symlink at any directory between `root` and a path written or removed, or at a
    scope that is a directory: llmdash would write, remove or count files where the link points."""
    parents = {PurePosixPath(rel).parent for rel in paths}
    directories = {PurePosixPath(*d.parts[:depth]) for d in parents for depth in range(1, len(d.parts) + 1)}
    for scope in map(PurePosixPath, scopes):
        directories |= {PurePosixPath(*scope.parts[:depth]) for depth in range(1, len(scope.parts))}
        if (root / scope).is_dir():
            directories.add(scope)
    for directory in sorted(directories):
        if (root / directory).is_symlink():
            raise LlmdashError(f"{quoted(root / directory)} is a symlink; llmdash writes only in real directories "
                               f"inside {quoted(root)}: replace the link with a directory, or write elsewhere",
                               EXIT_USAGE)


def _present(root: Path, scopes: tuple[str, ...]) -> list[str]:
    """Every file (or link) in the scopes, relative to `root`, without following links; never our temporary files."""
    found = set()
    for scope in scopes:
        top = root / scope
        if top.is_dir() and not top.is_symlink():
            for directory, folders, names in os.walk(top):
                here = Path(directory)
                found |= {str((here / name).relative_to(root)) for name in names if TEMPORARY_MARK not in name}
                found |= {str((here / name).relative_to(root)) for name in folders if (here / name).is_symlink()}
        elif os.path.lexists(top):
            found.add(scope)
    return sorted(found)


def _remove_leftovers(root: Path, scopes: tuple[str, ...]) -> None:
    """Remove the temporary files a killed run left beside the manifest and in the scopes."""
    leftovers = set(root.glob(f".*{TEMPORARY_MARK}*")) if root.is_dir() else set()
    for scope in scopes:
        if (root / scope).is_dir() and not (root / scope).is_symlink():
            leftovers |= set((root / scope).rglob(f".*{TEMPORARY_MARK}*"))  # rglob never descends a symlink
    try:
        for leftover in sorted(leftovers):
            leftover.unlink(missing_ok=True)
    except OSError as exc:
        raise LlmdashError(f"{quoted(root)} cannot be written: {exc.strerror or exc}") from None


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LlmdashError(f"another llmdash run has held {quoted(directory)} "
                                       f"for {LOCK_WAIT_SECONDS}s") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


class _Directories:
    """Descriptors of the directories under one root a run writes or removes in, each opened once, one
    component at a time relative to its parent, never through a symlink (O_NOFOLLOW): every later write,
    rename and unlink is made relative to one of them, so a directory swapped for a link cannot redirect it."""

    def __init__(self, real_root: Path, shown_root: Path):
        self.shown = shown_root
        self.real_root = real_root
        self.created: list[PurePosixPath] = []   # made by this run, deepest last: removed again on failure
        self.fds: dict[PurePosixPath, int] = {}
        top = PurePosixPath(".")
        try:
            self.fds[top] = os.open(real_root, _DIRECTORY)
        except FileNotFoundError:
            os.mkdir(real_root)
            self.created.append(top)
            self.fds[top] = os.open(real_root, _DIRECTORY)

    def fd(self, rel: PurePosixPath, create: bool) -> int | None:
        """The descriptor of directory `rel` (made when `create`); None when it does not exist."""
        if rel in self.fds:
            return self.fds[rel]
        parent = self.fd(rel.parent, create)
        if parent is None:
            return None
        try:
            self.fds[rel] = os.open(rel.name, _DIRECTORY, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
            os.mkdir(rel.name, dir_fd=parent)
            self.created.append(rel)
            self.fds[rel] = os.open(rel.name, _DIRECTORY, dir_fd=parent)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            raise LlmdashError(f"{quoted(self.shown / rel)} is a symlink or not a directory; llmdash writes only in "
                               f"real directories inside {quoted(self.shown)}", EXIT_USAGE) from None
        return self.fds[rel]

    def remove_created(self) -> None:
        for rel in reversed(self.created):
            if rel == PurePosixPath("."):
                os.rmdir(self.real_root)
            else:
                os.rmdir(rel.name, dir_fd=self.fds[rel.parent])

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)


def _replace(real_root: Path, root: Path, writes: dict[str, str], removals: dict[str, str]) -> list[str]:
    """Write `writes` and remove `removals` (path -> the digest the manifest lists) under `real_root`, all
    through directory descriptors; returns the removals kept because their content changed meanwhile."""
    staged: list[tuple[int, str, str]] = []   # (directory fd, temporary name, target name)
    renamed = False
    kept: list[str] = []
    try:
        directories = _Directories(real_root, root)
    except OSError as exc:
        raise LlmdashError(f"{quoted(root)} cannot be written: {exc.strerror or exc}") from None
    try:
        for rel in writes:
            at = PurePosixPath(rel)
            parent = directories.fd(at.parent, create=False)
            if parent is not None and _is_directory(at.name, parent):
                raise LlmdashError(f"{quoted(root / rel)} is a directory, not a file; move it away")
        for rel in removals:
            directories.fd(PurePosixPath(rel).parent, create=False)   # opened now, before any swap can happen
        for rel, content in sorted(writes.items(), key=lambda item: (item[0] == MANIFEST, item[0])):
            at = PurePosixPath(rel)
            parent = directories.fd(at.parent, create=True)
            temporary = f".{at.name}{TEMPORARY_MARK}{os.getpid()}"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                         dir_fd=parent)
            staged.append((parent, temporary, at.name))  # only once it exists: cleanup removes what was made
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(content)
        with _signals_deferred():
            for number, (parent, temporary, name) in enumerate(staged):
                if number == len(staged) // 2:
                    _pause_for_tests()
                os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
            renamed = True
            for rel, digest in removals.items():
                at = PurePosixPath(rel)
                parent = directories.fd(at.parent, create=False)
                if parent is None:
                    continue
                raw = _regular_file_bytes(at.name, dir_fd=parent)
                if raw is None or hashlib.sha256(raw).hexdigest() != digest:
                    kept.append(rel)   # edited (or replaced by something else) since the plan: left alone
                    continue
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(at.name, dir_fd=parent)
    except OSError as exc:
        raise LlmdashError(f"{quoted(root)} cannot be written: {exc.strerror or exc}") from None
    finally:
        try:
            if not renamed:  # failed or interrupted before the renames were done: leave nothing behind
                with contextlib.suppress(OSError):  # a cleanup failure must not hide the error that caused it
                    for parent, temporary, _ in staged:
                        os.unlink(temporary, dir_fd=parent)
                    directories.remove_created()
        finally:
            directories.close()
    return kept


def _is_directory(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def _pause_for_tests() -> None:
    handshake = os.environ.get(SWAP_HANDSHAKE_ENV)
    if handshake:
        with open(Path(handshake) / "halfway", "w") as halfway:
            halfway.write("halfway\n")
        with open(Path(handshake) / "resume") as resume:
            resume.readline()


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block is done, then deliver the first one received."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: received.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if received:
            signal.raise_signal(received[0])
