"""Alert and recording rules under `promtool test rules`, on input series shaped by hand from the
catalogs: single models and fleets (one bad replica among many, rare preemptions spread over a
hundred, a rolling upgrade with old and new names side by side, two clusters), collapses short and
long, and the look-alikes that must not page (load increase, idle, restart, low traffic, longer
prompts, paused-gauge blips, TP-rank duplicates)."""

import subprocess

import pytest

from llmdash.config import Config
from llmdash.engines.catalog import load_all
from llmdash.panels.recorded import Key, Level, recording_layer
from llmdash.vocabulary import HEADLINE_QUANTILE, Alert, Role
from llmdash.rules.generate import render_rules
from llmdash.rules.identity import inhibit_rules
from tests.support.promtool import run_rule_tests
from tests.support import rule_scenarios as sc
from tests.support.builds import default_rules
from tests.support.paths import ROOT
from tests.support.rule_scenarios import Replica

SPECS = load_all()
P = Config().preemption


def recorded(engine: str, key: Key) -> str:
    """The name the engine's rules record `key` under (the registry's, so a rename follows)."""
    return recording_layer(SPECS[engine], Config()).get(key).name


# The severity each firing alert must carry, as a literal table (not the generator's rule restated): the preemption
# page is critical; the divergence pages (critical) only on engines that count no preemptions; the rest warn.
DIVERGENCE_PAGES = ("dynamo", "llama-cpp", "lmdeploy", "nim", "tgi")
SEVERITY = {(Alert.PREEMPTIONS_HIGH, e): "critical" for e in SPECS} | \
    {(Alert.DIVERGENCE, e): "critical" if e in DIVERGENCE_PAGES else "warning" for e in SPECS}


def severity(alert: str, spec) -> str:
    return SEVERITY.get((alert, spec.id), "warning")


def firing(alert: str, spec, model: str, **extra) -> dict:
    labels = {"alertname": alert, "alertstate": "firing", "llm_engine": spec.id, "model_name": model,
              "severity": severity(alert, spec), **extra}
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"labels": f"ALERTS{{{body}}}", "value": 1}


def never_fired(alerts, **matchers) -> dict:
    names = "|".join(alerts)
    extra = "".join(f', {k}="{v}"' for k, v in matchers.items())
    return {"expr": f'count_over_time(ALERTS{{alertname=~"{names}", alertstate="firing"{extra}}}[{sc.MINUTES}m])',
            "eval_time": f"{sc.MINUTES - 1}m", "exp_samples": []}


def run_promtool(promtool, tmp_path, spec, replicas, checks, roles=None) -> None:
    rules = tmp_path / f"{spec.id}.rules.yaml"
    rules.write_text(render_rules(default_rules()[spec.id]))
    run_rule_tests(promtool, tmp_path, rules, sc.input_series(spec, replicas, roles), checks, timeout=240)


@pytest.mark.parametrize("engine", sorted(SPECS))
def test_rule_files_pass_promtool_check(promtool, tmp_path, engine, default_rules):
    path = tmp_path / "rules.yaml"
    path.write_text(render_rules(default_rules[engine]))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# One promtool run per engine: every single-model scenario is its own model in the same input,
# so a collapse runs beside healthy, idle, restarting and ramping models at once.
QUIET = ("steady", "load_ramp", "idle", "restart", "low_traffic")


