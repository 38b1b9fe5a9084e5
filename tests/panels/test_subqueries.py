"""No subquery whose range is its resolution (or less): Prometheus 3's range selectors are left-open, so
`[1m:1m]` holds one point there and two on Prometheus 2, and a median, max or share over it changes meaning.
Checked on every expression the build emits (dashboards and rules) under the default config and under the
shortest windows the config accepts, and the config refuses windows that would produce one."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml

from llmdash.build import build_dashboards, build_rule_files
from llmdash.config import Config, load_config
from llmdash.dashboards.walk import walk_panels
from llmdash.durations import seconds
from llmdash.errors import LlmdashError

SUBQUERY = re.compile(r"\[(?P<range>[0-9a-z]+):(?P<step>[0-9a-z]+)\]")


def expressions(config: Config) -> list[str]:
    exprs = []
    for model in build_dashboards(config).values():
        exprs += [t["expr"] for placed in walk_panels(model) for t in placed.panel.get("targets", []) if "expr" in t]
        exprs += [a["target"]["expr"] for a in model.get("annotations", {}).get("list", []) if a.get("target")]
    for model in build_rule_files(config).values():
        exprs += [rule["expr"] for group in model["groups"] for rule in group["rules"]]
    return exprs


def short_windows() -> Config:
    """The smallest windows the config accepts next to the fixed 30 s paused-share resolution."""
    c = Config()
    return dataclasses.replace(
        c, preemption=dataclasses.replace(c.preemption, short_window="1m", long_window="2m"),
        divergence=dataclasses.replace(c.divergence, window="1m", baseline_window="4m", baseline_resolution="2m"))


@pytest.mark.parametrize("config", [Config(), short_windows()], ids=["default", "short windows"])
def test_every_subquery_has_more_than_one_step_in_its_range(config):
    found = [(m["range"], m["step"]) for expr in expressions(config) for m in SUBQUERY.finditer(expr)]
    assert found, "no subquery found: the pattern no longer matches what the build emits"
    assert not [f for f in found if seconds(f[0]) <= seconds(f[1])], sorted(set(found))


@pytest.mark.parametrize("section, values", [
    ("divergence", {"baseline_resolution": "1h"}),
    ("divergence", {"baseline_resolution": "2h"}),
    ("preemption", {"short_window": "30s"}),
    ("preemption", {"short_window": "10s", "long_window": "20s"}),
])
def test_windows_that_make_a_one_point_subquery_are_refused(tmp_path, section, values):
    path = tmp_path / "llmdash.yaml"
    path.write_text(yaml.safe_dump({section: values}))
    key = f"{section}.{next(iter(values))}"
    with pytest.raises(LlmdashError, match=re.escape(key)):
        load_config(path)
