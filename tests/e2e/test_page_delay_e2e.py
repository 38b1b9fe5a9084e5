"""The live page-delay benchmark, short: every backend pages on a collapse already under way, and every process
and temporary directory it started is gone afterwards.

Fast by configuration: the feed starts 10 minutes into the collapse (the page's condition already holds on the
backfilled data), the rules are evaluated every 2 s and the page pends 4 s, so each ruler pages within seconds
(about 10 s for the whole test). The benchmark's own run is minutes per seed.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import pytest

from llmdash.config import Config
from llmdash.lab import bench_delay

pytestmark = pytest.mark.e2e

BACKENDS = bench_delay.BACKENDS[:3]   # Prometheus and the vmalert file on both latency offsets


def children() -> set[int]:
    """PIDs of this process's child processes."""
    pids = set()
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
            pids.add(int(entry))
    return pids


def test_each_backend_reports_a_page_delay_and_nothing_is_left_running(tmp_path, monkeypatch):
    private = tmp_path / "tmp"          # the run's temporary directories, apart from other tests' running meanwhile
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    config = Config()
    config = dataclasses.replace(config, rules=dataclasses.replace(config.rules, interval="2s"),
                                 preemption=dataclasses.replace(config.preemption, alert_for="4s"))
    before = children()
    result = bench_delay.measure("vllm", config, 1, BACKENDS, lead_s=-600, timeout_s=50)
    delays = {backend.name: result.delay(backend) for backend in BACKENDS}
    assert all(delay is not None for delay in delays.values()), f"not paged within 50 s: {delays}"
    assert all(600 <= delay <= 660 for delay in delays.values()), delays   # the live feed began 600 s in
    assert children() <= before
    assert list(private.iterdir()) == []
