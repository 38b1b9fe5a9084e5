"""What `llmdash build` makes with no config, built at most once per test process.

Test modules used to build this at import time, each its own copy, on every pytest-xdist worker
while it collected. The `default_build` and `default_rules` fixtures (tests/conftest.py) hand out
these objects; helpers that need the build outside a fixture (tests/support/publishing.py) read the
same cached objects. They are shared: copy before changing (the fixtures check nobody did).
"""

from functools import cache

from llmdash.build import build_dashboards, build_rule_files
from llmdash.config import Config


@cache
def default_dashboards() -> dict[str, dict]:
    return build_dashboards(Config())


@cache
def default_rules() -> dict[str, dict]:
    return build_rule_files(Config())