@pytest.mark.parametrize("engine", sorted(SPECS))
def test_each_scenario_pages_exactly_where_it_should(promtool, tmp_path, engine):
    spec = SPECS[engine]
    models = {"collapse": sc.collapse, "long_collapse": sc.long_collapse, "prompt_growth": sc.prompt_growth,
              **{name: getattr(sc, name) for name in QUIET}}
    before = f"{sc.ONSET - 1}m"
    checks = [{"expr": 'ALERTS{alertstate="firing"}', "eval_time": before, "exp_samples": []}]
    # the collapse: divergence, and the preemption page on the instance, within minutes
    checks.append({"expr": f'ALERTS{{alertname="{Alert.DIVERGENCE}", alertstate="firing", model_name=~".*collapse"}}',
                   "eval_time": f"{sc.ONSET + 10}m",
                   "exp_samples": [firing(Alert.DIVERGENCE, spec, m) for m in ("collapse", "long_collapse")]})
    if spec.has("preemptions"):
        checks.append({"expr": f'ALERTS{{alertname="{Alert.PREEMPTIONS_HIGH}", alertstate="firing"}}',
                       "eval_time": f"{sc.ONSET + 4}m",
                       "exp_samples": [firing(Alert.PREEMPTIONS_HIGH, spec, m, instance=f"{m}-0")
                                       for m in ("collapse", "long_collapse")]})
    # a 75-minute collapse keeps both pages to its end: the incident never becomes its own baseline
    end = f"{sc.ONSET + 75}m"
    checks.append({"expr": f'ALERTS{{alertname="{Alert.DIVERGENCE}", alertstate="firing", model_name="long_collapse"}}',
                   "eval_time": end, "exp_samples": [firing(Alert.DIVERGENCE, spec, "long_collapse")]})
    if spec.has("preemptions"):
        checks.append({"expr": f'ALERTS{{alertname="{Alert.PREEMPTIONS_HIGH}", alertstate="firing", '
                               'model_name="long_collapse"}',
                       "eval_time": end,
                       "exp_samples": [firing(Alert.PREEMPTIONS_HIGH, spec, "long_collapse",
                                              instance="long_collapse-0")]})
    # longer prompts without preemption: the divergence shows, but pages only where nothing counts preemptions
    checks.append({"expr": f'ALERTS{{alertname="{Alert.DIVERGENCE}", alertstate="firing", model_name="prompt_growth"}}',
                   "eval_time": f"{sc.ONSET + 10}m", "exp_samples": [firing(Alert.DIVERGENCE, spec, "prompt_growth")]})
    if spec.has("preemptions"):
        checks.append(never_fired([".*"], severity="critical", model_name="prompt_growth"))
    # the look-alikes: no preemption or divergence alert; no static latency alert but on a heavier load
    for name in QUIET:
        alerts = [Alert.PREEMPTIONS_HIGH, Alert.DIVERGENCE] + ([Alert.TTFT_HIGH, Alert.ITL_HIGH]
                                                               if name != "load_ramp" else [])
        checks.append(never_fired(alerts, model_name=name))
    run_promtool(promtool, tmp_path, spec, models, checks)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tensorrt-llm-serve"])  # counters, and a paused gauge
def test_one_thrashing_replica_among_20_pages_within_4_minutes_and_is_named(promtool, tmp_path, engine):
    spec = SPECS[engine]
    fleet = [Replica("m1", sc.thrashing if i == 7 else sc.steady, instance=f"m1-{i}") for i in range(20)]
    checks = [{"expr": f'ALERTS{{alertname="{Alert.PREEMPTIONS_HIGH}", alertstate="firing"}}',
               "eval_time": f"{sc.ONSET + 4}m",
               "exp_samples": [firing(Alert.PREEMPTIONS_HIGH, spec, "m1", instance="m1-7")]}]
    run_promtool(promtool, tmp_path, spec, fleet, checks, roles=("preemptions", "requests", "running"))


@pytest.mark.parametrize("engine", ["vllm"])  # the share is computed alike for every counting engine
def test_rare_preemptions_over_100_replicas_never_page(promtool, tmp_path, engine):
    """0.2 preemptions/s across the model (1 in 1000 requests) paged under a fleet-wide absolute threshold."""
    fleet = [Replica("m1", sc.background, instance=f"m1-{i}") for i in range(100)]
    checks = [never_fired([Alert.PREEMPTIONS_HIGH]),
              {"expr": f"sum({recorded(engine, Key('preemption_rate', window=P.window))}) > bool 0.1",
               "eval_time": f"{sc.ONSET}m",
               "exp_samples": [{"labels": "{}", "value": 1}]}]  # the fleet sum is above the old 0.1/s threshold
    run_promtool(promtool, tmp_path, SPECS[engine], fleet, checks, roles=("preemptions", "requests"))


