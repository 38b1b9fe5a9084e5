"""`alerts.runbook_url_template`: every alert's runbook_url, and a link from every panel an alert watches."""

from __future__ import annotations

import pytest

from llmdash.build import build_dashboards, build_rule_files
from llmdash.config import load_config
from llmdash.errors import EXIT_USAGE, LlmdashError
from llmdash.vocabulary import Alert
from tests.support.catalogs import ENGINES

TEMPLATE = "https://git.example.com/ops/llmdash/blob/main/generated/runbooks/{alertname}.md"


def config_with(tmp_path, text: str):
    path = tmp_path / "llmdash.yaml"
    path.write_text(text)
    return load_config(path)


@pytest.fixture(scope="module")
def templated(tmp_path_factory):
    config = config_with(tmp_path_factory.mktemp("cfg"), f"alerts:\n  runbook_url_template: {TEMPLATE}\n")
    return build_dashboards(config), build_rule_files(config)


def url(alert: str) -> str:
    return TEMPLATE.replace("{alertname}", alert)


def test_every_alert_gets_an_absolute_runbook_url(templated):
    _, rules = templated
    alerts = [rule for model in rules.values() for group in model["groups"] for rule in group["rules"]
              if "alert" in rule]
    assert alerts
    for rule in alerts:
        assert rule["annotations"]["runbook_url"] == url(rule["alert"])


def panel_links(dashboard: dict, title: str) -> list[list[dict]]:
    return [panel.get("links", []) for panel in dashboard["panels"] if panel["title"] == title]


# (panel title or the engine's token-latency title) -> the alert that watches it
def watched(dashboard: dict, engine: str, rules: dict) -> dict[str, str]:
    alerts = {rule["alert"] for group in rules[engine]["groups"] for rule in group["rules"] if "alert" in rule}
    expected = {"TTFT p99": Alert.TTFT_HIGH, "ITL p99": Alert.ITL_HIGH, "TPOT p99": Alert.ITL_HIGH,
                "Latency vs throughput divergence": Alert.DIVERGENCE,
                "Preemptions/s": Alert.PREEMPTIONS_HIGH, "Paused requests": Alert.PREEMPTIONS_HIGH,
                "Top instances by ITL p99": Alert.INSTANCE_LATENCY_HIGH,
                "Top instances by TPOT p99": Alert.INSTANCE_LATENCY_HIGH}
    titles = {panel["title"] for panel in dashboard["panels"]}
    return {title: alert for title, alert in expected.items() if alert in alerts and title in titles}


@pytest.mark.parametrize("engine", ENGINES)
def test_each_watched_panel_links_to_its_alerts_runbook(templated, engine):
    dashboards, rules = templated
    dashboard = dashboards[engine]
    expected = watched(dashboard, engine, rules)
    assert Alert.DIVERGENCE in expected.values()
    for title, alert in expected.items():
        links = panel_links(dashboard, title)
        assert links, f"{engine}: no panel titled {title!r}"
        for found in links:
            assert [(link["title"], link["url"], link["targetBlank"]) for link in found] == [
                (f"Runbook: {alert}", url(alert), True)], (engine, title)
    linked = {link["url"] for panel in dashboard["panels"] for link in panel.get("links", [])}
    assert linked == {url(alert) for alert in expected.values()}


def test_without_a_template_no_panel_links_a_runbook():
    dashboards = build_dashboards(load_config(None))
    assert not any(panel.get("links") for d in dashboards.values() for panel in d["panels"])


def test_dashboards_link_to_every_llmdash_dashboard_and_the_fleet_view(default_build):
    assert "llmdash-fleet" in default_build["fleet"]["tags"]
    for name, dashboard in default_build.items():
        by_title = {link["title"]: link for link in dashboard["links"]}
        assert by_title["LLM serving"]["type"] == "dashboards" and by_title["LLM serving"]["tags"] == ["llmdash"]
        if name != "fleet":  # the fleet view does not link to itself
            assert by_title["Fleet"]["type"] == "dashboards" and by_title["Fleet"]["tags"] == ["llmdash-fleet"]


@pytest.mark.parametrize("text, message", [
    ("alerts:\n  runbook_url_template: https://wiki.example.com/runbooks\n", "must contain {alertname}"),
    ("alerts:\n  runbook_url_template: docs/runbooks/{alertname}.md\n", "absolute http(s) URL"),
    ("alerts:\n  runbook_url_template: ftp://host/{alertname}\n", "absolute http(s) URL"),
    ("rules:\n  runbook_base_url: docs/runbooks\n",
     "rules.runbook_base_url: no longer supported; use alerts.runbook_url_template"),
])
def test_bad_runbook_settings_are_one_line_errors(tmp_path, text, message):
    with pytest.raises(LlmdashError) as error:
        config_with(tmp_path, text)
    assert error.value.exit_code == EXIT_USAGE and message in str(error.value) and "\n" not in str(error.value)
