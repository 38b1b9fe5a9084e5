"""`llmdash diff` and `llmdash layout`: review a dashboard change without reading raw JSON.

Both work in the repository and directory they are run from; `llmdash.review.sides` says
which tree, code and config each side is built with.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click

from llmdash.errors import EXIT_DRIFT, EXIT_OK, LlmdashError
from llmdash.redact import error_line, escape_controls
from llmdash.review import sides
from llmdash.review.compare import V2_SUFFIX, diff_outputs
from llmdash.review.render import render_markdown, render_text


# The one way to run a revision's code; a revision's own content never turns it on.
REVISION_CODE_HELP = ("Build each side with its own code (as its pyproject.toml installs it), not the installed "
                      "llmdash; it sees only PATH, LANG, LC_*, TZ, TMPDIR, an empty temporary HOME and XDG "
                      "directories, and the variables named with --pass-env")
PASS_ENV_HELP = ("With --build-with-revision-code: also hand the revision's code this environment variable "
                 "(repeatable)")


def _checked_pass_env(own_code: bool, pass_env: tuple[str, ...]) -> tuple[str, ...]:
    if pass_env and not own_code:
        raise LlmdashError("--pass-env only applies with --build-with-revision-code")
    return pass_env


def compare(base: str | None, head: str | None, project: Path, workdir: Path,
            config_path: Path | None = None, own_code: bool = False,
            pass_env: tuple[str, ...] = ()) -> tuple[dict, str, str]:
    """Changes per dashboard between the two sides `llmdash diff [BASE] [HEAD]` names, with their labels."""
    ws = sides.workspace(project)
    old = sides.committed(ws, workdir) if base is None \
        else sides.revision(ws, base, workdir, config_path, own_code, pass_env)
    new = sides.working_tree(ws, workdir, config_path, own_code, pass_env) if head is None \
        else sides.revision(ws, head, workdir, config_path, own_code, pass_env)
    return diff_outputs(old.output, new.output), old.label, new.label


def render_report(report: dict, old_label: str, new_label: str, output_format: str) -> str:
    """The whole report; names from the revisions (file stems) are shown with control characters escaped."""
    changed = {name: changes for name, changes in report.items() if changes}
    unchanged = [escape_controls(name) for name, changes in report.items() if not changes]
    old_label, new_label = escape_controls(old_label), escape_controls(new_label)
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


def _project_directory() -> Path:
    """The directory review runs in; one line when it was deleted under the shell."""
    try:
        return Path.cwd()
    except OSError:
        raise LlmdashError("the current directory no longer exists; cd into the project again") from None


def _config_path(ctx: click.Context) -> Path | None:
    """The `llmdash --config FILE` given to the group, if any."""
    options = ctx.find_object(dict) or {}
    return Path(options["config_path"]) if options.get("config_path") else None


def _fail(error: LlmdashError) -> None:
    click.echo(error_line(error), err=True)
    sys.exit(error.exit_code)


@click.command("diff")
@click.argument("base", required=False)
@click.argument("head", required=False)
@click.option("--format", "output_format", type=click.Choice(["text", "markdown"]), default="text",
              show_default=True, help="markdown is ready to paste as a pull-request comment")
@click.option("--build-with-revision-code", "own_code", is_flag=True, help=REVISION_CODE_HELP)
@click.option("--pass-env", "pass_env", multiple=True, metavar="NAME", help=PASS_ENV_HELP)
@click.pass_context
def diff_command(ctx, base, head, output_format, own_code, pass_env):
    """Show what changed in the dashboards and rule files, panel by panel.

    \b
    llmdash diff             committed generated/ vs a fresh build of the working tree
    llmdash diff BASE        BASE's build vs the working tree's
    llmdash diff BASE HEAD   the builds of two git revisions

    Runs in the repository and directory you are in. Each side is built by the installed
    llmdash with its own llmdash.yaml (defaults if none) and, in the llmdash source, its own
    engines/ catalogs; --config FILE builds both sides with FILE. A revision's code is never
    run unless you pass --build-with-revision-code.

    Exit codes: 0 nothing changed, 1 something changed, 2 bad revision or failed build.
    """
    try:
        with tempfile.TemporaryDirectory(prefix="llmdash-diff-") as workdir:
            report, old_label, new_label = compare(base, head, _project_directory(), Path(workdir),
                                                   _config_path(ctx), own_code, _checked_pass_env(own_code, pass_env))
    except LlmdashError as error:
        _fail(error)
    click.echo(render_report(report, old_label, new_label, output_format), nl=False)
    sys.exit(EXIT_DRIFT if any(report.values()) else EXIT_OK)


@click.command("layout")
@click.argument("engine")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Picture to write, .png or .svg (default out/layout-ENGINE.png)")
@click.option("--base", "base_revision", help="Git revision to draw beside it, changed panels highlighted")
@click.option("--build-with-revision-code", "own_code", is_flag=True, help=REVISION_CODE_HELP)
@click.option("--pass-env", "pass_env", multiple=True, metavar="NAME", help=PASS_ENV_HELP)
@click.pass_context
def layout_command(ctx, engine, out_path, base_revision, own_code, pass_env):
    """Draw a dashboard's grid (rows, panels, titles, types) of the working tree's build.

    Exit codes: 0 written, 2 unknown dashboard, bad revision, bad --out or failed build.
    """
    from llmdash.review.layout import check_picture_path, render_layout  # draws: matplotlib loads only here
    try:
        ws, config_path = sides.workspace(_project_directory()), _config_path(ctx)
        pass_env = _checked_pass_env(own_code, pass_env)
        out_path = check_picture_path(out_path or Path("out") / f"layout-{engine}.png")
        with tempfile.TemporaryDirectory(prefix="llmdash-layout-") as workdir:
            new = sides.working_tree(ws, Path(workdir), config_path, own_code, pass_env).output.dashboards
            old = sides.revision(ws, base_revision, Path(workdir), config_path, own_code,
                                 pass_env).output.dashboards \
                if base_revision else None
        # The pictures are drawn from the classic JSON only; its v2 twin has the same grid, row by row.
        new = {name: model for name, model in new.items() if not name.endswith(V2_SUFFIX)}
        if engine not in new:
            raise LlmdashError(f"unknown dashboard {engine!r} (built: {escape_controls(', '.join(sorted(new)))})")
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
        click.echo(f"highlighted {len(changed)} changed panel(s)"
                   + "".join(f"\n  {escape_controls(label)}" for label in changed))
