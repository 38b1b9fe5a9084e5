"""Preemption from logs, fast: the generated mtail programs compile, real mtail counts exactly the lines
the engines' sources print (and nothing that merely mentions retraction), the simulator writes those
lines, and `logs.enabled` alone adds the panel, annotation and page."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from llmdash.build import build_dashboards, build_rule_files, mtail_files
from llmdash.config import Config, Logs, load_config
from llmdash.engines.catalog import load_engine
from llmdash.errors import LlmdashError
from llmdash.lab import mtail
from llmdash.lab.logs import sglang_log
from llmdash.lab.promserver import find_binary
from llmdash.lab.scenarios import Traffic, build
from llmdash.vocabulary import Alert
from llmdash.rules.generate import render_rules
from llmdash.rules.identity import carried_alerts
from tests.support.paths import ROOT
from tests.support.promtool import run_rule_tests

ENABLED = Config(logs=Logs(enabled=True))

# Lines as the engines print them (engines/*.yaml `logs:` cites each format), with what they add.
SGLANG_LINES = [
    ("[2025-01-01 12:00:00 TP0] Decode out of memory happened. #retracted_reqs: 3, "
     "#new_token_ratio: 0.7000 -> 0.9000", 3),                                   # 0.4.0-0.4.6, TP rank 0
    ("[2025-01-01 12:00:00 TP1] Decode out of memory happened. #retracted_reqs: 3, "
     "#new_token_ratio: 0.7000 -> 0.9000", 0),                                   # the same retraction, rank 1
    ("[2025-01-01 12:00:05 DP1 TP0] Decode out of memory happened. #retracted_reqs: 2, "
     "#new_token_ratio: 0.7000 -> 0.9000", 2),                                   # another DP scheduler
    ("[2025-06-01 12:00:01] KV cache pool is full. Retract requests. #retracted_reqs: 4, "
     "#new_token_ratio: 0.7000 -> 0.9000", 4),                                   # 0.4.7-0.5.6 INFO, TP size 1
    ("[2025-06-01 12:00:02.123 PP0 TP0 EP0] KV cache pool is full. Retract requests. #retracted_reqs: 5, "
     "#new_tokens_gained: 8192, #new_token_ratio: 0.7000 -> 0.9000", 5),         # 0.5.10+ WARNING, ms stamps
    ("[2025-06-01 12:00:02.123 PP1 TP0 EP0] KV cache pool is full. Retract requests. #retracted_reqs: 5, "
     "#new_tokens_gained: 8192, #new_token_ratio: 0.7000 -> 0.9000", 0),         # pipeline stage 1 repeats it
    ("[2025-06-01 12:00:02.123 PP0 TP1 EP1] KV cache pool is full. Retract requests. #retracted_reqs: 5, "
     "#new_tokens_gained: 8192, #new_token_ratio: 0.7000 -> 0.9000", 0),
    ("[2025-06-01 12:00:03 TP0] Decode batch, #running-req: 10, #token: 100, token usage: 0.50, pre-allocated "
     "usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 7, cuda graph: True, gen throughput "
     "(token/s): 100.00, #queue-req: 0, ", 0),                                   # disaggregated decode routine
    ("[2025-06-01 12:00:04 TP0] Testing retraction. #retracted_reqs: 9, #new_tokens_gained: 0", 0),
    ("[2025-06-01 12:00:04 TP0] Decode out of memory. Try to lower your batch size.", 0),
    ("WARNING 06-01 12:00:05 [proxy.py:12] KV cache pool is full. Retract requests. #retracted_reqs: 6, ", 0),
]
VLLM_LINES = [
    ("WARNING 01-01 12:00:00 scheduler.py:1356] Sequence group 5 is preempted by PreemptionMode.RECOMPUTE mode "
     "because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
     "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
     "total_num_cumulative_preemption=1", 1),                                    # 0.6.0 format, 1st preemption
    ("WARNING 01-01 12:00:09 [scheduler.py:1769] Sequence group 77 is preempted by PreemptionMode.SWAP mode "
     "because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
     "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
     "total_num_cumulative_preemption=51", 51),                                  # 0.6.6+ format, 51st
    ("INFO 01-01 12:00:10 [metrics.py:486] Sequence group 78 is preempted by PreemptionMode.RECOMPUTE mode "
     "because there is not enough KV cache space. total_num_cumulative_preemption=999", 51),  # another logger
    ("WARNING 01-01 12:00:19 [scheduler.py:1769] Sequence group 99 is preempted by PreemptionMode.RECOMPUTE mode "
     "because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
     "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
     "total_num_cumulative_preemption=101", 101),                                # 101st: the counter copies it
]


@pytest.fixture(scope="module")
def mtail_binary():
    try:
        return find_binary("mtail", mtail.INSTALL_HINT)
    except LlmdashError as exc:
        pytest.fail(f"the log tests need Debian's mtail: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def progs(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("progs")
    for rel, text in mtail_files(Config()).items():
        (directory / Path(rel).name).write_text(text)
    return directory


def counters(text: str) -> dict[str, float]:
    return {m[1]: float(m[2]) for m in re.finditer(r'^llmdash_log_preemptions_total\{llm_engine="([^"]+)"\} (\S+)$',
                                                   text, re.M)}


def test_programs_are_built_for_the_engines_that_log_preemption_and_compile(mtail_binary, progs):
    assert sorted(p.name for p in progs.iterdir()) == ["sglang.mtail", "vllm.mtail"]
    mtail.compile_programs(progs)
    broken = progs.parent / "broken"
    broken.mkdir()
    (broken / "x.mtail").write_text("counter x\n/(/ { x++ }\n")
    with pytest.raises(LlmdashError, match="could not compile"):
        mtail.compile_programs(broken)


def test_mtail_counts_exactly_the_lines_that_report_preemption(mtail_binary, progs, tmp_path):
    sglang, vllm = tmp_path / "sglang.log", tmp_path / "vllm.log"
    sglang.write_text("".join(line + "\n" for line, _ in SGLANG_LINES))
    vllm.write_text("".join(line + "\n" for line, _ in VLLM_LINES))
    assert counters(mtail.one_shot(progs, [sglang, vllm])) == {"sglang": 14.0, "vllm": 101.0}
    assert sum(n for _, n in SGLANG_LINES) == 14 and VLLM_LINES[-1][1] == 101


def test_every_line_counted_or_not_on_its_own(mtail_binary, progs, tmp_path):
    """Line by line: the count is exactly the line's number (its cumulative total for vLLM), or nothing."""
    vllm_alone = (1, 51, 0, 101)   # the other logger's line, read alone, counts nothing
    alone = [("sglang", line, n) for line, n in SGLANG_LINES] + \
        [("vllm", line, n) for (line, _), n in zip(VLLM_LINES, vllm_alone)]
    for i, (engine, line, expected) in enumerate(alone):
        log = tmp_path / f"{i}.log"
        log.write_text(line + "\n")
        assert counters(mtail.one_shot(progs, [log])).get(engine, 0.0) == expected, line


