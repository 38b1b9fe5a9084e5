"""All-or-nothing updates of an output directory (`generated/`, a provisioning directory).

The new tree is assembled beside the old one on the same filesystem: a hard-linked copy of
the current tree (so files llmdash does not manage stay), with the new files written and the
dropped ones removed. Two renames then swap it in while SIGINT and SIGTERM wait, so an
interrupt leaves the complete old tree or the complete new one, never a mix. An exclusive
lock on the parent directory serialises concurrent runs; leftovers of a killed run
(`.NAME.llmdash-*` beside the tree) are cleaned up by the next one, and a tree a killed run
had moved aside is moved back.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from llmdash.errors import LlmdashError

LOCK_WAIT_SECONDS = 60
# Test hook: seconds to pause between the two renames, so a test can interrupt the swap there.
SWAP_PAUSE_ENV = "LLMDASH_TEST_SWAP_PAUSE"

Plan = Callable[[Path], tuple[dict[str, str], list[str]]]


def update_tree(root: Path, plan: Plan) -> tuple[dict[str, str], list[str]]:
    """Apply `plan(root)` = (relative path -> new content, relative paths to remove) to `root`
    atomically, under the lock; returns that plan. Nothing is touched when the plan is empty."""
    root = Path(root)
    if root.is_symlink():
        root = root.resolve()
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LlmdashError(f"cannot create {root.parent}: {exc.strerror}") from None
    if root.exists() and not root.is_dir():
        raise LlmdashError(f"{root} exists and is not a directory")
    with _locked(root.parent):
        _recover(root)
        writes, removals = plan(root)
        if writes or removals:
            _replace(root, writes, removals)
    return writes, removals


def regular_file_text(path: Path) -> str | None:
    """The text of `path` when it is a regular file (never opening a FIFO or device), else None."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _sibling(root: Path, kind: str) -> Path:
    return root.parent / f".{root.name}.llmdash-{kind}-{os.getpid()}"


def _leftovers(root: Path) -> list[Path]:
    return sorted(root.parent.glob(f".{root.name}.llmdash-*"))


def _recover(root: Path) -> None:
    """Undo what a killed run left: the tree it moved aside comes back, temporary trees go."""
    for leftover in _leftovers(root):
        if not root.exists() and "-old-" in leftover.name:
            os.rename(leftover, root)
        else:
            shutil.rmtree(leftover, ignore_errors=True)


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
                    raise LlmdashError(f"another llmdash run has held {directory} for {LOCK_WAIT_SECONDS}s") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def _link_or_copy(source: str, target: str) -> None:
    """Hard-link (never opens the file, so a FIFO cannot block); copy a regular file where linking fails."""
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        if not stat.S_ISREG(os.lstat(source).st_mode):
            raise
        shutil.copy2(source, target)


def _replace(root: Path, writes: dict[str, str], removals: list[str]) -> None:
    new, old = _sibling(root, "new"), _sibling(root, "old")
    try:
        if root.exists():
            shutil.copytree(root, new, symlinks=True, copy_function=_link_or_copy)
        else:
            new.mkdir()
        for rel, content in sorted(writes.items()):
            target = new / rel
            if target.is_dir() and not target.is_symlink():
                raise LlmdashError(f"{root / rel} is a directory, not a file; move it away")
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                target.unlink()  # never write through a hard link into the old tree
            target.write_text(content, encoding="utf-8")
        for rel in removals:
            (new / rel).unlink(missing_ok=True)
        with _signals_deferred():
            if root.exists():
                os.rename(root, old)
                _pause_for_tests()
            os.rename(new, root)
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(new, ignore_errors=True)
        if old.exists() and not root.exists():
            os.rename(old, root)
        reason = exc.strerror or str(exc)[:200]
        what = "is busy (a mount point?)" if exc.errno == errno.EBUSY else f"cannot be written: {reason}"
        raise LlmdashError(f"{root} {what}") from None
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise


def _pause_for_tests() -> None:
    pause = os.environ.get(SWAP_PAUSE_ENV)
    if pause:
        time.sleep(float(pause))


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
