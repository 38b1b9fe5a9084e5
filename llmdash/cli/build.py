"""`llmdash build`, `llmdash rules` and `llmdash engines`: the files in generated/ and what feeds them."""

from __future__ import annotations

from pathlib import Path

import click

from llmdash import build as builder
from llmdash.config import load_config
from llmdash.engines.catalog import load_all
from llmdash.engines.summary import engine_table


def ownership(directory: str) -> str:
    """The rule every command writing a directory keeps, for its --help."""
    return (f"llmdash replaces the files it writes and removes a file only when {directory}/.llmdash-manifest.json "
            "says an earlier run wrote it and it is unchanged since, leaving every other file alone and refusing "
            f"a symlinked directory inside {directory}.")


def config_of(ctx: click.Context):
    return load_config((ctx.obj or {}).get("config_path"))


def directories(parts: tuple[str, ...] = builder.PARTS) -> str:
    """The directories a build of `parts` writes under OUT, as the build itself lists them (`build.PART_SCOPES`)."""
    return ", ".join(f"OUT/{directory}/" for directory in builder.scopes(parts))


@click.command("build", help=f"""Build every dashboard, rule file and the rest into {directories()}: the
    dashboards (classic and schema v2), the rule files, the Alertmanager inhibit rules and example
    configuration, the runbooks, the same as a monitoring mixin (prometheus_alerts.yaml, prometheus_rules.yaml,
    dashboards_out/) and the mtail programs.

    {ownership("OUT")}""")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=builder.DEFAULT_OUT,
              show_default=True, help="Output directory.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the output directory is stale.")
@click.pass_context
def build_command(ctx: click.Context, out: Path, check: bool) -> None:
    files = builder.generated_files(config_of(ctx))
    if check:
        builder.check(files, out)
        click.echo(f"{out}/ is up to date ({len(files)} files)")
        return
    for line in builder.write(files, out).lines():
        click.echo(line)


@click.command("rules", help=f"""Write the rules part only, into {directories(("rules",))}: the Prometheus rule
    files (OUT/rules/<engine>.rules.yaml), the Alertmanager inhibit rules and example configuration, and the
    runbooks.

    {ownership("OUT")}""")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=builder.DEFAULT_OUT,
              show_default=True, help="Output directory.")
@click.pass_context
def rules_command(ctx: click.Context, out: Path) -> None:
    files = builder.generated_files(config_of(ctx), parts=("rules",))
    for line in builder.write(files, out, parts=("rules",)).lines("rule files"):
        click.echo(line)


@click.command("engines")
def engines_command() -> None:
    """Print a markdown table of the engines: versions covered, and the series that feed throughput,
    latency histograms and the preemption signal."""
    click.echo(engine_table(load_all()))