def test_simulated_sglang_log_counts_retractions_once_whatever_the_form(mtail_binary, progs, tmp_path):
    """The simulator's log (both forms, two TP ranks, routine decode lines) counts each retracted request once."""
    scenario = build("kv-collapse", Traffic(steady_min=4, after_min=12, ramp_min=4, second_model=False))
    for form in ("0.4", "0.5"):
        lines = sglang_log(scenario, load_engine("sglang"), form, 1, 1.7e9)
        retracted = [int(re.search(r"#retracted_reqs: (\d+)", line.text)[1]) for line in lines
                     if "#retracted_reqs" in line.text and " TP0]" in line.text]
        assert len(retracted) > 10 and sum(1 for line in lines if " TP1]" in line.text) == len(retracted)
        assert (form == "0.5") == any("#retracted-req: 0" in line.text for line in lines)
        log = tmp_path / f"{form}.log"
        log.write_text("".join(line.text + "\n" for line in lines))
        assert counters(mtail.one_shot(progs, [log])) == {"sglang": float(sum(retracted))}


def test_logs_disabled_by_default_changes_nothing_and_the_example_config_matches():
    assert load_config(ROOT / "llmdash.example.yaml").logs == Config().logs == Logs()
    dashboards = build_dashboards(Config())
    assert "Preemption (logs)" not in str(dashboards) and "llmdash_log_preemptions_total" not in str(dashboards)
    assert "llmdash_log_preemptions_total" not in str(build_rule_files(Config()))


def test_logs_enabled_adds_panel_annotation_and_page_only_where_the_catalog_has_log_lines():
    dashboards = build_dashboards(ENABLED)
    for engine in ("lmdeploy", "sglang", "tensorrt-llm-serve", "tensorrt-llm-triton", "vllm"):
        has_lines = bool(load_engine(engine).log_patterns)
        titles = [p.get("title") for p in dashboards[engine]["panels"]]
        annotations = [a["name"] for a in dashboards[engine]["annotations"]["list"]]
        assert ("Preemptions/s (logs)" in titles) == has_lines
        assert ("Preemption (logs)" in annotations) == has_lines
        assert (Alert.LOG_PREEMPTIONS_HIGH in carried_alerts(load_engine(engine), ENABLED)) == has_lines
    sglang = dashboards["sglang"]
    panel = next(p for p in sglang["panels"] if p.get("title") == "Preemptions/s (logs)")
    expr = panel["targets"][0]["expr"]
    # mtail is its own target: no model or engine-instance matcher, the fleet groups kept
    assert expr == ('sum by (cluster, namespace) (rate(llmdash_log_preemptions_total{llm_engine="sglang", '
                    'cluster=~"$cluster", namespace=~"$namespace"}[5m]))')
    row = [p.get("title") for p in sglang["panels"]]
    row = row[row.index("Preemption"):]
    assert row.index("Preemptions/s (logs)") == row.index("Preemptions/s") + 1


