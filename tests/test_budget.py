"""`make time-tests` reads pytest's own summary line and judges each make target against its budget."""

from tests import budget


def test_the_summary_is_read_from_pytests_last_line():
    out = ".... [100%]\n=========== 1998 passed, 2 skipped, 3 xfailed in 722.41s (0:12:02) ===========\n"
    assert budget.SUMMARY.findall(out) == ["1998 passed, 2 skipped, 3 xfailed"]
    assert budget.SUMMARY.findall("1122 passed in 48.03s\n") == ["1122 passed"]
    assert budget.SUMMARY.findall("== 1 failed, 2035 passed, 2 skipped in 577.01s ==\n") == [
        "1 failed, 2035 passed, 2 skipped"]


def test_a_target_over_its_budget_or_failing_is_not_within():
    rows = [("test-unit", 59.0, 0, "1122 passed", (0.1, 1.9)), ("test", 481.0, 0, "1998 passed", (0.0, 2.0)),
            ("test-stack", 200.0, 1, "203 passed", (2.0, 2.0))]
    lines = budget.table(rows, "abc1234").splitlines()
    assert lines[4] == "| `make test-unit` | 59.0 s | 1 min 00.0 s | yes | 0 | 1122 passed | 0.1 / 1.9 |"
    assert lines[5] == "| `make test` | 8 min 01.0 s | 8 min 00.0 s | **no** | 0 | 1998 passed | 0.0 / 2.0 |"
    assert lines[6] == "| `make test-stack` | 3 min 20.0 s | - | - | 1 | 203 passed | 2.0 / 2.0 |"
