"""llmdash.safepath, the one check of names llmdash did not choose (git entries, manifest entries): each refusal
with its reason, and the bounds at the byte. The bounds are Linux's: a component of at most NAME_MAX = 255
bytes (a longer one is ENAMETOOLONG, limits.h), and llmdash's own cap of 1024 bytes for a whole name (well under
PATH_MAX, 4096), both documented in docs/hardening (tests/docs/test_hardening_docs.py)."""

from __future__ import annotations

import pytest

from llmdash.errors import LlmdashError
from llmdash.safepath import inside, problem, relative

REFUSED = [
    ("parent component", "rules/../../etc/cron.d/x", "has an empty, '.' or '..' component"),
    ("only a parent", "..", "has an empty, '.' or '..' component"),
    ("dot component", "rules/./a.yaml", "has an empty, '.' or '..' component"),
    ("empty component", "rules//a.yaml", "has an empty, '.' or '..' component"),
    ("absolute", "/etc/passwd", "is absolute"),
    ("NUL byte", "rules/a.yaml\0.json", "holds a NUL byte"),
    ("empty", "", "is empty"),
    ("component of 256 bytes", "rules/" + "x" * 256, "has a component longer than 255 bytes"),
    ("component of 256 bytes in 129 characters", "é" * 127 + "xx", "has a component longer than 255 bytes"),
    ("name of 1025 bytes", "/".join(["x" * 200] * 5) + "x" * 21, "is longer than 1024 bytes"),
]

ACCEPTED = [
    ("plain", "rules/a.yaml"),
    ("dots inside a name", "rules/..a..yaml"),
    ("component of exactly 255 bytes", "rules/" + "x" * 255),
    ("component of 255 bytes in 128 characters", "é" * 127 + "x"),
    ("name of exactly 1024 bytes", "/".join(["x" * 200] * 5) + "x" * 20),
]


@pytest.mark.parametrize("case, name, why", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_name_that_is_not_a_plain_relative_path_is_refused_with_its_reason(case, name, why):
    assert problem(name) == why
    with pytest.raises(LlmdashError) as refused:
        relative(name, "git entry")
    assert refused.value.exit_code == 2 and str(refused.value).endswith(f"{why}; refusing to write it")


@pytest.mark.parametrize("case, name", ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_a_plain_relative_path_within_the_bounds_is_accepted(case, name):
    assert len(name.encode()) <= 1024 and problem(name) is None


def test_a_name_resolving_outside_its_directory_through_a_symlink_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out" / "rules").symlink_to(tmp_path / "elsewhere")
    assert inside(tmp_path / "out", "dashboards/d.json", "entry") == tmp_path / "out" / "dashboards" / "d.json"
    with pytest.raises(LlmdashError, match=r"entry 'rules/a\.yaml' resolves outside .*; refusing to write it"):
        inside(tmp_path / "out", "rules/a.yaml", "entry")
