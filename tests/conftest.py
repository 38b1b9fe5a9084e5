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
    from llmdash.lab.emitters import simulated_engines
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


# The slowest files (serial run, seconds: rules 76, e2e 59, hostile_input 45, detection 38, doctor 36,
# hostile_network 27, logs_e2e 23) start first: `make test` runs one file per worker at a time, and a slow
# file started last would leave the other core idle at the end.
SLOWEST_FIRST = ("test_rules.py", "test_e2e.py", "test_hostile_input.py", "test_detection.py", "test_doctor.py",
                 "test_hostile_network.py", "test_logs_e2e.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: files keep their own order
