"""Fixtures every layer's tests share, the markers the folders imply, and the order files start in.

Session fixtures are built once per pytest-xdist worker (each worker is its own session), lazily: a
module that does not ask for a build does not pay for it, and nothing is built while collecting.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from llmdash.errors import LlmdashError
from tests.support import builds, stacks
from tests.support import promtool as promtool_runner
from tests.support.catalogs import copy_catalog
from tests.support.fake_grafana import FakeGrafana
from tests.support.paths import ROOT

E2E_DIR = ROOT / "tests" / "e2e"
# Fixtures that hand a test a real Prometheus-family binary or server: such a test is end-to-end wherever it is.
REAL_SERVER_FIXTURES = {"promtool", "mtail_binary", "prometheus_scenarios", "stack"}


def _shared(value):
    """Yield `value` to every test of the session, then fail if one changed it in place."""
    before = json.dumps(value, sort_keys=True)
    yield value
    assert json.dumps(value, sort_keys=True) == before, "a test changed a shared build in place: copy it first"


@pytest.fixture(scope="session")
def default_build() -> dict[str, dict]:
    """Dashboard name -> model, as `llmdash build` writes them with no config (engines and fleet)."""
    yield from _shared(builds.default_dashboards())


@pytest.fixture(scope="session")
def default_rules() -> dict[str, dict]:
    """Engine -> rule file, as `llmdash build` writes them with no config."""
    yield from _shared(builds.default_rules())


@pytest.fixture(scope="session")
def promtool() -> str:
    """The path of Debian's promtool (2.42, on PATH): a test asking for it is e2e. Its absence fails, never skips."""
    return promtool_runner.promtool()


@pytest.fixture
def catalog_copy(tmp_path: Path) -> Path:
    """A private copy of the shipped vLLM catalog, for a test to break."""
    return copy_catalog(tmp_path)


@pytest.fixture
def start_grafana():
    """start_grafana(tls=None, **settings) -> a fake Grafana serving on 127.0.0.1, stopped after the test."""
    started: list[FakeGrafana] = []

    def start(tls=None, **settings) -> FakeGrafana:
        started.append(FakeGrafana(**settings).start(tls=tls))
        return started[-1]

    yield start
    for fake in started:
        fake.stop()


@pytest.fixture
def grafana(start_grafana) -> FakeGrafana:
    """A Grafana 11 that knows only the default token; a module needing another Grafana overrides it."""
    return start_grafana()


@pytest.fixture(scope="session", params=stacks.STACKS)
def stack(request):
    """The stack of servers a test runs on, once the oldest supported (Debian's) and once the current
    (tests/support/stacks.py): a missing current stack skips with `make deps`, and fails under CI=true."""
    return stacks.require(request.param)


@pytest.fixture(scope="session")
def prometheus_scenarios(stack):
    """(server, {scenario: ScenarioWindow}) for every classic (single-instance) scenario and every engine,
    on each stack's Prometheus (backfilled by its own promtool).

    One server per stack for the whole session: simulating and backfilling all scenarios is the
    expensive part. A missing `prometheus` binary fails the tests with the install hint.
    """
    from llmdash.engines.catalog import load_all
    from llmdash.lab.emitters import simulated_engines
    from llmdash.lab.promserver import PrometheusServer, load_scenarios
    from llmdash.lab.scenarios import CLASSIC_SCENARIOS

    started = time.monotonic()
    try:
        server = PrometheusServer(stack=stack)
    except LlmdashError as exc:
        pytest.fail(f"end-to-end tests need a real Prometheus: {exc}", pytrace=False)
    try:
        windows = load_scenarios(server, list(CLASSIC_SCENARIOS), simulated_engines(load_all()))
        server.start()
    except BaseException:
        server.stop()
        raise
    print(f"\nPrometheus of {stack.name} with {len(windows)} scenarios ready in {time.monotonic() - started:.1f}s")
    yield server, windows
    server.stop()


