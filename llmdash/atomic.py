"""All-or-nothing updates of an output directory (`generated/`, a provisioning directory).

Every new file is first written in full to a temporary file beside its target; only then are
they renamed into place, one after the other, while SIGINT and SIGTERM wait, so an interrupt
leaves every file old or every file new, never a mix. Files are replaced inside the existing
directories (never the directories themselves), so bind mounts, Kubernetes volumes and
Grafana's file watcher keep seeing them. An exclusive lock on the parent directory serialises
concurrent runs. A run killed outright (SIGKILL, power loss) during the few milliseconds of
renames can leave a mix, which the next run completes; its temporary files
(`.NAME.llmdash-tmp-PID`) are never output and are removed by the next run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from llmdash.errors import LlmdashError

LOCK_WAIT_SECONDS = 60
# Test hook: seconds to pause halfway through the renames, so a test can interrupt them there.
SWAP_PAUSE_ENV = "LLMDASH_TEST_SWAP_PAUSE"

Plan = Callable[[Path], tuple[dict[str, str], list[str]]]


def update_tree(root: Path, plan: Plan) -> tuple[dict[str, str], list[str]]:
    """Apply `plan(root)` = (relative path -> new content, relative paths to remove) to `root`
    all at once, under the lock; returns that plan. Nothing is touched when the plan is empty."""
    root = Path(root)
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LlmdashError(f"cannot create {root.parent}: {exc.strerror}") from None
    if root.exists() and not root.is_dir():
        raise LlmdashError(f"{root} exists and is not a directory")
    with _locked(root.parent):
        for leftover in _leftovers(root):
            leftover.unlink(missing_ok=True)
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


TEMPORARY_MARK = ".llmdash-tmp-"


def _leftovers(root: Path) -> list[Path]:
    """Temporary files a killed run left under `root`."""
    return sorted(root.rglob(f".*{TEMPORARY_MARK}*")) if root.is_dir() else []


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


def _replace(root: Path, writes: dict[str, str], removals: list[str]) -> None:
    for rel in writes:
        target = root / rel
        if target.is_dir() and not target.is_symlink():
            raise LlmdashError(f"{target} is a directory, not a file; move it away")
    created: list[Path] = []
    staged: list[tuple[Path, Path]] = []
    renamed = False
    try:
        for rel, content in sorted(writes.items()):
            target = root / rel
            for directory in reversed([target.parent, *target.parent.parents]):
                if not directory.exists():
                    directory.mkdir()
                    created.append(directory)
            temporary = target.parent / f".{target.name}{TEMPORARY_MARK}{os.getpid()}"
            staged.append((temporary, target))
            with open(temporary, "x", encoding="utf-8") as handle:
                handle.write(content)
        with _signals_deferred():
            for number, (temporary, target) in enumerate(staged):
                if number == len(staged) // 2:
                    _pause_for_tests()
                os.replace(temporary, target)
            renamed = True
            for rel in removals:
                (root / rel).unlink(missing_ok=True)
    except OSError as exc:
        raise LlmdashError(f"{root} cannot be written: {exc.strerror or exc}") from None
    finally:
        if not renamed:  # failed or interrupted before the renames were done: leave nothing behind
            for temporary, _ in staged:
                temporary.unlink(missing_ok=True)
            for directory in reversed(created):
                with contextlib.suppress(OSError):
                    directory.rmdir()


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
