"""End-to-end, from log lines alone: the simulator writes SGLang's scheduler log, the real mtail runs the
generated program over it, a real Prometheus scrapes mtail and evaluates the generated rules, and the
dashboard's "Preemption (logs)" annotation and the LLMServingLogPreemptionsHigh page are read back.

Prometheus stamps scrapes with wall-clock time, so scenarios run compressed: one scenario minute per
real second (`SCALE`), scraped and evaluated every second, under a config whose preemption windows are
scaled the same way (5m -> 5s, 2m -> 3s, 1m -> 1s, 10m -> 10s). All scenarios run at once, each its own
log file and mtail process (its own scrape target, `namespace` = the case), beside one Prometheus.
"""

from __future__ import annotations

import dataclasses
import re
import time

import pytest

from llmdash.build import mtail_files
from llmdash.config import Config, Divergence, Logs, Preemption, Rules
from llmdash.dashboards.assemble import build_dashboard
from llmdash.engines.catalog import load_engine
from llmdash.errors import LlmdashError
from llmdash.lab.evaluate import evaluate_dashboard
from llmdash.lab.logs import sglang_log
from llmdash.lab.mtail import INSTALL_HINT as MTAIL_HINT, MtailServer
from llmdash.lab.promserver import INSTALL_HINT as PROMETHEUS_HINT, PrometheusServer, find_binary
from llmdash.lab.scenarios import Traffic, build
from llmdash.vocabulary import Alert
from llmdash.rules.generate import build_rules, render_rules

pytestmark = pytest.mark.e2e

SCALE = 60.0                      # scenario seconds per real second
TRAFFIC = Traffic(steady_min=4, after_min=10, ramp_min=4, second_model=False)   # 14 scenario minutes
CASES = {                         # namespace -> (scenario, SGLang log form)
    "collapse-0-4": ("kv-collapse", "0.4"),     # "Decode out of memory happened." (0.4.0-0.4.6)
    "collapse-0-5": ("kv-collapse", "0.5"),     # "KV cache pool is full. Retract requests." (0.4.7+)
    "steady-0-5": ("steady", "0.5"),
    "load-ramp-0-4": ("load-ramp", "0.4"),
    "restart-0-5": ("restart", "0.5"),
}
QUIET = [case for case, (scenario, _) in CASES.items() if scenario != "kv-collapse"]
CONFIG = dataclasses.replace(
    Config(), engines=("sglang",), logs=Logs(enabled=True),
    preemption=dataclasses.replace(Preemption(), window="5s", short_window="3s", long_window="30s",
                                   alert_for="1s", keep_firing_for="10s"),
    divergence=dataclasses.replace(Divergence(), window="5s", annotation_step="1s"), rules=Rules(interval="1s"))


@dataclasses.dataclass
class Run:
    server: PrometheusServer
    start: float                     # wall clock at scenario time 0
    end: float
    first_retraction: dict[str, float]   # case -> wall clock when its first retraction line was written
    retracted: dict[str, int]        # case -> requests retracted, as TP0 logged them


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    for binary, hint in (("mtail", MTAIL_HINT), ("prometheus", PROMETHEUS_HINT)):
        try:
            find_binary(binary, hint)
        except LlmdashError as exc:
            pytest.fail(f"the log end-to-end tests need Debian's {binary}: {exc}", pytrace=False)
    root = tmp_path_factory.mktemp("logs-e2e")
    progs = root / "progs"
    progs.mkdir()
    (progs / "sglang.mtail").write_text(mtail_files(CONFIG)["mtail/sglang.mtail"])
    rules = root / "sglang.rules.yaml"
    spec = load_engine("sglang")
    rules.write_text(render_rules(build_rules(spec, CONFIG)))
    logs = {case: sglang_log(build(scenario, TRAFFIC), spec, form, 1, time.time())
            for case, (scenario, form) in CASES.items()}
    files = {case: root / f"{case}.log" for case in CASES}
    for path in files.values():
        path.touch()                 # mtail in server mode reads what is appended after it starts
    mtails = {case: MtailServer(progs, [files[case]]) for case in CASES}
    server = None
    try:
        for m in mtails.values():
            m.start()
        server = PrometheusServer(rule_files=(rules,), evaluation_interval="1s", scrape_interval="1s", scrape_configs=[
            {"job_name": "mtail", "static_configs": [{"targets": [m.address], "labels": {"namespace": case}}
                                                     for case, m in mtails.items()]}])
        server.start()
        _wait_for_targets(server, len(CASES))
        start = time.time()
        handles = {case: open(path, "a", buffering=1) for case, path in files.items()}
        cursor = dict.fromkeys(CASES, 0)
        written: dict[str, float] = {}   # case -> wall clock when its first retraction line was written
        duration = max(build(scenario, TRAFFIC).duration_s for scenario, _ in CASES.values())
        t0 = time.monotonic()
        while True:
            now = (time.monotonic() - t0) * SCALE
            for case, lines in logs.items():
                while cursor[case] < len(lines) and lines[cursor[case]].at <= now:
                    handles[case].write(lines[cursor[case]].text + "\n")
                    if "#retracted_reqs" in lines[cursor[case]].text:
                        written.setdefault(case, time.time())
                    cursor[case] += 1
            if now >= duration:
                break
            time.sleep(0.05)
        for handle in handles.values():
            handle.close()
        tp0 = {case: [(line.at, int(m[1])) for line in lines if " TP0]" in line.text
                      and (m := re.search(r"#retracted_reqs: (\d+)", line.text))] for case, lines in logs.items()}
        retracted = {c: sum(n for _, n in v) for c, v in tp0.items()}
        _wait_for_counts(server, retracted)   # the last lines read by mtail and scraped
        time.sleep(1)                         # and the rules evaluated once more
        yield Run(server, start, time.time(), written, retracted)
    finally:
        if server is not None:
            server.stop()
        for m in mtails.values():
            m.stop()


