"""The change list of `llmdash.review.compare` as a reviewer reads it: terminal text or a PR comment.

Changes are grouped under the panel, variable or rule they belong to; PromQL pairs are
shown as `- old` / `+ new` lines and long texts as a word diff, so every line says which
side is which.
"""

from __future__ import annotations

import difflib

from llmdash.redact import escape_controls
from llmdash.review.compare import Change, split_where


def _grouped(changes: list[Change]) -> dict[str, list[tuple[str, Change]]]:
    groups: dict[str, list[tuple[str, Change]]] = {}
    for change in changes:
        header, detail = split_where(change.where)
        groups.setdefault(header, []).append((detail, change))
    return groups


def _count(changes: list[Change]) -> str:
    return "no changes" if not changes else f"{len(changes)} change{'s' if len(changes) != 1 else ''}"


def _label(kind: str, detail: str) -> str:
    return f"{kind} [{detail}]" if detail else kind


LONG_TEXT = 80          # characters: a longer text value is shown as a word diff, not as two paragraphs
WORD_DIFF_KEY = "word diff: [-old-] {+new+}"
WORD_CONTEXT = 5        # unchanged words kept on each side of a change


def _is_long(change: Change) -> bool:
    """A text change (description, summary, ...) too long to read as two whole values side by side."""
    if change.before is None or change.after is None:
        return False
    return max(len(change.before), len(change.after)) > LONG_TEXT or "\n" in change.before + change.after


def word_diff(before: str, after: str, context: int = WORD_CONTEXT) -> list[str]:
    """One line per changed stretch of words, `[-removed-]{+added+}` inside a few unchanged words;
    "…" marks what was left out."""
    old, new = before.split(), after.split()
    hunks = []
    for group in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_grouped_opcodes(context):
        parts = ["…"] if group[0][1] > 0 else []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                parts.append(" ".join(old[i1:i2]))
                continue
            if i2 > i1:
                parts.append("[-" + " ".join(old[i1:i2]) + "-]")
            if j2 > j1:
                parts.append("{+" + " ".join(new[j1:j2]) + "+}")
        if group[-1][2] < len(old):
            parts.append("…")
        hunks.append(" ".join(parts))
    return hunks or ["(whitespace only)"]


def _sides(change: Change) -> str:
    """Which side a value shown on one line is from, unless the kind already says it."""
    if change.kind.endswith(("-added", "-removed")):
        return ""
    if change.before is None:
        return " (added)"
    if change.after is None:
        return " (removed)"
    return " (old -> new)"


def _values(change: Change, show) -> str:
    if change.before is None:
        return show(_absent(change.after))   # both absent: a dashboard without a title added or removed
    if change.after is None:
        return show(change.before)
    return f"{show(change.before)} -> {show(change.after)}"


def render_text(name: str, changes: list[Change]) -> str:
    """Terminal report: one heading per panel/variable/rule, expressions as -/+ line pairs."""
    lines = [f"{name}: {_count(changes)}"]
    for header, group in _grouped(changes).items():
        lines.append(f"  {header}")
        for detail, change in group:
            label = _label(change.kind, detail)
            if change.kind == "expr":
                lines.append(f"    {label} (- old, + new):")
                lines.append(f"      - {_absent(change.before)}")
                lines.append(f"      + {_absent(change.after)}")
                lines += _caret("        ", change)
            elif _is_long(change):
                lines.append(f"    {label} ({WORD_DIFF_KEY}):")
                lines += [f"      {hunk}" for hunk in word_diff(change.before, change.after)]
            else:
                lines.append(f"    {label}{_sides(change)}: {_values(change, str)}")
    return _escaped("\n".join(lines) + "\n")


def render_markdown(name: str, changes: list[Change]) -> str:
    """PR-comment report: a heading per dashboard, bold labels, PromQL pairs in ```diff blocks."""
    lines = [f"### `{name}`: {_count(changes)}", ""]
    for header, group in _grouped(changes).items():
        lines += [f"**{_escape_md(header)}**", ""]
        for detail, change in group:
            label = _escape_md(_label(change.kind, detail))
            if change.kind == "expr":
                fence = _fence(change.before, change.after)
                lines += [f"- {label} (- old, + new):", "", f"  {fence}diff", f"  - {_absent(change.before)}",
                          f"  + {_absent(change.after)}", *_caret("    ", change), f"  {fence}"]
            elif _is_long(change):
                lines.append(f"- {label} ({_escape_md(WORD_DIFF_KEY)}):")
                lines += [f"  - {_code(hunk)}" for hunk in word_diff(change.before, change.after)]
            else:
                lines.append(f"- {label}{_sides(change).replace(' -> ', ' → ')}: "
                             f"{_values(change, _code).replace(' -> ', ' → ')}")
        lines.append("")
    return _escaped("\n".join(lines).rstrip("\n") + "\n")


def _escaped(report: str) -> str:
    """`report` with every control and escape character but its line breaks shown escaped (`llmdash.redact`):
    titles and expressions come from revisions and live servers, never trusted with a terminal."""
    return "\n".join(escape_controls(line) for line in report.split("\n"))


def _caret(indent: str, change: Change) -> list[str]:
    """A `^` under the first differing character of a long one-line expression pair."""
    before, after = change.before, change.after
    if before is None or after is None or "\n" in before + after or min(len(before), len(after)) < 40:
        return []
    column = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
    return [f"{indent}{' ' * column}^"]


def _absent(value: str | None) -> str:
    return "(none)" if value is None else value


def _escape_md(text: str) -> str:
    for char in "\\*_`[]<>|":
        text = text.replace(char, "\\" + char)
    return text


def _code(text: str) -> str:
    """Inline code that survives backticks inside PromQL raw strings."""
    ticks = "`"
    while ticks in text:
        ticks += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence(*texts: str | None) -> str:
    fence = "```"
    while any(t and fence in t for t in texts):
        fence += "`"
    return fence
