"""Session fixtures for the end-to-end tests: one real Prometheus with every scenario backfilled."""

from __future__ import annotations

import time

import pytest

from llmdash.errors import LlmdashError


@pytest.fixture(scope="session")
def prometheus_scenarios():
    """(server, {scenario: ScenarioWindow}) for every classic (single-instance) scenario and every engine.

    One server for the whole session: simulating and backfilling all scenarios is the
    expensive part. A missing `prometheus` binary fails the tests with the install hint.
    """
    from llmdash.lab.promserver import PrometheusServer, load_scenarios
    from llmdash.engines.catalog import load_all
    from llmdash.lab.exposition import simulated_engines
    from llmdash.lab.scenarios import CLASSIC_SCENARIOS

    started = time.monotonic()
    try:
        server = PrometheusServer()
    except LlmdashError as exc:
        pytest.fail(f"end-to-end tests need a real Prometheus: {exc}", pytrace=False)
    try:
        windows = load_scenarios(server, list(CLASSIC_SCENARIOS), simulated_engines(load_all()))
        server.start()
    except BaseException:
        server.stop()
        raise
    print(f"\nPrometheus with {len(windows)} scenarios ready in {time.monotonic() - started:.1f}s")
    yield server, windows
    server.stop()
