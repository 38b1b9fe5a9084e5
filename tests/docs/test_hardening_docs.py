"""The figures and lists docs/command-line.md and docs/review.md give for issue 28's behaviours are the code's."""

from llmdash import atomic, safepath
from llmdash.config import MAX_OBJECTIVES
from llmdash.review import sides
from tests.support.paths import ROOT


def _flat(page: str) -> str:
    return " ".join((ROOT / "docs" / page).read_text().split())   # line breaks are the page's layout, not text


def test_the_read_back_cap_is_the_codes():
    assert f"larger than {atomic.MAX_READ_BACK_BYTES >> 20} MiB is not llmdash's" in _flat("command-line.md")


def test_the_revision_code_environment_is_listed_as_the_code_builds_it():
    section = _flat("review.md").split("### What a revision can and cannot do", 1)[1].split(" ## ", 1)[0]
    *first, before_last, last = sides.PASSED_VARIABLES
    passed = ", ".join(f"`{name}`" for name in first)
    assert (f"an allow-listed environment: {passed}, `{sides.PASSED_PREFIX}*`, `{before_last}` and `{last}` "
            "from yours") in section
    assert "(" + ", ".join(f"`{name}`" for name in sides.XDG_DIRECTORIES) + ")" in section
    assert f"components of at most {safepath.NAME_MAX} bytes" in section


def test_the_changelog_states_the_new_caps_as_the_code_has_them():
    changelog = " ".join((ROOT / "CHANGELOG.md").read_text().split())
    assert f"larger than {atomic.MAX_READ_BACK_BYTES >> 20} MiB is never read whole" in changelog
    assert f"`slo.objectives` holds at most {MAX_OBJECTIVES} objectives" in changelog
    assert f"path component longer than {safepath.NAME_MAX} bytes" in changelog
