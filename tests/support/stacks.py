"""The two stacks the end-to-end tests run on, found in one place.

The oldest supported stack is Debian's packages on PATH (Prometheus 2.42, Alertmanager 0.25, VictoriaMetrics
1.79); the current one is what .ci/current-stack lists (Prometheus 3.16, amtool 0.35, VictoriaMetrics 1.151,
Sloth 0.16), built by .ci/build-stack (`make deps`) into the per-user cache. A test asks for the `stack`
fixture (tests/conftest.py) and runs once on each; a missing current stack skips it with the reason, except
under CI=true, where a stack that cannot be tested is an error naming it (.ci/run never passes without it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmdash.lab.promserver import Stack
from tests.support.paths import ROOT

MANIFEST = ROOT / ".ci" / "current-stack"
MAKE_DEPS = "build it with `make deps` (.ci/build-stack: Go and the Go module proxy)"


def cache() -> Path:
    """Where .ci/build-stack puts the binaries: ${XDG_CACHE_HOME:-$HOME/.cache}/llmdash/stack."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llmdash" / "stack"


def manifest() -> list[tuple[str, str, str]]:
    """(binary, module, version) for each line of .ci/current-stack."""
    rows = (line.split() for line in MANIFEST.read_text().splitlines())
    return [(row[0], row[1], row[2]) for row in rows if row and not row[0].startswith("#")]


def current() -> Stack:
    modules = sorted({f"{module}@{version}" for _, module, version in manifest()})
    return Stack(f"the current stack ({', '.join(modules)})",
                 {binary: str(cache() / f"{module}@{version}" / "bin" / binary)
                  for binary, module, version in manifest()}, MAKE_DEPS)


OLDEST = Stack("the oldest supported stack (Debian's prometheus, prometheus-alertmanager, victoria-metrics)")
STACKS = ("oldest", "current")


def missing(stack: Stack) -> list[str]:
    """The paths of the stack's binaries that are not there (none for the stack on PATH)."""
    return [path for path in (stack.binaries or {}).values() if not os.access(path, os.X_OK)]


def require(name: str) -> Stack:
    """The stack called `name`; a current stack not built skips the test (fails it under CI=true)."""
    if name == "oldest":
        return OLDEST
    stack = current()
    absent = missing(stack)
    if absent:
        reason = f"{stack.name} is not built ({len(absent)} binaries missing, first {absent[0]}): {MAKE_DEPS}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot test {reason}", pytrace=False)
        pytest.skip(reason)
    return stack
