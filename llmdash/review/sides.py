"""The two sides of `llmdash diff` and `llmdash layout`: which tree, which code, which config.

Review works in the repository it is run in, at the directory it is run from (the project
directory: where `llmdash.yaml` and `generated/` live). A side is one of

- the `generated/` committed at HEAD (or on disk outside git);
- the build of a git revision, extracted with `git archive`;
- the build of the working tree.

Each build uses the config that side has: a revision's committed `llmdash.yaml` (defaults if
none), the working tree's `./llmdash.yaml`; an explicit `--config FILE` applies to both sides,
so only code changes show. In the llmdash source itself (its `pyproject.toml` names the
project `llmdash`) each tree is built with its own code, so old revisions are compared with
the code they shipped with; anywhere else with the installed llmdash, in this process.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from llmdash.errors import LlmdashError
from llmdash.review.compare import BuildOutput, load_output

BUILD_TIMEOUT_SECONDS = 600
CONFIG_FILE = "llmdash.yaml"
# Runs a tree's own CLI. Editable-install import hooks are dropped first: they would otherwise
# fill any module missing from an old revision with the working tree's copy. It runs with -P: the
# project directory it runs in may hold an `llmdash/` folder that is not the installed layout.
OWN_CODE_BUILD = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path"
                  " if not getattr(f, '__module__', '').startswith('__editable__')]; "
                  "from {module} import {function}; sys.argv[0] = 'llmdash'; {function}()")


@dataclass(frozen=True)
class Workspace:
    """Where review runs: the git repository (None outside git) and the project directory in it."""

    project: Path
    repo: Path | None
    prefix: PurePosixPath  # the project directory relative to the repository's top

    def in_tree(self, tree: Path) -> Path:
        """The project directory inside an extracted copy of the repository."""
        return tree.joinpath(*self.prefix.parts)


@dataclass(frozen=True)
class Side:
    output: BuildOutput
    label: str


def workspace(project: Path) -> Workspace:
    project = project.resolve()
    top = _git(project, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        return Workspace(project, None, PurePosixPath("."))
    repo = Path(top.stdout.strip()).resolve()
    return Workspace(project, repo, PurePosixPath(project.relative_to(repo).as_posix()))


def committed(ws: Workspace, workdir: Path) -> Side:
    """`generated/` as committed at HEAD (as on disk when not in a git repository)."""
    if ws.repo is None:
        if not (ws.project / "generated").is_dir():
            raise LlmdashError(f"nothing to compare with: {ws.project} is not in a git repository and has no generated/")
        return Side(load_output(ws.project / "generated"), "generated/ on disk")
    head = resolve_revision(ws, "HEAD")
    extracted = workdir / "committed"
    if not _extract(ws, head, extracted, str(ws.prefix / "generated")):
        return Side(BuildOutput({}, {}), "generated/ at HEAD (absent)")
    return Side(load_output(ws.in_tree(extracted) / "generated"), "generated/ at HEAD")


def revision(ws: Workspace, name: str, workdir: Path, config: Path | None) -> Side:
    """The build of git revision `name`, built once per commit even when both sides name it."""
    commit = resolve_revision(ws, name)
    tree, out = workdir / f"tree-{commit}", workdir / f"out-{commit}"
    if not tree.exists():
        _extract(ws, commit, tree)
    project = ws.in_tree(tree)
    config, config_label = _side_config(project, config, f"{CONFIG_FILE} at {_short(name)}")
    if not out.exists():
        _build(tree, project, out, config, f"revision {name}")
    return Side(load_output(out), f"{_short(name)} (config: {config_label})")


def working_tree(ws: Workspace, workdir: Path, config: Path | None) -> Side:
    """The build of the working tree, with its own `./llmdash.yaml` unless `config` is given."""
    config, config_label = _side_config(ws.project, config, f"./{CONFIG_FILE}")
    out = workdir / "out-working-tree"
    _build(ws.repo or ws.project, ws.project, out, config, "the working tree")
    return Side(load_output(out), f"working tree (config: {config_label})")


def resolve_revision(ws: Workspace, name: str) -> str:
    """The commit id a revision names, or a one-line usage error."""
    if ws.repo is None:
        raise LlmdashError(f"unknown git revision {name!r} ({ws.project} is not in a git repository)")
    found = None if name.startswith("-") else _git(ws.repo, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
    if found is None or found.returncode != 0:
        raise LlmdashError(f"unknown git revision {name!r}")
    return found.stdout.strip()


def _side_config(project: Path, override: Path | None, committed_label: str) -> tuple[Path | None, str]:
    if override is not None:
        return override.resolve(), f"--config {override}"
    if (project / CONFIG_FILE).is_file():
        return project / CONFIG_FILE, committed_label
    return None, "defaults"


def _build(tree: Path, project: Path, out: Path, config: Path | None, label: str) -> None:
    # A build of an old revision takes seconds; say what is happening rather than sit silent.
    print(f"building {label}...", file=sys.stderr, flush=True)
    if _is_llmdash_source(tree):
        _build_with_own_code(tree, project, out, config, label)
    else:
        _build_with_installed_code(out, config, label)


def _is_llmdash_source(tree: Path) -> bool:
    return _pyproject(tree).get("project", {}).get("name") == "llmdash"


def _pyproject(tree: Path) -> dict:
    try:
        return tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _build_with_installed_code(out: Path, config: Path | None, label: str) -> None:
    from llmdash import build as builder
    from llmdash.config import Config, load_config
    try:
        builder.write(builder.generated_files(load_config(config) if config else Config()), out)
    except LlmdashError as exc:
        raise LlmdashError(f"building {label} failed: {exc}") from None


def _build_with_own_code(tree: Path, project: Path, out: Path, config: Path | None, label: str) -> None:
    """Run `llmdash [--config FILE] build --out OUT` with the code in `tree`, laid out as its pyproject installs it."""
    pyproject = _pyproject(tree)
    entry = pyproject.get("project", {}).get("scripts", {}).get("llmdash", "")
    module, _, function = entry.partition(":")
    if not module or not function:
        raise LlmdashError(f"building {label} failed: its pyproject.toml declares no llmdash command")
    with tempfile.TemporaryDirectory(prefix="llmdash-code-") as staging:
        _stage_packages(tree, pyproject.get("tool", {}).get("setuptools", {}), Path(staging))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [staging, os.environ.get("PYTHONPATH")]))}
        config_args = ["--config", str(config)] if config else []
        code = OWN_CODE_BUILD.format(module=module, function=function)
        try:
            result = subprocess.run([sys.executable, "-P", "-c", code, *config_args, "build", "--out", str(out)],
                                    cwd=project if project.is_dir() else tree, env=env, capture_output=True,
                                    text=True, timeout=BUILD_TIMEOUT_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            raise LlmdashError(f"building {label} took longer than {BUILD_TIMEOUT_SECONDS}s") from None
    if result.returncode != 0:
        reason = _last_line(result.stderr) or _last_line(result.stdout) or f"exit code {result.returncode}"
        raise LlmdashError(f"building {label} failed: {reason.removeprefix('error: ')}")


def _stage_packages(tree: Path, setuptools: dict, staging: Path) -> None:
    """Mirror the import layout setuptools would install (`packages` + `package-dir`) with symlinks;
    folders that are not packages (package data such as dashboards/grafana_schema/) come along whole."""
    package_dir = setuptools.get("package-dir", {})
    packages = setuptools.get("packages") or sorted(p.name for p in tree.iterdir() if (p / "__init__.py").is_file())
    for package in packages:
        source = tree / _source_dir(package, package_dir)
        target = staging.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            for entry in source.iterdir():
                is_data_folder = entry.is_dir() and not (entry / "__init__.py").exists()
                if (entry.is_file() or is_data_folder) and not (target / entry.name).exists():
                    (target / entry.name).symlink_to(entry)


def _source_dir(package: str, package_dir: dict[str, str]) -> Path:
    """Where setuptools finds `package`: its own mapping, else its nearest mapped parent's, else the root."""
    parts = package.split(".")
    for cut in range(len(parts), 0, -1):
        mapped = package_dir.get(".".join(parts[:cut]))
        if mapped is not None:
            return Path(mapped, *parts[cut:])
    return Path(package_dir.get("", "."), *parts)


def _extract(ws: Workspace, commit: str, destination: Path, path: str | None = None) -> bool:
    """Unpack the tree of `commit` (or only `path`) into `destination`; False if `path` does not exist there."""
    archive = _git(ws.repo, "archive", "--format=tar", commit, *([path] if path else []), binary=True)
    if archive.returncode != 0:
        if path and b"did not match" in archive.stderr:
            return False
        raise LlmdashError(f"git archive {commit[:12]} failed: {_last_line(archive.stderr.decode(errors='replace'))}")
    destination.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(destination, filter="data")
    return True


def _git(repo: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not binary, check=False)
    except FileNotFoundError:
        raise LlmdashError("git is not installed; comparing revisions needs it") from None


def _short(name: str) -> str:
    """`git merge-base` hands over 40-hex ids; 12 are enough to read."""
    is_full_id = len(name) == 40 and all(c in "0123456789abcdef" for c in name)
    return name[:12] if is_full_id else name


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""
