"""Detection quality on the simulator's scenarios, through Prometheus' own rule evaluation
(`promtool test rules`): the paging alerts catch the collapse in time on every engine and
never fire on a load ramp, an idle engine or a restart."""

import pytest

from llmdash.lab import bench
from llmdash.config import Config
from llmdash.rules.generate import DIVERGENCE, PREEMPTIONS_HIGH
from llmdash.engines.catalog import load_all

pytestmark = pytest.mark.e2e

SPECS = load_all()
ENGINES = tuple(sorted(SPECS))


@pytest.fixture(scope="module")
def outcomes():
    results = bench.run(ENGINES, Config(), seed=1, names=("kv-collapse", "load-ramp", "idle", "restart"))
    return {(o.engine, o.scenario): o for o in results}


@pytest.mark.parametrize("engine", ENGINES)
def test_collapse_pages_in_time_for_the_collapsing_model_only(outcomes, engine):
    collapse = outcomes[(engine, "kv-collapse")]
    divergence = collapse.delay_s(DIVERGENCE)
    assert divergence is not None and divergence <= 10 * 60, divergence
    if SPECS[engine].has("preemptions"):
        preemption = collapse.delay_s(PREEMPTIONS_HIGH)
        assert preemption is not None and 0 <= preemption <= 7 * 60, preemption
    for alert in (DIVERGENCE, PREEMPTIONS_HIGH):
        assert {f.model for f in collapse.fired(alert)} <= {collapse.affected_model}


@pytest.mark.parametrize("scenario", ["load-ramp", "idle", "restart"])
@pytest.mark.parametrize("engine", ENGINES)
def test_no_page_without_a_collapse(outcomes, engine, scenario):
    outcome = outcomes[(engine, scenario)]
    assert outcome.fired(DIVERGENCE) == [] and outcome.fired(PREEMPTIONS_HIGH) == []


def test_naive_baselines_miss_what_the_project_catches(outcomes):
    """The reason this project exists, measured: throughput does not drop during the collapse."""
    for engine in ENGINES:
        assert outcomes[(engine, "kv-collapse")].delay_s(bench.NAIVE_THROUGHPUT_DROP) is None
