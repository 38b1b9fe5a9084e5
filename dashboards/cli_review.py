"""`llmdash diff` and `llmdash layout`: review a dashboard change without reading raw JSON.

Each side of a comparison is what `llmdash build` writes, produced by that tree's own
build: a git revision is extracted with `git archive` into a temporary directory and
built there, so old revisions are compared with the code they shipped with.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import click

import dashboards
from dashboards.diff import BuildOutput, diff_outputs, load_output, render_markdown, render_text
from dashboards.layout import check_picture_path, render_layout
from engines.errors import EXIT_DRIFT, EXIT_OK, LlmdashError

BUILD_TIMEOUT_SECONDS = 600
# Runs the tree's own CLI. The editable install's import hook is dropped first: it would
# otherwise fill any module missing from an old revision with the working tree's copy.
BUILD_COMMAND = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path"
                 " if not getattr(f, '__module__', '').startswith('__editable__')]; "
                 "from dashboards.cli import main; main()")


def source_root() -> Path:
    """The checkout whose code is running (the working tree of `llmdash diff`)."""
    return Path(dashboards.__file__).resolve().parent.parent


def _git(repo: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not binary, check=False)
    except FileNotFoundError:
        raise LlmdashError("git is not installed; comparing revisions needs it") from None


def is_git_checkout(repo: Path) -> bool:
    return _git(repo, "rev-parse", "--is-inside-work-tree").returncode == 0


def resolve_revision(repo: Path, revision: str) -> str:
    """The commit id a revision names, or a one-line usage error."""
    if not is_git_checkout(repo):
        raise LlmdashError(f"unknown git revision {revision!r} ({repo} is not a git checkout)")
    found = None if revision.startswith("-") else _git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if found is None or found.returncode != 0:
        raise LlmdashError(f"unknown git revision {revision!r}")
    return found.stdout.strip()


def extract_revision(repo: Path, commit: str, destination: Path, paths: tuple[str, ...] = ()) -> bool:
    """Unpack the tree of `commit` (or only `paths`) into `destination`; False if `paths` do not exist there."""
    archive = _git(repo, "archive", "--format=tar", commit, *paths, binary=True)
    if archive.returncode != 0:
        if paths and b"did not match" in archive.stderr:
            return False
        raise LlmdashError(f"git archive {commit[:12]} failed: {_last_line(archive.stderr.decode(errors='replace'))}")
    destination.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(destination, filter="data")
    return True


def build_tree(tree: Path, out: Path, label: str, config_path: Path | None = None) -> BuildOutput:
    """Run `llmdash [--config FILE] build --out <out>` with the code in `tree` and read what it wrote."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    config_args = ["--config", str(config_path.resolve())] if config_path else []
    try:
        result = subprocess.run([sys.executable, "-c", BUILD_COMMAND, *config_args, "build", "--out", str(out)],
                                cwd=tree, env=env,
                                capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        raise LlmdashError(f"building {label} took longer than {BUILD_TIMEOUT_SECONDS}s") from None
    if result.returncode != 0:
        reason = _last_line(result.stderr) or _last_line(result.stdout) or f"exit code {result.returncode}"
        reason = reason.removeprefix("error: ")
        raise LlmdashError(f"building {label} failed: {reason}")
    return load_output(out)


def build_revision(repo: Path, revision: str, workdir: Path, config_path: Path | None = None) -> BuildOutput:
    """The build output of `revision`, built once per commit even when both sides name it."""
    commit = resolve_revision(repo, revision)
    tree, out = workdir / f"tree-{commit}", workdir / f"out-{commit}"
    if out.exists():
        return load_output(out)
    extract_revision(repo, commit, tree)
    return build_tree(tree, out, f"revision {revision}", config_path)


def committed_output(repo: Path, workdir: Path) -> tuple[BuildOutput, str]:
    """`generated/` as committed at HEAD (as on disk when not a git checkout)."""
    if not is_git_checkout(repo):
        if not (repo / "generated").is_dir():
            raise LlmdashError(f"llmdash diff needs a checkout of the llmdash repository (no generated/ under {repo})")
        return load_output(repo / "generated"), "generated/ on disk"
    head = resolve_revision(repo, "HEAD")
    extracted = workdir / "committed"
    if not extract_revision(repo, head, extracted, ("generated",)):
        return BuildOutput({}, {}), "generated/ at HEAD (absent)"
    return load_output(extracted / "generated"), "generated/ at HEAD"


def compare(base: str | None, head: str | None, repo: Path, workdir: Path,
            config_path: Path | None = None) -> tuple[dict, str, str]:
    """Changes per dashboard between the two sides `llmdash diff [BASE] [HEAD]` names, with their labels.

    `config_path` (the group's --config) is used by both builds, so only code changes show.
    """
    if base is None:
        old, old_label = committed_output(repo, workdir)
    else:
        old, old_label = build_revision(repo, base, workdir, config_path), _short(base)
    if head is None:
        new = build_tree(repo, workdir / "out-working-tree", "the working tree", config_path)
        new_label = "working tree"
    else:
        new, new_label = build_revision(repo, head, workdir, config_path), _short(head)
    return diff_outputs(old, new), old_label, new_label


def render_report(report: dict, old_label: str, new_label: str, output_format: str) -> str:
    changed = {name: changes for name, changes in report.items() if changes}
    unchanged = [name for name, changes in report.items() if not changes]
    if output_format == "markdown":
        parts = [f"## llmdash diff: `{old_label}` → `{new_label}`\n"]
        parts += [render_markdown(name, changes) for name, changes in changed.items()]
        if unchanged:
            parts.append(f"Unchanged: {', '.join(f'`{n}`' for n in unchanged)}\n")
        if not changed:
            parts.append("No dashboard or rule changes.\n")
        return "\n".join(parts)
    parts = [f"llmdash diff: {old_label} -> {new_label}\n"]
    parts += [render_text(name, changes) for name, changes in changed.items()]
    if unchanged:
        parts.append(f"unchanged: {', '.join(unchanged)}\n")
    if not changed:
        parts.append("no dashboard or rule changes\n")
    return "\n".join(parts)


def _short(revision: str) -> str:
    """`git merge-base` hands over 40-hex ids; 12 are enough to read."""
    is_full_id = len(revision) == 40 and all(c in "0123456789abcdef" for c in revision)
    return revision[:12] if is_full_id else revision


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _config_path(ctx: click.Context) -> Path | None:
    """The `llmdash --config FILE` given to the group, if any."""
    options = ctx.find_object(dict) or {}
    return Path(options["config_path"]) if options.get("config_path") else None


def _fail(error: LlmdashError) -> None:
    click.echo(f"error: {error}", err=True)
    sys.exit(error.exit_code)


@click.command("diff")
@click.argument("base", required=False)
@click.argument("head", required=False)
@click.option("--format", "output_format", type=click.Choice(["text", "markdown"]), default="text",
              show_default=True, help="markdown is ready to paste as a pull-request comment")
@click.pass_context
def diff_command(ctx, base, head, output_format):
    """Show what changed in the dashboards and rule files, panel by panel.

    \b
    llmdash diff             committed generated/ vs a fresh build of the working tree
    llmdash diff BASE        BASE's build vs the working tree's
    llmdash diff BASE HEAD   the builds of two git revisions

    Exit codes: 0 nothing changed, 1 something changed, 2 bad revision or failed build.
    """
    try:
        with tempfile.TemporaryDirectory(prefix="llmdash-diff-") as workdir:
            report, old_label, new_label = compare(base, head, source_root(), Path(workdir), _config_path(ctx))
    except LlmdashError as error:
        _fail(error)
    click.echo(render_report(report, old_label, new_label, output_format), nl=False)
    sys.exit(EXIT_DRIFT if any(report.values()) else EXIT_OK)


@click.command("layout")
@click.argument("engine")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Picture to write, .png or .svg (default out/layout-ENGINE.png)")
@click.option("--base", "base_revision", help="Git revision to draw beside it, changed panels highlighted")
@click.pass_context
def layout_command(ctx, engine, out_path, base_revision):
    """Draw a dashboard's grid (rows, panels, titles, types) of the working tree's build.

    Exit codes: 0 written, 2 unknown dashboard, bad revision, bad --out or failed build.
    """
    try:
        out_path = check_picture_path(out_path or Path("out") / f"layout-{engine}.png")
        root, config_path = source_root(), _config_path(ctx)
        with tempfile.TemporaryDirectory(prefix="llmdash-layout-") as workdir:
            new = build_tree(root, Path(workdir) / "out-working-tree", "the working tree", config_path).dashboards
            old = (build_revision(root, base_revision, Path(workdir), config_path).dashboards
                   if base_revision else None)
        if engine not in new:
            raise LlmdashError(f"unknown dashboard {engine!r} (built: {', '.join(sorted(new))})")
        if old is not None and engine not in old:
            raise LlmdashError(f"dashboard {engine!r} does not exist at {base_revision}")
        picture = render_layout(new[engine], out_path, old[engine] if old else None,
                                new_caption=f"{engine}: working tree",
                                old_caption=f"{engine}: {base_revision}" if base_revision else "")
    except LlmdashError as error:
        _fail(error)
    click.echo(f"wrote {picture.path}")
    if base_revision:
        changed = sorted(picture.highlighted_new | picture.highlighted_old)
        click.echo(f"highlighted {len(changed)} changed panel(s)" + "".join(f"\n  {label}" for label in changed))
