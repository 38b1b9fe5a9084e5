"""The `llmdash` command line: a thin group whose commands load only when run.

Every user-caused failure is an `LlmdashError` or a click usage error: one line on stderr,
its exit code (0 ok, 1 drift or refusal, 2 usage or config, 3 Grafana or network), no traceback.
`llmdash --help` imports no command module, so it stays fast whatever the commands need.
"""

from __future__ import annotations

import importlib
import sys

import click

from llmdash.errors import EXIT_USAGE, LlmdashError
from llmdash.redact import escape_controls

# name -> (module, attribute, one-line help shown by `llmdash --help` without importing the module)
COMMANDS = {
    "build": ("llmdash.cli.build", "build_command", "Build every dashboard and rule file into generated/."),
    "rules": ("llmdash.cli.build", "rules_command", "Write the Prometheus rule files only."),
    "engines": ("llmdash.cli.build", "engines_command", "List the engines and which signals each one offers."),
    "publish": ("llmdash.cli.delivery", "publish_command", "Push the dashboards to Grafana."),
    "provision": ("llmdash.cli.delivery", "provision_command", "Write a Grafana file-provisioning directory."),
    "diff": ("llmdash.cli.review", "diff_command", "Show what changed in the dashboards and rules, panel by panel."),
    "layout": ("llmdash.cli.review", "layout_command", "Draw a dashboard's grid, old beside new."),
    "doctor": ("llmdash.cli.doctor", "doctor_command", "Which panels and alerts will be empty on a fleet, and why."),
    "simulate": ("llmdash.cli.lab", "simulate_command", "Simulate an engine serving a scenario."),
    "demo": ("llmdash.cli.lab", "demo_command", "Simulate a KV-cache collapse and draw every engine's dashboard."),
    "bench-detect": ("llmdash.cli.lab", "bench_detect_command", "Alert detection delays vs naive baselines."),
    "bench-cost": ("llmdash.cli.lab", "bench_cost_command", "Samples and time of one dashboard load, vs vLLM's own."),
    "bench-rules": ("llmdash.cli.lab", "bench_rules_command", "What each rule group costs a Prometheus at N replicas."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, help_line) for name, (_, _, help_line) in COMMANDS.items()])


@click.group(cls=LazyGroup)
@click.version_option(package_name="llmdash", prog_name="llmdash", message="%(prog)s %(version)s")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Config file (default: ./llmdash.yaml if present, else built-in defaults).")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """Grafana dashboards and alert rules that catch KV-cache preemption on LLM serving engines."""
    ctx.obj = {"config_path": config_path}


def main() -> None:
    try:
        code = cli.main(standalone_mode=False)
    except LlmdashError as exc:
        # Escaped: a path with a newline in it (from any module) must not split the one line.
        click.echo(f"error: {escape_controls(str(exc))}", err=True)
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        click.echo(f"error: {' '.join(exc.format_message().split())}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        click.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except (RecursionError, UnicodeError, MemoryError) as exc:
        # The parsers bound their input; this is the last guard, so a miss is still one line, exit 2.
        click.echo(f"error: input too large, too deeply nested or not valid text ({type(exc).__name__})", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
