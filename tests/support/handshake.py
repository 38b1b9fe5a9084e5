"""The handshake of llmdash.atomic's test hook (SWAP_HANDSHAKE_ENV): a test holds a run halfway through its
renames, acts, then lets it go on, without a sleep standing in for synchronisation."""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path

from llmdash.atomic import SWAP_HANDSHAKE_ENV


class Halfway:
    """The handshake of llmdash.atomic's test hook: two FIFOs, `halfway` (the run says it is halfway through the
    renames) and `resume` (the test lets it go on). Every wait has a deadline and notices a run that died."""

    def __init__(self, directory: Path):
        """`directory`: a fresh one, away from the output's parent (whose leftovers the tests count)."""
        self.dir = directory
        for name in ("halfway", "resume"):
            os.mkfifo(self.dir / name)
        self.env = {SWAP_HANDSHAKE_ENV: str(self.dir)}
        # opened now, without blocking, so the run's write never waits for the test to get there
        self._halfway = os.open(self.dir / "halfway", os.O_RDONLY | os.O_NONBLOCK)

    def wait(self, run: subprocess.Popen, timeout: float = 60.0) -> None:
        """Return once the run is halfway through its renames (and held there)."""
        deadline = time.monotonic() + timeout
        while True:
            assert run.poll() is None, f"the run ended (exit {run.returncode}) before it was halfway"
            assert time.monotonic() < deadline, "the run never got halfway"
            if select.select([self._halfway], [], [], 0.2)[0] and os.read(self._halfway, 64):
                os.close(self._halfway)
                return

    def resume(self, run: subprocess.Popen, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fd = os.open(self.dir / "resume", os.O_WRONLY | os.O_NONBLOCK)   # ENXIO until the run reads
            except OSError:
                assert run.poll() is None, f"the run ended (exit {run.returncode}) before it was resumed"
                assert time.monotonic() < deadline, "the run never waited to be resumed"
                time.sleep(0.01)   # polling for the condition, under the deadline above
                continue
            os.write(fd, b"go\n")
            os.close(fd)
            return
