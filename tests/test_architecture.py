"""The code's shape: one llmdash namespace, dependencies pointing one way, docs/architecture.md's map true."""

import ast
import re
import tomllib
from pathlib import Path

from tests.support.paths import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# Lower number = lower layer. A module may import its own layer or any layer below it.
LAYERS = {
    "llmdash.vocabulary": 0,
    "llmdash.redact": 0,
    "llmdash.deadline": 0,
    "llmdash.errors": 0,
    "llmdash.inputs": 0,
    "llmdash.atomic": 0,
    "llmdash.safepath": 0,
    "llmdash.durations": 0,
    "llmdash.engines": 1,
    "llmdash.panels": 2,
    "llmdash.dashboards": 3,
    "llmdash.rules": 3,
    "llmdash.config": 4,
    "llmdash.build": 4,
    "llmdash.docgen": 5,      # describes every layer below the command line
    "llmdash.docblocks": 5,
    "llmdash.docgen_slo": 5,
    "llmdash.delivery": 5,
    "llmdash.review": 5,
    "llmdash.lab": 5,
    "llmdash.doctor": 5,
    "llmdash.cli": 6,
}


def _layer(module: str) -> int:
    for prefix, rank in sorted(LAYERS.items(), key=lambda item: -len(item[0])):
        if module == prefix or module.startswith(prefix + "."):
            return rank
    raise AssertionError(f"{module} belongs to no layer; add it to LAYERS and docs/architecture.md")


def _modules():
    """(module name, file) for every module the package installs."""
    setuptools = PYPROJECT["tool"]["setuptools"]
    for package in setuptools["packages"]:
        mapped = setuptools.get("package-dir", {}).get(package)
        folder = ROOT / (mapped or package.replace(".", "/"))
        for path in sorted(folder.glob("*.py")):
            yield (package if path.stem == "__init__" else f"{package}.{path.stem}"), path


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_everything_installs_under_the_llmdash_namespace():
    packages = PYPROJECT["tool"]["setuptools"]["packages"]
    assert all(p == "llmdash" or p.startswith("llmdash.") for p in packages)
    assert PYPROJECT["project"]["scripts"]["llmdash"].startswith("llmdash.")


def test_no_module_imports_from_a_layer_above_it():
    upward = []
    for module, path in _modules():
        for imported in _imports(path):
            if imported.split(".")[0] in ("engines", "panels", "dashboards", "rules"):
                upward.append(f"{module} imports top-level {imported}")
            elif imported.startswith("llmdash.") and imported in {m for m, _ in _modules()} | set(LAYERS):
                if _layer(imported) > _layer(module):
                    upward.append(f"{module} imports {imported}")
    assert upward == []


def test_architecture_page_layout_section_names_every_package_folder():
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page.split("## How the code is laid out", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^- `([\w/]+)/`", section, flags=re.M))
    setuptools = PYPROJECT["tool"]["setuptools"]
    folders = {setuptools.get("package-dir", {}).get(p) or p.replace(".", "/") for p in setuptools["packages"]}
    assert listed == folders
    assert all((ROOT / folder).is_dir() for folder in listed)


def test_the_vocabulary_imports_nothing_from_the_project():
    """Every layer reads its names from it, so it must sit below all of them."""
    imported = set(_imports(ROOT / "llmdash" / "vocabulary.py"))
    assert {name for name in imported
            if name.split(".")[0] in ("llmdash", "engines", "panels", "dashboards", "rules")} == set()


def test_the_duration_parser_imports_nothing_from_the_project():
    """The config, the rules and the lab all parse durations with it, so it must sit below all of them."""
    imported = set(_imports(ROOT / "llmdash" / "durations.py"))
    assert {name for name in imported
            if name.split(".")[0] in ("llmdash", "engines", "panels", "dashboards", "rules")} == set()


def _reachable(start: str) -> set[str]:
    """Every project module `start` imports, directly or through others (by the import statements' text)."""
    modules = dict(_modules())
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module in seen or module not in modules:
            continue
        seen.add(module)
        todo += [name for name in _imports(modules[module]) if name in modules]
    return seen - {start}


def test_dashboards_never_import_the_rule_generator():
    """A dashboard reads alert identity (names, labels, runbook URLs) from llmdash.rules.identity: importing
    llmdash.rules.generate would let a dashboard build rule files again."""
    dashboards = [module for module, _ in _modules() if module.startswith("llmdash.dashboards.")]
    assert dashboards
    assert [m for m in dashboards if "llmdash.rules.generate" in _reachable(m)] == []
