"""Labels as Prometheus 3 stores them, read by a Prometheus 2 query engine: every rule answers alike.

What this alone covers (tests/e2e/test_stacks_e2e.py runs the real Prometheus 3.16 beside 2.42 for every
panel, annotation and rule): a store that holds Prometheus 3's float-text `le` and `quantile`
(`labels.FormatOpenMetricsFloat`: `le="5000"` stored as `le="5000.0"`, `le="1"` as `le="1.0"`) queried
with Prometheus 2's closed ranges, as a long-term store fed by a Prometheus 3's remote write and queried
by an older querier is, and one store holding both forms across an upgrade. The simulator's kv-collapse of
every engine is backfilled into one real Prometheus 2.42 twice: as the exporters write it, and a later
copy rewritten as Prometheus 3 stores it. That copy is not written by llmdash's own
`promql.prometheus3_float` (the helper under test): it is Python's `repr`, which for every |value| in
[1e-4, 1e6) and 0 is the text `FormatOpenMetricsFloat` gives; a bound outside that range fails the fixture
instead of being guessed. The recording rules are backfilled
over both (promtool, level by level); then every rule expression (recording and alerting) is evaluated
over each copy and must give the same series, point for point.
"""

from __future__ import annotations

import functools
import math
import re
import time

import pytest

from llmdash.build import build_rule_files
from llmdash.config import Config
from llmdash.engines.catalog import load_all, load_engine
from llmdash.lab import replay
from llmdash.lab.emitters import simulated_engines
from llmdash.lab.promserver import SLOT_GAP_S, PrometheusServer
from llmdash.lab.scenarios import build, write_openmetrics
from llmdash.vocabulary import Alert

pytestmark = pytest.mark.e2e

ENGINES = simulated_engines(load_all())
STEP_S = 60.0
FLOAT_LABEL = re.compile(r'\b(le|quantile)="([^"]*)"')


def stored_text(text: str) -> str:
    """An `le`/`quantile` label value as Prometheus 3 stores it (prometheus/prometheus model/labels/float.go,
    FormatOpenMetricsFloat: "+Inf" as is; else Go's shortest %g, ".0" added without "." or "e")."""
    if text == "+Inf":
        return text
    value = float(text)
    if value == 0:
        return "0.0"       # -0 too: float.go's `f == 0` case
    assert 1e-4 <= abs(value) < 1e6, f"{text}: outside the range where repr is Go's %g; add a literal"
    return repr(value)


@functools.cache   # a few thousand series in 700,000 lines: each series' text is rewritten once
def stored_series(text: str) -> str:
    """A series' name and labels as Prometheus 3 stores them."""
    return FLOAT_LABEL.sub(lambda m: f'{m[1]}="{stored_text(m[2])}"', text)


def as_prometheus3(line: str, shift_s: float) -> str:
    """One OpenMetrics sample line (`series value timestamp`) as Prometheus 3 would store it, `shift_s` later."""
    if line.startswith("#"):
        return line
    series, value, stamp = line.rsplit(" ", 2)
    return f"{stored_series(series)} {value} {float(stamp) + shift_s:.3f}"


