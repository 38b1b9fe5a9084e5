"""The mutant table stays usable: every snippet is in its file exactly once (a refactor that moves one fails
here, in milliseconds, naming the mutant, not halfway through `make mutate`), and every mutant changes it."""

import pytest

from tests.mutation.mutants import MUTANTS, ROOT


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_snippet_occurs_exactly_once(mutant):
    assert (ROOT / mutant.file).read_text().count(mutant.original) == 1
    assert mutant.replacement != mutant.original and all((ROOT / t).is_file() for t in mutant.tests)


def test_names_are_unique():
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