@pytest.mark.parametrize("engine", [e for e, s in SPECS.items() if s.has("kv_usage") and
                                    any(len(s.signal(r).sources) > 1 for r in ("itl", "kv_usage") if s.has(r))])
def test_rolling_upgrade_keeps_the_old_replica_in_every_aggregate(promtool, tmp_path, engine):
    """A stalled replica still on the old metric names beside a healthy one on the new names."""
    spec = SPECS[engine]
    fleet = [Replica("m1", sc.stalled, instance="old", era="old"), Replica("m1", sc.steady, instance="new")]
    kv = recorded(engine, Key(Role.KV_USAGE))
    checks = [{"expr": kv, "eval_time": "30m",
               "exp_samples": [{"labels": f'{kv}{{llm_engine="{engine}", model_name="m1"}}',
                                "value": 0.99}]}]
    role = next(r for r in ("itl", "tpot", "ttft") if spec.has(r))
    p99 = recorded(engine, Key("quantile", role, Config().divergence.window, HEADLINE_QUANTILE))
    checks.append({"expr": f"{p99} > bool 0.2", "eval_time": "30m",
                   "exp_samples": [{"labels": f'{{llm_engine="{engine}", model_name="m1"}}', "value": 1}]})
    run_promtool(promtool, tmp_path, spec, fleet, checks)


@pytest.mark.parametrize("engine", ["vllm", "lmdeploy"])
def test_two_clusters_serving_one_model_page_separately(promtool, tmp_path, engine):
    spec = SPECS[engine]
    fleet = [Replica("m1", sc.collapse, instance="a-0", labels=(("cluster", "eu-1"),)),
             Replica("m1", sc.steady, instance="b-0", labels=(("cluster", "us-1"),))]
    checks = [{"expr": f'ALERTS{{alertname="{Alert.DIVERGENCE}", alertstate="firing"}}',
               "eval_time": f"{sc.ONSET + 10}m",
               "exp_samples": [firing(Alert.DIVERGENCE, spec, "m1", cluster="eu-1")]}]
    run_promtool(promtool, tmp_path, spec, fleet, checks)


def test_sglang_alert_labels_stay_stable_when_the_recompute_side_flips(promtool, tmp_path):
    spec = SPECS["sglang"]
    checks = [{"expr": f'ALERTS{{alertname="{Alert.PREEMPTIONS_HIGH}", alertstate="firing"}}',
               "eval_time": f"{sc.ONSET + 30}m",
               "exp_samples": [firing(Alert.PREEMPTIONS_HIGH, spec, "m1", instance="m1-0")]}]
    run_promtool(promtool, tmp_path, spec, {"m1": sc.alternating_sides}, checks)


def test_retractions_are_read_from_one_tp_rank(promtool, tmp_path):
    """Every rank repeats the retraction counter: the per-instance rate is one rank's 0.08/s, not 0.16/s."""
    name = recorded("sglang", Key("preemption_rate", window=P.short_window, level=Level.INSTANCE))
    checks = [{"expr": f"round({name} * 1000)", "eval_time": f"{sc.ONSET + 10}m", "exp_samples": [
        {"labels": '{instance="m1-0", llm_engine="sglang", model_name="m1"}', "value": 80}]}]
    run_promtool(promtool, tmp_path, SPECS["sglang"], {"m1": sc.tp_overcount}, checks)


@pytest.mark.parametrize("engine", ["tensorrt-llm-serve", "tensorrt-llm-triton"])
def test_paused_gauge_blips_do_not_page(promtool, tmp_path, engine):
    spec = SPECS[engine]
    run_promtool(promtool, tmp_path, spec, {"m1": sc.paused_blips}, [never_fired([Alert.PREEMPTIONS_HIGH])],
                 roles=("preemptions", "requests", "running"))