def test_log_selectors_replace_the_top_level_ones_for_mtail_series():
    config = dataclasses.replace(ENABLED, selectors={"job": "sglang", "cluster": "eu"},
                                 logs=Logs(enabled=True, selectors={"job": "mtail"}, replica_labels=("pod",)))
    rule = next(r for g in build_rule_files(config)["sglang"]["groups"] for r in g["rules"]
                if r.get("alert") == Alert.LOG_PREEMPTIONS_HIGH)
    assert rule["expr"] == (
        '(sum by (cluster, namespace, instance, pod) (increase(llmdash_log_preemptions_total{llm_engine="sglang", '
        'job="mtail", cluster="eu"}[2m])) >= 2) unless on (cluster, namespace, pod) group by (cluster, namespace, '
        'pod) (sglang:num_retracted_requests_total{cluster="eu", job="sglang"})')


@pytest.mark.parametrize("text, message", [
    ("logs: {enabled: yes please}", "logs.enabled: expected true or false"),
    ("logs: {replica_labels: [instance]}", "logs.replica_labels: 'instance' differs"),
    ("logs: {selectors: {'bad-label': x}}", "logs: 'bad-label' is not a label name"),
])
def test_bad_logs_settings_are_one_line_errors(tmp_path, text, message):
    path = tmp_path / "llmdash.yaml"
    path.write_text(text + "\n")
    with pytest.raises(LlmdashError) as error:
        load_config(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def _series(labels: dict[str, str], values: str) -> dict:
    return {"series": "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "values": values}


@pytest.mark.e2e
@pytest.mark.parametrize("replica_labels, pages", [
    (("pod",), ["a"]),     # joined per pod: only the replica without the metric pages
    ((), []),              # default, per fleet group: pod b exports the metric, so the namespace is silent
])
def test_log_page_under_promtool_stays_off_where_the_engine_exports_the_metric(promtool, tmp_path, replica_labels,
                                                                               pages):
    """Pods a and b log a collapse; b's engine (0.5.7+) also exports its retraction counter and pages
    through LLMServingPreemptionsHigh. Pod c retracts once every ten minutes, pod d never."""
    config = dataclasses.replace(Config(), logs=Logs(enabled=True, replica_labels=replica_labels))
    rules = tmp_path / "sglang.rules.yaml"
    rules.write_text(render_rules(build_rule_files(config)["sglang"]))
    mtail_of = lambda pod: {"__name__": "llmdash_log_preemptions_total", "llm_engine": "sglang",  # noqa: E731
                            "namespace": "llm", "pod": pod, "instance": f"{pod}:3903", "job": "mtail"}
    collapse = "0x10 5+5x10 55x10"
    inputs = [_series(mtail_of("a"), collapse), _series(mtail_of("b"), collapse),
              _series(mtail_of("c"), "0x9 1x10 2x10"), _series(mtail_of("d"), "0x30"),
              _series({"__name__": "sglang:num_retracted_requests_total", "tp_rank": "0", "namespace": "llm",
                       "pod": "b", "instance": "b:30000", "model_name": "m"}, collapse)]
    expected = [{"labels": f'ALERTS{{alertname="{Alert.LOG_PREEMPTIONS_HIGH}", alertstate="firing", '
                           f'instance="{pod}:3903", llm_engine="sglang", namespace="llm", '
                           f'{"pod=" + chr(34) + pod + chr(34) + ", " if replica_labels else ""}'
                           f'severity="critical"}}', "value": 1} for pod in pages]
    checks = [{"expr": f'ALERTS{{alertname="{Alert.LOG_PREEMPTIONS_HIGH}", alertstate="firing"}}', "eval_time": "15m",
               "exp_samples": expected},
              {"expr": f'count_over_time(ALERTS{{alertname="{Alert.LOG_PREEMPTIONS_HIGH}", pod=~"c|d"}}[30m])',
               "eval_time": "30m", "exp_samples": []}]
    run_rule_tests(promtool, tmp_path, rules, inputs, checks, timeout=120)
