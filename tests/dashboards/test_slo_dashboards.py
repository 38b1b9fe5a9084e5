"""The error-budget row of the engine dashboards and the fleet's SLO table: present exactly where objectives are
configured, schema-valid, reading recorded series only, and saying in their descriptions what the metrics are."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmdash.build import build_dashboards, build_rule_files
from llmdash.config import load_config
from llmdash.dashboards.schema import schema_problems
from llmdash.vocabulary import PANEL_TITLES, Panel

ENGINES = ["vllm", "sglang"]
OBJECTIVES = [{"name": "ttft", "target_seconds": 1, "objective": 0.999},
              {"name": "token_latency", "target_seconds": 0.1, "objective": 0.99},
              {"name": "availability", "objective": 0.999, "engines": ["vllm"]}]
SLO_PANELS = (PANEL_TITLES[Panel.SLO_BUDGET], PANEL_TITLES[Panel.SLO_BURN_RATE], PANEL_TITLES[Panel.SLO_ATTAINMENT],
              PANEL_TITLES[Panel.SLO_COVERAGE])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = Path(tmp_path_factory.mktemp("slo")) / "llmdash.yaml"
    path.write_text(yaml.safe_dump({"engines": ENGINES, "slo": {"objectives": OBJECTIVES}}))
    config = load_config(path)
    return build_dashboards(config), build_rule_files(config)


def rows(dashboard: dict) -> dict[str, list[dict]]:
    out, current = {}, None
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            current = out.setdefault(panel["title"], [])
        else:
            current.append(panel)
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_dashboard_has_the_error_budget_row(built, engine):
    dashboards, rules = built
    panels = rows(dashboards[engine])["Error budget"]
    assert [p["title"] for p in panels] == list(SLO_PANELS)
    recorded = {r["record"] for g in rules[engine]["groups"] for r in g["rules"] if "record" in r}
    names = {"ttft", "token_latency"} | ({"availability"} if engine == "vllm" else set())
    for panel in panels:
        exprs = [t["expr"] for t in panel["targets"]]
        assert {n for n in names if any(f'slo="{n}"' in e for e in exprs)} == names, panel["title"]
        read = {token for e in exprs for token in recorded if token in e}
        assert read and all(f"`{name}" in panel["description"] for name in read), panel["title"]
        assert "vllm:" not in " ".join(exprs) and "sglang:" not in " ".join(exprs)   # recorded series only
    assert schema_problems(dashboards[engine]) == []


def test_the_error_budget_panels_say_what_counts_as_valid_good_and_bad(built):
    """vLLM's availability leaves the client's aborts out; a latency SLI counts only the replicas with the
    target's bucket; SGLang has no availability objective (limited to vLLM), so its panels name none."""
    dashboards, _ = built
    for panel in rows(dashboards["vllm"])["Error budget"]:
        text = panel["description"]
        assert ('availability: valid events are finished requests, `vllm:request_success_total`, less the '
                "client's aborts, `vllm:request_success_total{finished_reason=\"abort\"}`") in text, panel["title"]
        assert 'bad: failed requests, `vllm:request_success_total{finished_reason=\"error\"}`' in text
        assert ("ttft: valid events are observations, `vllm:time_to_first_token_seconds_count`, of the replicas "
                "exporting the target's bucket") in text
    for panel in rows(dashboards["sglang"])["Error budget"]:
        assert "availability:" not in panel["description"] and "`sglang:time_to_first_token_seconds_bucket`" in \
            panel["description"]


def test_the_fleet_lists_models_by_budget_left_worst_first(built):
    dashboards, _ = built
    table = rows(dashboards["fleet"])["SLOs"][0]
    assert table["title"] == PANEL_TITLES[Panel.FLEET_SLO_BUDGET]
    assert table["options"]["sortBy"] == [{"displayName": "Error budget remaining", "desc": False}]
    assert "llm_slo_error_budget:consumed" in table["targets"][0]["expr"]
    assert schema_problems(dashboards["fleet"]) == []


def test_no_objective_no_error_budget_panels():
    dashboards = build_dashboards(load_config(None))
    assert all("Error budget" not in rows(d) and "SLOs" not in rows(d) for d in dashboards.values())