def test_triton_ttft_page_reads_the_share_above_its_5_second_cap(promtool, tmp_path):
    """The first-response histogram tops out at 5000 ms: a p99 there reads exactly 5 s and never passes 5."""
    spec = SPECS["tensorrt-llm-triton"]
    checks = [{"expr": f'ALERTS{{alertname="{Alert.TTFT_HIGH}", alertstate="firing"}}',
               "eval_time": f"{sc.ONSET + 15}m",
               "exp_samples": [firing(Alert.TTFT_HIGH, spec, "m1")]}]
    run_promtool(promtool, tmp_path, spec, {"m1": sc.capped_collapse}, checks)


def test_a_replica_that_stops_exporting_its_preemption_counter_is_reported(promtool, tmp_path):
    spec = SPECS["vllm"]
    checks = [{"expr": f'ALERTS{{alertname="{Alert.SIGNAL_MISSING}", alertstate="firing"}}', "eval_time": "20m",
               "exp_samples": [firing(Alert.SIGNAL_MISSING, spec, "m1", instance="m1-0", signal="preemptions")]},
              {"expr": f'ALERTS{{alertname="{Alert.SIGNAL_MISSING}", alertstate="firing"}}', "eval_time": "10m",
               "exp_samples": []}]
    run_promtool(promtool, tmp_path, spec, {"m1": sc.steady}, checks,
                 roles=("throughput", "requests", "itl", "tpot", "ttft", "running", "kv_usage", "waiting"))


def test_alert_labels_are_the_aggregation_labels_only(default_rules):
    for engine, model in default_rules.items():
        for rule in (rule for group in model["groups"] for rule in group["rules"]):
            assert "engine" not in rule["labels"] and rule["labels"]["llm_engine"] == engine
            # no selector but the catalog's own defaults (NIM's job="nim")
            expr = rule["expr"]
            for label, value in SPECS[engine].selectors:
                expr = expr.replace(f'{label}="{value}"', "")
            assert "job=" not in expr and "namespace=" not in expr


def test_without_a_template_no_rule_carries_a_relative_runbook_url_but_names_the_file(default_rules):
    for model in default_rules.values():
        for rule in (rule for group in model["groups"] for rule in group["rules"]):
            if "alert" in rule:
                assert set(rule["labels"]) <= {"llm_engine", "severity", "signal"}
                assert "recompute_side" not in rule["expr"]
                assert "runbook_url" not in rule["annotations"], "a relative runbook link nobody can open"
                assert f"generated/runbooks/{rule['alert']}.md" in rule["annotations"]["description"]
                assert (ROOT / "generated/runbooks" / f"{rule['alert']}.md").is_file()


def test_inhibitions_silence_the_outside_view_of_a_preemption_page():
    rule, same_unit, frontend = inhibit_rules(Config())["inhibit_rules"]
    assert same_unit["target_matchers"] == [
        f'alertname=~"{Alert.PREEMPTIONS_CHRONIC}|{Alert.INSTANCE_LATENCY_HIGH}"']
    # the KV-cache unit: the instance and every catalog's unit labels (vLLM's engine, Ray Serve's replica, SGLang's
    # data-parallel rank), so a page of one replica leaves its neighbours' warnings on the same node alone
    assert same_unit["equal"] == ["llm_engine", "model_name", "cluster", "namespace", "instance", "engine",
                                  "ReplicaId", "dp_rank"]
    # across llm_engine: a worker's page silences its Dynamo frontend's latency and divergence alerts
    assert frontend == {"source_matchers": [f'alertname="{Alert.PREEMPTIONS_HIGH}"'],
                        "target_matchers": [rule["target_matchers"][0], 'llm_engine=~"dynamo"'],
                        "equal": ["model_name", "cluster", "namespace"]}
    assert rule["source_matchers"] == [f'alertname="{Alert.PREEMPTIONS_HIGH}"']
    assert Alert.DIVERGENCE in rule["target_matchers"][0] and Alert.PREEMPTIONS_HIGH not in rule["target_matchers"][0]
    assert rule["equal"] == ["llm_engine", "model_name", "cluster", "namespace"]