def _wait_for_targets(server: PrometheusServer, count: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(server.query('up{job="mtail"} == 1', time.time())) == count:
            return
        time.sleep(0.1)
    raise AssertionError(f"Prometheus did not scrape the {count} mtail targets within {timeout_s:g}s")


def _wait_for_counts(server: PrometheusServer, expected: dict[str, int], timeout_s: float = 10.0) -> None:
    """Until Prometheus holds counts for every case (the test asserts their values), or the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = {s["metric"]["namespace"]: float(s["value"][1])
               for s in server.query("llmdash_log_preemptions_total", time.time())}
        if got == {case: float(n) for case, n in expected.items()}:
            return
        time.sleep(0.2)


def _firing(run: Run) -> dict[str, float]:
    """Case -> wall clock when the log page first fired."""
    series = run.server.query_range(f'ALERTS{{alertname="{Alert.LOG_PREEMPTIONS_HIGH}", alertstate="firing"}}',
                                    run.start, run.end, 1)
    return {s["metric"]["namespace"]: float(s["values"][0][0]) for s in series}


@pytest.fixture(scope="module")
def dashboard(run):
    return evaluate_dashboard(build_dashboard(load_engine("sglang"), CONFIG), run.server, run.start, run.end,
                              step_s=1, scrape_s=1,
                              panel_filter=lambda row, panel: panel.get("title") == "Preemptions/s (logs)")


def test_counter_is_the_retracted_requests_of_tp0_only(run):
    """Every retraction is logged by TP0 and TP1; routine lines mention retraction too. Only TP0 counts."""
    values = {s["metric"]["namespace"]: float(s["value"][1])
              for s in run.server.query('llmdash_log_preemptions_total{llm_engine="sglang"}', run.end)}
    assert values == {case: float(run.retracted[case]) for case in CASES}
    assert run.retracted["collapse-0-4"] > 50 and run.retracted["collapse-0-5"] > 50
    assert all(run.retracted[case] == 0 for case in QUIET)


@pytest.mark.parametrize("case", ["collapse-0-4", "collapse-0-5"])
def test_log_page_and_annotation_mark_the_collapse_from_log_lines_alone(run, dashboard, case):
    first = run.first_retraction[case]
    fired = _firing(run)
    assert case in fired, f"{Alert.LOG_PREEMPTIONS_HIGH} never fired for {case}"
    # never before the log showed a retraction; within 5 scenario minutes of it
    assert first <= fired[case] <= first + 5 * 60 / SCALE, (fired[case] - first) * SCALE
    regions = [r for r in dashboard.regions("Preemption (logs)") if r.labels.get("namespace") == case]
    assert regions, f"no Preemption (logs) annotation for {case}"
    # within 3 scenario minutes: mtail polls every 250 ms, Prometheus scrapes every 1 s and a rate needs 2 samples
    assert first - 1 <= regions[0].start <= first + 3 * 60 / SCALE, (regions[0].start - first) * SCALE
    rates = [v for s in dashboard.panel("Preemptions/s (logs)").targets[0].series
             if s.labels.get("namespace") == case for _, v in s.points]
    assert max(rates) > 0


def test_quiet_scenarios_stay_silent_with_the_counter_present_at_zero(run, dashboard):
    fired = _firing(run)
    assert not set(QUIET) & set(fired)
    marked = {r.labels.get("namespace") for r in dashboard.regions("Preemption (logs)")}
    assert not set(QUIET) & marked
    panel = dashboard.panel("Preemptions/s (logs)").targets[0]
    for case in QUIET:   # the series exists (opened at 0 by routine lines) and reads 0, never NaN
        points = [v for s in panel.series if s.labels.get("namespace") == case for _, v in s.points]
        assert points and all(v == 0 for v in points), case
