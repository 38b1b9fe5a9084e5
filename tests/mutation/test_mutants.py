"""The mutant table stays usable: every snippet is in its file exactly once (a refactor that moves one fails
here, in milliseconds, naming the mutant, not halfway through `make mutate`), every mutant changes it, and no
mutant's tests read generated/ (which the runner does not rebuild per mutant)."""

import re

import pytest

from tests.mutation.mutants import MUTANTS, ROOT


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_snippet_occurs_exactly_once(mutant):
    assert (ROOT / mutant.file).read_text().count(mutant.original) == 1
    assert mutant.replacement != mutant.original and all((ROOT / t).is_file() for t in mutant.tests)


def test_names_are_unique():
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)


def test_no_mutant_test_reads_generated():
    files = sorted({t for m in MUTANTS for t in m.tests})
    assert [f for f in files if re.search(r"[\"']generated", (ROOT / f).read_text())] == []
