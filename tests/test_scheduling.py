"""How `make test` hands files to its workers (tests/conftest.py): the order only changes how long a run takes, but
an order that silently stops applying costs minutes, as it did when xdist reordered the files by test count."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests import conftest

TESTS = Path(__file__).parent


class Node:
    """A worker as xdist's scheduler sees it: the test indexes it is sent."""

    shutting_down = False

    def __init__(self, name: str):
        self.gateway, self.sent = SimpleNamespace(id=name), []

    def send_runtest_some(self, indexes):
        self.sent += indexes

    def shutdown(self):
        self.shutting_down = True


def scheduler():
    config = SimpleNamespace(getvalue={"dist": "loadfile", "tx": ["2*popen"]}.get,
                             option=SimpleNamespace(loadscopereorder=True))
    return conftest.pytest_xdist_make_scheduler(config, None)


def test_every_file_named_for_the_scheduler_exists():
    names = {path.name for path in TESTS.rglob("test_*.py")}
    assert set(conftest.SLOWEST_FIRST) <= names, set(conftest.SLOWEST_FIRST) - names
    paths = {path.relative_to(TESTS.parent).as_posix() for path in TESTS.rglob("test_*.py")}
    assert set(conftest.SAME_WORKER) | set(conftest.SAME_WORKER.values()) <= paths


def test_files_go_out_in_collection_order_and_shared_fixture_files_to_one_worker():
    """A file of one test collected first goes out first, before a file of three (xdist's own order would send the
    file of three first); test_demo_figures.py goes with test_e2e.py wherever it was collected."""
    collection = ["tests/e2e/test_alertmanager_e2e.py::t", "tests/cli/test_many.py::a", "tests/cli/test_many.py::b",
                  "tests/cli/test_many.py::c", "tests/e2e/test_e2e.py::e", "tests/lab/test_other.py::o",
                  "tests/e2e/test_demo_figures.py::d"]
    sched, nodes = scheduler(), [Node("gw0"), Node("gw1")]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()   # each worker one file, and one more while it has at most 2 tests pending (xdist's rule)
    sent = [[collection[i] for i in node.sent] for node in nodes]
    assert sent == [["tests/e2e/test_alertmanager_e2e.py::t", "tests/e2e/test_e2e.py::e",
                     "tests/e2e/test_demo_figures.py::d"],
                    ["tests/cli/test_many.py::a", "tests/cli/test_many.py::b", "tests/cli/test_many.py::c"]]
    assert list(sched.workqueue) == ["tests/lab/test_other.py"]


class Item:
    """A collected test as the collection hook sees it."""

    def __init__(self, path: str):
        self.path, self.fixturenames, self.markers = TESTS.parent / path, (), set()

    def add_marker(self, mark):
        self.markers.add(mark.name)

    def get_closest_marker(self, name):
        return name if name in self.markers else None


def test_files_are_ordered_after_pytests_own_reordering():
    """pytest regroups tests by parametrized fixtures (the `stack` legs) inside the hook; the slowest-first order is
    applied once that is done, so it is the order the workers receive."""
    slowest, second = (f"tests/e2e/{name}" for name in conftest.SLOWEST_FIRST[:2])
    items = [Item("tests/cli/test_other.py"), Item(second), Item(slowest)]
    hook = conftest.pytest_collection_modifyitems(items)
    next(hook)                     # the markers are set; pytest's own implementations run now
    items.reverse()                # as pytest's regrouping may leave them
    next(hook, None)
    assert [item.path.relative_to(TESTS.parent).as_posix() for item in items] == \
        [slowest, second, "tests/cli/test_other.py"]
    assert all("unit" in item.markers or "e2e" in item.markers for item in items)
