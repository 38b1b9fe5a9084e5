"""The `llmdash` command line.

Every user-caused failure is an `LlmdashError`: one line on stderr, its exit code
(0 ok, 1 drift or refusal, 2 usage or config, 3 Grafana or network), no traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dashboards import bench
from dashboards import build as builder
from dashboards.cli_publish import provision_command, publish_command
from dashboards.cli_review import diff_command, layout_command
from dashboards.cli_sim import demo_command, simulate_command
from dashboards.config import load_config
from engines.catalog import ROLES, load_all, load_engine
from engines.errors import LlmdashError


@click.group()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Config file (default: ./llmdash.yaml if present, else built-in defaults).")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """Grafana dashboards and alert rules that catch KV-cache preemption on LLM serving engines."""
    ctx.obj = {"config_path": config_path}


def config_of(ctx: click.Context):
    return load_config(ctx.obj["config_path"])


@cli.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=builder.DEFAULT_OUT,
              show_default=True, help="Output directory.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the output directory is stale.")
@click.pass_context
def build(ctx: click.Context, out: Path, check: bool) -> None:
    """Build every dashboard and rule file into OUT/dashboards/ and OUT/rules/."""
    files = builder.generated_files(config_of(ctx))
    if check:
        builder.check(files, out)
        click.echo(f"{out}/ is up to date ({len(files)} files)")
        return
    changed = builder.write(files, out)
    click.echo(f"wrote {len(changed)} of {len(files)} files under {out}/" +
               "".join(f"\n  {rel}" for rel in changed))


@cli.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=builder.DEFAULT_OUT,
              show_default=True, help="Output directory.")
@click.pass_context
def rules(ctx: click.Context, out: Path) -> None:
    """Write the Prometheus rule files only, to OUT/rules/<engine>.rules.yaml."""
    files = builder.generated_files(config_of(ctx), parts=("rules",))
    changed = builder.write(files, out)
    click.echo(f"wrote {len(changed)} of {len(files)} rule files under {out}/rules/")


@cli.command("bench-detect")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("out/bench-detect.md"),
              show_default=True, help="Where to write the table (markdown).")
@click.option("--engine", "engine_ids", multiple=True, help="Only these engines (default: the config's).")
@click.option("--scenario", "scenario_names", multiple=True, type=click.Choice(bench.SCENARIOS),
              help="Only these scenarios (default: all).")
@click.option("--seed", default=1, show_default=True, help="Simulator seed.")
@click.pass_context
def bench_detect(ctx: click.Context, out: Path, engine_ids, scenario_names, seed: int) -> None:
    """Detection delay and false firings of the alerts vs naive baselines, on simulated scenarios."""
    config = config_of(ctx)
    for engine in engine_ids:
        load_engine(engine)
    engine_ids = tuple(engine_ids) or config.engine_ids
    outcomes = bench.run(engine_ids, config, seed, tuple(scenario_names) or bench.SCENARIOS,
                         progress=lambda message: click.echo(message, err=True))
    text = bench.table(outcomes, engine_ids)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    click.echo(text + f"\nwritten to {out}")


@cli.command()
def engines() -> None:
    """List the engines and which signals each one offers."""
    for name, spec in load_all().items():
        offered = ", ".join(role for role in ROLES if spec.has(role))
        click.echo(f"{name} ({spec.title}, {spec.versions}): {offered}")


cli.add_command(simulate_command)
cli.add_command(demo_command)
cli.add_command(publish_command)
cli.add_command(provision_command)
cli.add_command(diff_command)
cli.add_command(layout_command)


def main() -> None:
    try:
        code = cli.main(standalone_mode=False)
    except LlmdashError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
