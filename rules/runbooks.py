"""Runbooks: one Markdown page per alert, written as `runbooks/<alertname>.md` beside the rule files.

The texts live in `rules/runbook_texts/<alert key>.md` (the `vocabulary.Alert` member's name, lowercased), with
`${ALERT_KEY}` where an alert is named, `${PANEL_KEY}` where a panel is, and `${HEADLINE}` for the
headline quantile, so renaming an alert or a panel or changing the quantile in the vocabulary renames the
page, its links and every mention with no other edit.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from llmdash.vocabulary import HEADLINE, PANEL_TITLES, SLO_ALERTS, Alert

TEXTS = Path(__file__).resolve().parent / "runbook_texts"


def runbook_files(config=None) -> dict[str, str]:
    """`<alertname>.md` -> the page's text, for every alert llmdash can raise under `config` (the SLO burn-rate
    alerts only where `slo.objectives` are configured, so a build without objectives writes no page for them)."""
    with_slo = config is not None and bool(config.slo.objectives)
    names = ({alert.name: alert.value for alert in Alert} | {"HEADLINE": HEADLINE}
             | {f"PANEL_{panel.name}": title for panel, title in PANEL_TITLES.items()})
    return {f"{alert}.md": Template((TEXTS / f"{alert.name.lower()}.md").read_text(encoding="utf-8")).substitute(names)
            for alert in Alert if with_slo or alert not in SLO_ALERTS}
