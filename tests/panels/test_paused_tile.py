"""The paused-requests tile says which windows it and the page read: it reads the Preemption annotation's
`preemption.window` (5m by default), while LLMServingPreemptionsHigh reads the paused share over `short_window`
(2m), confirmed over `long_window` (3m) (docs/alerts-and-runbooks.md's table)."""

from __future__ import annotations

from dataclasses import replace

from llmdash.config import Config
from llmdash.dashboards.assemble import build_dashboard
from llmdash.engines.catalog import load_engine


def _tile(config) -> str:
    model = build_dashboard(load_engine("tensorrt-llm-serve"), config)   # a paused-requests gauge, no counter
    [tile] = [p for p in model["panels"] if p["type"] == "stat" and p["title"] == "Paused requests"]
    return tile["description"]


def test_the_tile_names_its_own_window_and_the_pages():
    text = _tile(Config())
    assert "within the last 5m, the window the Preemption annotation uses" in text
    assert "the page reads the share of the last 2m in which requests were paused, confirmed over 3m" in text


def test_the_windows_follow_the_config():
    config = Config()
    config = replace(config, preemption=replace(config.preemption, window="10m", short_window="4m",
                                                long_window="6m", alert_for="4m"))
    text = _tile(config)
    assert "within the last 10m" in text and "the last 4m" in text and "confirmed over 6m" in text
