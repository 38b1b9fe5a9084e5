"""The doctor's findings as text (grouped engine -> SLOs, dashboard row -> panel, then rules) or JSON.

Without configured SLOs neither says anything of them: the report is what it was before they existed."""

from __future__ import annotations

import json

from dataclasses import asdict

from llmdash.doctor.diagnose import Check, EngineReport
from llmdash.doctor.slo import SloCheck

KIND_TITLES = {"panel": "dashboard", "annotation": "dashboard", "alert": "rules", "record": "rules"}


def _item(check: Check) -> dict:
    return {"kind": check.kind, "group": check.group, "title": check.title, "ref": check.ref,
            "filled": check.filled, "problems": check.problems}


def to_json(source: str, reports: list[EngineReport]) -> str:
    engines = []
    for report in reports:
        detection = report.detection
        engines.append({
            "engine": detection.spec.id, "title": detection.spec.title,
            "versions": {"since": str(detection.since) if detection.since else None,
                         "until": str(detection.until) if detection.until else None,
                         "text": detection.versions, "catalog": detection.spec.versions},
            "present": detection.present, "missing": detection.missing, "notes": report.notes,
            "empty": len(report.empty), "checks": [_item(c) for c in report.checks],
            **({"slos": [asdict(c) for c in report.slos]} if report.slos else {})})
    return json.dumps({"source": source, "empty": sum(len(r.empty) for r in reports), "engines": engines},
                      indent=2, ensure_ascii=False)


def _grouped(checks: list[Check]) -> dict[tuple[str, str], dict[str, list[Check]]]:
    """(section, group) -> item title -> its checks (a panel's targets), in build order."""
    grouped: dict[tuple[str, str], dict[str, list[Check]]] = {}
    for check in checks:
        name = check.title if check.kind in ("panel", "annotation") else f"{check.kind} {check.title}"
        grouped.setdefault((KIND_TITLES[check.kind], check.group), {}).setdefault(name, []).append(check)
    return grouped


def to_text(source: str, reports: list[EngineReport]) -> str:
    lines = [f"source: {source}"]
    for report in reports:
        detection = report.detection
        spec = detection.spec
        lines.append(f"\n{spec.id} ({spec.title}): {len(detection.present)} of {len(spec.metrics)} catalog metrics "
                     f"present; versions {detection.versions} (catalog covers {spec.versions})")
        lines += [f"  note: {note}" for note in report.notes]
        lines += _slo_lines(report.slos)
        section = None
        for (kind, group), items in _grouped(report.checks).items():
            if kind != section:
                section = kind
                lines.append(f"  {kind} {spec.id}" if kind == "dashboard" else f"  {kind}")
            lines.append(f"    {group}")
            for name, checks in items.items():
                empty = [c for c in checks if not c.filled]
                # a panel with several targets: the ones that stay empty are named by refId
                lines.append(f"      {'EMPTY' if empty else 'ok   '} {name}"
                             + ("" if not empty or len(checks) == 1 else
                                f" ({', '.join(c.ref for c in empty)} of {len(checks)} queries)"))
                for check in empty:
                    lines += [f"            - {problem}" for problem in check.problems]
        lines.append(f"  {spec.id}: {len(report.empty)} of {len(report.checks)} queries will be empty"
                     + (f"; {len(report.failing_slos)} of {len(report.slos)} SLO series cannot count"
                        if report.slos else ""))
    return "\n".join(lines)


def _slo_lines(checks: list[SloCheck]) -> list[str]:
    """An `slo` section: each objective, the series it reads, the bucket or match it needs, and whether
    the series has it (with the catalogued layout of a histogram's bounds)."""
    lines = ["  slo"] if checks else []
    for check in checks:
        target = f" at {check.target}" if check.target else ""
        found = "present" if check.found else "absent"
        layout = f" ({check.layout})" if check.layout else ""
        mark = "MISSING" if check.problems else "ok     " if check.found else "absent "
        lines.append(f"    {mark} {check.objective} ({check.sli}): {check.series}{target} {found}{layout}")
        lines += [f"            - {problem}" for problem in check.problems]
        lines += [f"            note: {check.note}"] if check.note else []
    return lines
