"""The documentation stays true: generated pages fresh, every config key and engine shown, every page
reachable from the README, every relative link resolving, no citation of a path outside the repository."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import tempfile
import typing
from pathlib import Path

import pytest
import yaml

from llmdash import docgen
from llmdash.config import Config
from llmdash.engines.catalog import load_all
from llmdash.errors import LlmdashError

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_generated_pages_are_what_the_code_writes_now():
    stale = [name for name, text in docgen.render().items() if (ROOT / name).read_text(encoding="utf-8") != text]
    assert stale == [], f"run `.venv/bin/python -m llmdash.docgen` and commit {stale}"


def _model_keys(cls=Config, prefix=""):
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.name != "source":
            yield prefix + field.name
            if dataclasses.is_dataclass(hints[field.name]):
                yield from _model_keys(hints[field.name], f"{prefix}{field.name}.")


def _example_keys(data: dict, prefix=""):
    for key, value in data.items():
        yield prefix + key
        if isinstance(value, dict) and key not in ("selectors", "dashboard_labels", "instance_selector", "rule_labels"):
            yield from _example_keys(value, f"{prefix}{key}.")


def test_every_config_key_is_on_the_configuration_page():
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    example = yaml.safe_load((ROOT / "llmdash.example.yaml").read_text(encoding="utf-8"))
    keys = set(_model_keys()) | set(_example_keys(example))
    assert "divergence.mean_latency_factor" in keys and "thresholds.kv_usage.critical" in keys
    assert sorted(key for key in keys if f"`{key}`" not in page) == []


def test_the_readme_engine_table_is_the_catalogs():
    """One row per catalog, with its title, versions and preemption signal as the catalog says now."""
    readme = README.read_text(encoding="utf-8")
    for spec in load_all().values():
        if spec.has("preemptions"):
            source = spec.signal("preemptions").sources[0]
            signal = f"{source.kind} `{source.series}`"
        else:
            signal = "none: divergence only"
        row = f"| `{spec.id}` | {spec.title} | {spec.versions} | {signal} |"
        assert row in readme.splitlines(), row
    rows = re.findall(r"^\| `([\w-]+)` \|", readme.split("## Engines", 1)[1].split("\n## ", 1)[0], flags=re.M)
    assert sorted(rows) == sorted(load_all())


def test_the_readme_is_short_and_links_every_page():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200
    linked = {(ROOT / target.split("#")[0]).resolve() for target in links(README)}
    unlinked = [str(p.relative_to(ROOT)) for p in pages() if p.parent.name != "runbooks" and p.resolve() not in linked]
    assert unlinked == []


def test_the_alerts_page_links_every_runbook():
    page = DOCS / "alerts-and-runbooks.md"
    linked = {(page.parent / target.split("#")[0]).resolve() for target in links(page)}
    runbooks = sorted((ROOT / "generated" / "runbooks").glob("*.md"))
    assert runbooks and [p.name for p in runbooks if p.resolve() not in linked] == []


@pytest.mark.parametrize("path", [README, ROOT / "CONTRIBUTING.md", *pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files_and_headings_that_exist(path):
    broken = []
    for target in links(path):
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(target)
    assert broken == []


# Citations of notes kept beside the repository, never in it: those paths open nowhere for a reader.
REFERENCE_NOTES = re.compile(r"\b(?:grafana|engines|ecosystem|anchors)\.md\s*(?:§|section)"
                             r"|(?<!\])\((?:grafana|engines)\.md\)|\bengines\.md \d"
                             r"|reference/engines\.md|docs/research/")
CLIMBING = re.compile(r"(?<![\w./])(?:\.\./)+[\w.-]+(?:/[\w.-]+)*")


def outside_paths(path: Path, text: str) -> list[str]:
    """What `text` (the file at `path`) names outside the repository: a `../` path that climbs out of it from the
    file, or, in Markdown, one that names nothing in it; a path into the directory this checkout sits in
    (another clone sits elsewhere; the system's temporary directory excepted, where scratch files go); a
    citation of the reference notes."""
    found = [m.group(0) for m in REFERENCE_NOTES.finditer(text)]
    for match in CLIMBING.finditer(text):
        target = (path.parent / match.group(0)).resolve()
        if not target.is_relative_to(ROOT) or (path.suffix == ".md" and not target.exists()):
            found.append(match.group(0))
    beside = ROOT.parent
    if beside not in (Path(beside.anchor), Path(tempfile.gettempdir()).resolve()):
        found += re.findall(re.escape(f"{beside}{os.sep}") + r"\S*", text)
    return found


def test_no_file_cites_a_path_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    me = Path(__file__).resolve()    # it spells out what it looks for
    found = []
    for name in tracked:
        path = ROOT / name
        if path.resolve() == me or not path.is_file() or path.suffix in (".png", ".json"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{name}: {hit}" for hit in outside_paths(path, text)]
    assert found == []


def test_a_path_outside_the_repository_is_found():
    """The check can fail: a note beside the checkout, climbed to or named absolutely, and a reference citation."""
    assert outside_paths(ROOT / "README.md", "see ../notes/anchors/x.json") == ["../notes/anchors/x.json"]
    assert outside_paths(DOCS / "x.md", "see ../notes/a.md") == ["../notes/a.md"]
    assert outside_paths(DOCS / "x.md", "[runbooks](../generated/runbooks/) and ../README.md") == []
    assert outside_paths(ROOT / "tests" / "x.py", "kustomize ../base") == []
    assert outside_paths(ROOT / "x.py", "grafana.md § 3") == ["grafana.md §"]
    if ROOT.parent not in (Path("/"), Path(tempfile.gettempdir()).resolve()):
        note = f"{ROOT.parent}{os.sep}notes/y.md"
        assert outside_paths(ROOT / "x.py", f"open {note}") == [note]


def test_an_engine_without_sources_is_refused(tmp_path):
    specs = load_all()
    notes = yaml.safe_load((DOCS / "engine-notes.yaml").read_text(encoding="utf-8"))
    del notes["vllm"]
    path = tmp_path / "notes.yaml"
    path.write_text(yaml.safe_dump(notes))
    with pytest.raises(LlmdashError, match=r"missing \['vllm'\]"):
        docgen.read_notes(specs, path)
