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
from llmdash.redact import error_line

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
    _tolerant_streams()
    try:
        code = cli.main(standalone_mode=False)
    except LlmdashError as exc:
        # Through the one path: scrubbed (a config value's URL may hold a password) and escaped (a path with
        # a newline in it, from any module, must not split the one line).
        click.echo(error_line(exc), err=True)
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        click.echo(error_line(" ".join(exc.format_message().split()) + hint), err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        click.echo(error_line(" ".join(exc.format_message().split())), err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except (RecursionError, MemoryError) as exc:
        # The parsers bound their input; this is the last guard, so a miss is still one line, exit 2.
        click.echo(f"error: input too large or too deeply nested ({type(exc).__name__})", err=True)
        sys.exit(EXIT_USAGE)
    except UnicodeError as exc:
        # Said as what it is: text this locale's encoding cannot carry, not an input too large.
        encoding = getattr(exc, "encoding", "this encoding")
        click.echo(error_line(f"text that {encoding} cannot carry ({type(exc).__name__}); "
                              "use a UTF-8 locale such as LANG=C.UTF-8"), err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(code if isinstance(code, int) else 0)


def _tolerant_streams() -> None:
    """Print what the terminal's encoding cannot show as escapes (a non-ASCII path under
    PYTHONIOENCODING=ascii or the C locale) rather than fail on it."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


if __name__ == "__main__":
    main()
