"""The two sides of `llmdash diff` and `llmdash layout`: which tree, which code, which config.

Review works in the repository it is run in, at the directory it is run from (the project
directory: where `llmdash.yaml` and `generated/` live). A side is one of

- the `generated/` committed at HEAD (or on disk outside git);
- the build of a git revision;
- the build of the working tree.

Each build uses the config that side has: a revision's committed `llmdash.yaml` (defaults if
none), the working tree's `./llmdash.yaml`; an explicit `--config FILE` applies to both sides,
so only code changes show.

A revision is whatever a branch author committed, so by default its content is only read, never
run: every side is built by the installed llmdash, in this process, from that side's
`llmdash.yaml` and, in the llmdash source itself (its `pyproject.toml` names the project
`llmdash`), from that side's `engines/*.yaml` catalogs. Only those files are read out of a
revision, each refused above its size limit before it is read, so no file of a revision is ever
held whole in memory on trust. Building each side with its own code (old revisions with the code
they shipped with) is the user's explicit choice, `--build-with-revision-code`, never the
revision's: that code runs in a child process whose environment is built from an allow-list
(`revision_code_environment`): PATH, LANG, LC_*, TZ and TMPDIR from the reviewer's, a fresh empty HOME
and XDG directories in a temporary directory, and nothing else but the variables the reviewer names
with `--pass-env NAME`. So no token, password, cloud or CI credential variable reaches it, and no
~/.netrc, ~/.aws/credentials or ~/.config/gh/hosts.yml is found through HOME. It is no sandbox: the code
runs as the reviewer, and a file it names by its absolute path it can read.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterator

from llmdash.engines.catalog import CATALOG_DIR_ENV
from llmdash import safepath
from llmdash.errors import LlmdashError
from llmdash.inputs import MAX_BYTES, read_text
from llmdash.redact import safe_line
from llmdash.review.compare import MAX_OUTPUT_BYTES, BuildOutput, load_output

BUILD_TIMEOUT_SECONDS = 600
CONFIG_FILE = "llmdash.yaml"
CATALOGS = "engines"
# Runs a tree's own CLI, named by its pyproject's `module:function` entry point, which arrives as
# argv[1:3] (data, never pasted into this source). Editable-install import hooks are dropped first:
# they would otherwise fill any module missing from an old revision with the working tree's copy.
# It runs with -P: the project directory it runs in may hold an `llmdash/` folder that is not the
# installed layout.
OWN_CODE_BUILD = ("import importlib, sys; sys.meta_path[:] = [f for f in sys.meta_path"
                  " if not getattr(f, '__module__', '').startswith('__editable__')]; "
                  "module, function = sys.argv[1:3]; sys.argv[1:3] = []; sys.argv[0] = 'llmdash'; "
                  "getattr(importlib.import_module(module), function)()")
ENTRY_POINT = re.compile(r"(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<function>[A-Za-z_]\w*)")
# The reviewer's variables a revision's code sees (besides those named with --pass-env): what finds
# programs, speaks the reviewer's language and time zone, and where temporary files go.
PASSED_VARIABLES = ("PATH", "LANG", "LANGUAGE", "TZ", "TMPDIR")
PASSED_PREFIX = "LC_"
# Pointed at empty folders of a fresh temporary HOME, so no configuration or credential file is found there.
XDG_DIRECTORIES = {"XDG_CONFIG_HOME": ".config", "XDG_CACHE_HOME": ".cache", "XDG_DATA_HOME": ".local/share",
                   "XDG_STATE_HOME": ".local/state", "XDG_RUNTIME_DIR": "run"}


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
            raise LlmdashError(f"nothing to compare with: {ws.project} is not in a git repository "
                               "and has no generated/")
        return Side(load_output(ws.project / "generated"), "generated/ on disk")
    head = resolve_revision(ws, "HEAD")
    extracted, generated = workdir / "committed", ws.prefix / "generated"
    found = [_copy_files(ws, head, "HEAD", extracted, generated / part, suffix, MAX_OUTPUT_BYTES, "build output")
             for part, suffix in (("dashboards", ".json"), ("dashboards-v2", ".json"), ("rules", ".rules.yaml"))]
    if not any(found):
        return Side(BuildOutput({}, {}), "generated/ at HEAD (absent)")
    return Side(load_output(ws.in_tree(extracted) / "generated", f"HEAD:{generated}"), "generated/ at HEAD")


def revision(ws: Workspace, name: str, workdir: Path, config: Path | None, own_code: bool = False,
             pass_env: tuple[str, ...] = ()) -> Side:
    """The build of git revision `name`, built once per commit even when both sides name it."""
    commit = resolve_revision(ws, name)
    tree, out = workdir / f"tree-{commit}", workdir / f"out-{commit}"
    if not tree.exists():
        (_extract_all if own_code else _extract_data)(ws, commit, name, tree)
    project = ws.in_tree(tree)
    config, config_label = _side_config(project, config, f"{CONFIG_FILE} at {_short(name)}")
    if not out.exists():
        _build(tree, project, out, config, f"revision {name}", own_code, pass_env)
    return Side(load_output(out), f"{_short(name)} (config: {config_label})")


def working_tree(ws: Workspace, workdir: Path, config: Path | None, own_code: bool = False,
                 pass_env: tuple[str, ...] = ()) -> Side:
    """The build of the working tree, with its own `./llmdash.yaml` unless `config` is given."""
    config, config_label = _side_config(ws.project, config, f"./{CONFIG_FILE}")
    out = workdir / "out-working-tree"
    _build(ws.repo or ws.project, ws.project, out, config, "the working tree", own_code, pass_env)
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


def _build(tree: Path, project: Path, out: Path, config: Path | None, label: str, own_code: bool,
           pass_env: tuple[str, ...]) -> None:
    # A build of an old revision takes seconds; say what is happening rather than sit silent.
    print(f"building {label}...", file=sys.stderr, flush=True)
    if own_code:
        _build_with_own_code(tree, project, out, config, label, pass_env)
    else:
        _build_with_installed_code(tree, out, config, label)


def _is_llmdash_source(tree: Path) -> bool:
    return _pyproject(tree).get("project", {}).get("name") == "llmdash"


def _pyproject(tree: Path) -> dict:
    try:
        return tomllib.loads(read_text(tree / "pyproject.toml", "pyproject"))
    except (LlmdashError, tomllib.TOMLDecodeError):
        return {}


def _build_with_installed_code(tree: Path, out: Path, config: Path | None, label: str) -> None:
    """Build with this llmdash, from the side's config and, in the llmdash source, the side's catalogs."""
    from llmdash import build as builder
    from llmdash.config import Config, load_config
    own_catalogs = _is_llmdash_source(tree)
    hint = " (built with the installed llmdash; --build-with-revision-code builds it with its own)" \
        if own_catalogs else ""
    if own_catalogs and not (tree / CATALOGS).is_dir():
        raise LlmdashError(f"building {label} failed: it has no {CATALOGS}/ catalogs{hint}")
    try:
        with _catalogs(tree / CATALOGS if own_catalogs else None):
            builder.write(builder.generated_files(load_config(config) if config else Config()), out)
    except LlmdashError as exc:
        raise LlmdashError(f"building {label} failed: {exc}{hint}") from None


@contextlib.contextmanager
def _catalogs(directory: Path | None) -> Iterator[None]:
    """Point the installed llmdash at `directory`'s catalogs for one build (None: its usual ones).
    The catalogs are found through LLMDASH_CATALOG_DIR; the CLI builds one side at a time."""
    if directory is None:
        yield
        return
    saved = os.environ.get(CATALOG_DIR_ENV)
    os.environ[CATALOG_DIR_ENV] = str(directory)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(CATALOG_DIR_ENV, None)
        else:
            os.environ[CATALOG_DIR_ENV] = saved


def _build_with_own_code(tree: Path, project: Path, out: Path, config: Path | None, label: str,
                         pass_env: tuple[str, ...]) -> None:
    """Run `llmdash [--config FILE] build --out OUT` with the code in `tree`, laid out as its pyproject installs it."""
    pyproject = _pyproject(tree)
    entry = ENTRY_POINT.fullmatch(str(pyproject.get("project", {}).get("scripts", {}).get("llmdash", "")).strip())
    if entry is None:
        raise LlmdashError(f"building {label} failed: its pyproject.toml declares no llmdash command")
    with tempfile.TemporaryDirectory(prefix="llmdash-code-") as staging, \
            tempfile.TemporaryDirectory(prefix="llmdash-home-") as home:
        _stage_packages(tree, pyproject.get("tool", {}).get("setuptools", {}), Path(staging))
        env = revision_code_environment(os.environ, Path(home), pass_env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [staging, env.get("PYTHONPATH")]))
        config_args = ["--config", str(config)] if config else []
        command = [sys.executable, "-P", "-c", OWN_CODE_BUILD, entry["module"], entry["function"], *config_args,
                   "build", "--out", str(out)]
        try:
            result = subprocess.run(command, cwd=project if project.is_dir() else tree, env=env, capture_output=True,
                                    text=True, errors="replace", timeout=BUILD_TIMEOUT_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            raise LlmdashError(f"building {label} took longer than {BUILD_TIMEOUT_SECONDS}s") from None
    if result.returncode != 0:
        reason = _last_line(result.stderr) or _last_line(result.stdout) or f"exit code {result.returncode}"
        raise LlmdashError(f"building {label} failed: {reason.removeprefix('error: ')}")


def revision_code_environment(environ, home: Path, pass_env: tuple[str, ...] = ()) -> dict[str, str]:
    """The whole environment a revision's code runs with: the allow-listed variables of `environ`, the
    ones the reviewer named (`--pass-env`), and HOME and the XDG directories inside the empty `home`."""
    env = {name: value for name, value in environ.items()
           if name in PASSED_VARIABLES or name.startswith(PASSED_PREFIX) or name in pass_env}
    env["HOME"] = str(home)
    for name, folder in XDG_DIRECTORIES.items():
        (home / folder).mkdir(parents=True, exist_ok=True, mode=0o700)
        env[name] = str(home / folder)
    return env


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


def _extract_data(ws: Workspace, commit: str, name: str, destination: Path) -> None:
    """Copy out of `commit` only what the installed llmdash reads: the project's config and, in the
    llmdash source, the catalogs."""
    destination.mkdir(parents=True)
    _copy_files(ws, commit, name, destination, ws.prefix / CONFIG_FILE, "", MAX_BYTES, "config")
    _copy_files(ws, commit, name, destination, PurePosixPath("pyproject.toml"), "", MAX_BYTES, "pyproject")
    if _is_llmdash_source(destination):
        _copy_files(ws, commit, name, destination, PurePosixPath(CATALOGS), ".yaml", MAX_BYTES, "catalog")


def _copy_files(ws: Workspace, commit: str, name: str, destination: Path, path: PurePosixPath, suffix: str,
                limit: int, what: str) -> bool:
    """Write the file `path` of `commit` (with a `suffix`: the files ending so in folder `path`) under
    `destination`, each refused, before it is read, when above `limit` bytes or not a plain file.
    False when `path` is not in `commit`."""
    spec = f"{path}/" if suffix else str(path)
    listing = _git(ws.repo, "ls-tree", "-z", "-l", "--full-tree", commit, "--", spec)
    if listing.returncode != 0:
        raise LlmdashError(f"git ls-tree {commit[:12]} failed: {_last_line(listing.stderr)}")
    found = False
    for entry in filter(None, listing.stdout.split("\0")):
        meta, _, file = entry.partition("\t")
        mode, kind, blob, size = meta.split()
        if not file.endswith(suffix) or (suffix and kind == "tree"):
            continue
        found = True
        shown = f"{_short(name)}:{file}"
        # A name git hands over is the branch author's: checked before anything about it is used.
        target = safepath.inside(destination, file, f"{_short(name)}: git entry")
        if not PurePosixPath(file).is_relative_to(path):
            raise LlmdashError(f"{_short(name)}: git entry {safepath.shown(file)} is not under {path}/")
        if kind != "blob" or mode not in ("100644", "100755"):
            raise LlmdashError(f"{safe_line(shown)}: {what} is not a plain file (git mode {mode})")
        if int(size) > limit:
            raise LlmdashError(f"{safe_line(shown)}: {what} is {size} bytes, more than the {limit} allowed")
        content = _git(ws.repo, "cat-file", "blob", blob, binary=True)
        if content.returncode != 0:
            raise LlmdashError(f"git cat-file {blob[:12]} failed")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(target, "xb") as handle:  # a fresh file in the private work directory, never one that exists
                handle.write(content.stdout)
        except OSError as exc:  # a tree listing one name twice, or a name the file system refuses
            raise LlmdashError(f"{safe_line(shown)}: cannot extract {what} ({exc.strerror or exc})") from None
    return found


def _extract_all(ws: Workspace, commit: str, name: str, destination: Path) -> None:
    """Unpack the whole tree of `commit`, streamed from `git archive` (never held in memory), refusing
    links that point outside it."""
    destination.mkdir(parents=True)
    try:
        archive = subprocess.Popen(["git", "-C", str(ws.repo), "archive", "--format=tar", commit],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise LlmdashError("git is not installed; comparing revisions needs it") from None
    with archive:
        try:
            with tarfile.open(fileobj=archive.stdout, mode="r|") as tar:
                tar.extractall(destination, filter="data")
            while archive.stdout.read(1 << 16):  # the archive's end padding, so git exits cleanly
                pass
        except (tarfile.TarError, OSError) as exc:
            archive.kill()
            raise LlmdashError(f"cannot extract revision {name}: {safe_line(exc)}") from None
        finally:
            archive.stdout.close()
        failure = archive.stderr.read().decode(errors="replace")
    if archive.wait() != 0:
        raise LlmdashError(f"git archive {commit[:12]} failed: {_last_line(failure)}")


def _git(repo: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(repo), "--literal-pathspecs", *args], capture_output=True,
                              text=not binary, errors=None if binary else "replace", check=False)
    except FileNotFoundError:
        raise LlmdashError("git is not installed; comparing revisions needs it") from None


def _short(name: str) -> str:
    """`git merge-base` hands over 40-hex ids; 12 are enough to read."""
    is_full_id = len(name) == 40 and all(c in "0123456789abcdef" for c in name)
    return name[:12] if is_full_id else name


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""
