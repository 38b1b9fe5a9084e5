"""`llmdash build`, `llmdash rules` and `llmdash engines`: the files in generated/ and what feeds them."""

from __future__ import annotations

from pathlib import Path

import click

from llmdash import build as builder
from llmdash.config import load_config
from llmdash.engines.catalog import load_all
from llmdash.engines.summary import engine_table


def config_of(ctx: click.Context):
    return load_config((ctx.obj or {}).get("config_path"))


@click.command("build")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=builder.DEFAULT_OUT,
              show_default=True, help="Output directory.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the output directory is stale.")
@click.pass_context
def build_command(ctx: click.Context, out: Path, check: bool) -> None:
    """Build every dashboard and rule file into OUT/dashboards/ and OUT/rules/, and the same as a
    monitoring mixin into OUT/mixin/ (prometheus_alerts.yaml, prometheus_rules.yaml, dashboards_out/)."""
    files = builder.generated_files(config_of(ctx))
    if check:
        builder.check(files, out)
        click.echo(f"{out}/ is up to date ({len(files)} files)")
        return
    changed = builder.write(files, out)
    click.echo(f"wrote {len(changed)} of {len(files)} files under {out}/" +
               "".join(f"\n  {rel}" for rel in changed))


@click.command("rules")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=builder.DEFAULT_OUT,
              show_default=True, help="Output directory.")
@click.pass_context
def rules_command(ctx: click.Context, out: Path) -> None:
    """Write the Prometheus rule files only, to OUT/rules/<engine>.rules.yaml."""
    files = builder.generated_files(config_of(ctx), parts=("rules",))
    changed = builder.write(files, out)
    click.echo(f"wrote {len(changed)} of {len(files)} rule files under {out}/rules/")


@click.command("engines")
def engines_command() -> None:
    """Print a markdown table of the engines: versions covered, and the series that feed throughput,
    latency histograms and the preemption signal."""
    click.echo(engine_table(load_all()))