# The files that take longest start first, and the ones waiting on a wall clock (Alertmanager's notifications, the
# page-delay and log tests' live servers) before them, so their waits overlap with the other worker's CPU: `make test`
# runs one file per worker at a time, and a long file started last leaves the other core idle at the end. Measured
# by a run with `--durations=0` summed per file; the order changes how long a run takes, never what it finds.
SLOWEST_FIRST = ("test_alertmanager_e2e.py", "test_sloth_e2e.py", "test_rules.py", "test_logs_e2e.py",
                 "test_prometheus3_e2e.py", "test_hostile_input.py", "test_e2e.py", "test_page_delay_e2e.py",
                 "test_detection.py", "test_outputs.py", "test_slo_e2e.py", "test_bounds.py",
                 "test_victoriametrics_e2e.py", "test_pages.py", "test_doctor.py", "test_malformed.py",
                 "test_bench_cost.py", "test_slo_burn_rates.py", "test_cli.py")


# The current stack's share of the suite: every test's leg on it (the `stack` fixture's "current") and the files
# that need it (Prometheus 3.16 beside 2.42, native histograms, Sloth). `make test-stack` runs them, `make test`
# the rest, .ci/run both (docs/testing.md#two-stacks): on 2 cores both stacks in one run take about twice the
# 8 minutes `make test` may take.
CURRENT_STACK_FILES = ("test_stacks_e2e.py", "test_native_histograms_e2e.py", "test_sloth_e2e.py")


@pytest.hookimpl(wrapper=True)   # around pytest's own: markers before -m deselects by them, the order after
def pytest_collection_modifyitems(items):
    """Everything under tests/e2e/, or asking for a real promtool, mtail or Prometheus, is e2e; whatever is
    neither e2e, publish nor process (the llmdash command run in a fresh interpreter) is unit (`make test-unit`).
    A test's leg on the current stack, and a file that needs that stack, is `stack_leg` too. Then the files in
    SLOWEST_FIRST order."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("stack") == "current" or item.path.name in CURRENT_STACK_FILES:
            item.add_marker(pytest.mark.stack_leg)
        if item.path.is_relative_to(E2E_DIR) or REAL_SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)
        if not any(item.get_closest_marker(kind) for kind in ("e2e", "publish", "process")):
            item.add_marker(pytest.mark.unit)
    _check_same_worker(items)
    yield   # pytest's own hooks: -m deselects by these markers, and tests are grouped by parametrized fixtures
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: each file's tests in their order


# Files that read one expensive session fixture (built once per worker) run in the same worker, so a run builds it
# once: file -> the file whose worker runs it. `make test` schedules by file (--dist loadfile), with this map.
SAME_WORKER = {"tests/e2e/test_demo_figures.py": "tests/e2e/test_e2e.py"}   # both read prometheus_scenarios
SHARED_SESSION_FIXTURES = ("prometheus_scenarios",)


def _check_same_worker(items) -> None:
    """Fail the collection when files sharing one of SHARED_SESSION_FIXTURES would run in different workers."""
    for name in SHARED_SESSION_FIXTURES:
        files = {item.path.relative_to(ROOT).as_posix() for item in items if name in getattr(item, "fixturenames", ())}
        if len({SAME_WORKER.get(f, f) for f in files}) > 1:
            raise pytest.UsageError(f"{', '.join(sorted(files))} all use {name}: map them to one file in SAME_WORKER "
                                    "(tests/conftest.py), or each worker builds it")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's file scheduling, with the files of SAME_WORKER sent to one worker, in collection order (SLOWEST_FIRST):
    xdist would otherwise reorder the files by their number of tests."""
    if config.getvalue("dist") != "loadfile":
        return None
    config.option.loadscopereorder = False
    from xdist.scheduler import LoadFileScheduling

    class SameWorkerFileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return SAME_WORKER.get(path, path)

    return SameWorkerFileScheduling(config, log)
