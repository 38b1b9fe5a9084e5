"""Roles are `vocabulary.Role` members: asking an engine about a name that is no role raises instead of
answering "not exported" (before, `spec.has("preemption")` silently returned False on every engine)."""

from __future__ import annotations

import pytest

from llmdash.engines.catalog import load_engine
from llmdash.vocabulary import Role

SPEC = load_engine("vllm")


@pytest.mark.parametrize("ask", [SPEC.has, SPEC.signal, SPEC.note, SPEC.coverage])
def test_a_misspelt_role_raises(ask):
    with pytest.raises(ValueError, match="unknown role 'preemption'"):
        ask("preemption")


def test_a_role_and_its_string_are_the_same_question():
    """vLLM exports vllm:num_preemptions_total (engines/vllm.yaml) and no retracted-token counters."""
    assert SPEC.has(Role.PREEMPTIONS) and SPEC.has("preemptions")
    assert not SPEC.has(Role.RETRACTED_INPUT_TOKENS)