@pytest.fixture(scope="module")
def stores():
    """(server, {"exporter": (start, end), "prometheus3": (start, end)}, rule files) on one Prometheus."""
    scenario = build("kv-collapse")
    shift = scenario.duration_s + SLOT_GAP_S + 3600   # the copies' rates never reach each other's baselines
    start = (time.time() // 3600) * 3600 - 3600 - 2 * shift
    server = PrometheusServer()
    try:
        exporter, normalised = server.dir / "exporter.om", server.dir / "prometheus3.om"
        with open(exporter, "w") as out:
            write_openmetrics(scenario, {e: load_engine(e) for e in ENGINES}, 1, start, out)
        with open(exporter) as src, open(normalised, "w") as out:
            out.writelines(as_prometheus3(line.rstrip("\n"), shift) + "\n" for line in src)
        for path in (exporter, normalised):
            with open(path, "a") as out:
                out.write("# EOF\n")
            server.backfill(path)
        server.start()
        rules = build_rule_files(Config())
        every = {"groups": [group for model in rules.values() for group in model["groups"]]}
        windows = {"exporter": (start, start + scenario.duration_s),
                   "prometheus3": (start + shift, start + shift + scenario.duration_s)}
        for begin, end in windows.values():   # each copy's own hours: nothing between them is compared
            replay.prometheus_record(server, [every], begin - 3600, end)
        yield server, windows, rules
    finally:
        server.stop()


def relative(series, start: float) -> dict:
    """Label set -> [(seconds into the window, value)], comparable across the two copies: a kept `le` or
    `quantile` label (a recorded bucket rate keeps `le`) is compared by its Prometheus 3 text."""
    return {tuple(sorted((k, stored_text(v) if k in ("le", "quantile") else v)
                         for k, v in s.labels.items())): [(round(t - start), v) for t, v in s.points] for s in series}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        len(a[k]) == len(b[k]) and all(ta == tb and math.isclose(va, vb, rel_tol=1e-9, abs_tol=1e-12)
                                       for (ta, va), (tb, vb) in zip(a[k], b[k])) for k in a)


class Series:
    def __init__(self, labels, points):
        self.labels, self.points = labels, points


def range_series(server, expr: str, start: float, end: float) -> list[Series]:
    return [Series(r["metric"], [(float(t), float(v)) for t, v in r["values"]])
            for r in server.query_range(expr, start, end, STEP_S)]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_rule_gives_the_same_answer(stores, engine):
    """Every rule, over raw series or over recorded ones (the chain backfilled level by level, each level at
    its group's phase as a live Prometheus evaluates it), gives the same answer to the last digit."""
    server, windows, rules = stores
    differ, answered = [], {}
    for rule in (rule for group in rules[engine]["groups"] for rule in group["rules"]):
        name = rule.get("record") or rule["alert"]
        got = {store: relative(range_series(server, rule["expr"], *window), window[0])
               for store, window in windows.items()}
        if not same(got["exporter"], got["prometheus3"]):
            differ.append(f"{name}: {rule['expr']}")
        answered[name] = answered.get(name, False) or bool(got["prometheus3"])
    assert not differ, "differs when stored as Prometheus 3 stores it:\n" + "\n".join(differ)
    if engine == "tensorrt-llm-triton":
        # reads le="5000" of a millisecond histogram: on Prometheus 3 that bucket is le="5000.0"
        assert answered[Alert.TTFT_HIGH], "Triton's TTFT alert does not fire on either store"


def test_the_copy_is_stored_as_prometheus_3_stores_it(stores):
    """The comparison can fail: an exact matcher on the exporter's text finds the bucket in one copy only."""
    server, windows, _ = stores
    exact = 'nv_inference_first_response_histogram_ms_bucket{le="5000"}'
    found = {store: bool(server.query_range(exact, *window, STEP_S)) for store, window in windows.items()}
    assert found == {"exporter": True, "prometheus3": False}
    assert as_prometheus3('x_bucket{le="5000",quantile="1"} 3 100', 10) == \
        'x_bucket{le="5000.0",quantile="1.0"} 3 110.000'


# Label texts exporters write -> what Prometheus 3 stores (TestPromParse in model/textparse/promparse_test.go at
# d15adb9ad7e5d9fbde3a9a8f30200593a5a14d86 for "0", "1", "2", "0.25"; the rest by the ".0" rule of float.go).
STORED = {"0": "0.0", "-0": "0.0", "1": "1.0", "2": "2.0", "0.25": "0.25", "1.0": "1.0", "5000": "5000.0",
          "0.001": "0.001", "2048": "2048.0", "716.8000000000001": "716.8000000000001",
          "0.00015000000000000001": "0.00015000000000000001", "+Inf": "+Inf"}


@pytest.mark.parametrize("text", STORED)
def test_the_fixture_stores_labels_as_prometheus_3_does(text):
    assert stored_text(text) == STORED[text]
