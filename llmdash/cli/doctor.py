"""`llmdash doctor`: will the dashboards and rules have data on this fleet? Read-only."""

from __future__ import annotations

import math
import sys

import click

from llmdash.cli.build import config_of
from llmdash.errors import EXIT_DRIFT, LlmdashError

DEADLINE_S = 60.0        # the whole read of a page or of a Prometheus, like publish's deadline of one request
MAX_DEADLINE_S = 86400.0


def _seconds(_ctx, _param, value: float) -> float:
    if not (math.isfinite(value) and 0 < value <= MAX_DEADLINE_S):
        raise click.BadParameter(f"expected seconds above 0 and at most {MAX_DEADLINE_S:g}, got {value:g}")
    return value


@click.command("doctor")
@click.option("--prometheus", "prometheus_url", metavar="URL", default=None,
              help="A Prometheus to ask which catalog series it holds over the last hour, under the config's "
                   "selectors (label values and a count by their labels; per replica only the series an SLO "
                   "or a native histogram counts replicas of).")
@click.option("--metrics", "metrics", metavar="URL|FILE", default=None,
              help="A scraped /metrics page: an http(s) URL or a file.")
@click.option("--deadline", metavar="SECONDS", type=float, default=DEADLINE_S, show_default=True, callback=_seconds,
              help="Seconds the whole read of the URL may take: connecting, headers and bodies of every request.")
@click.option("--format", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def doctor_command(ctx: click.Context, prometheus_url: str | None, metrics: str | None, deadline: float,
                   output: str) -> None:
    """Recognise the engine(s) and versions behind the series, then say which panel queries, annotations
    and rules will be empty, and why.

    Exit 0: all have data; 1: some will be empty, or a configured SLO's target bucket (or failed-request
    series) is missing; 2: bad input (a malformed URL, an unreadable file, a
    page that is not Prometheus text, no engine recognised); 3: the server or network failed
    (unreachable, an HTTP error, past --deadline, an answer too large or not the Prometheus API's JSON).
    """
    from llmdash.doctor.diagnose import counted_series, diagnose
    from llmdash.doctor.fetch import Client
    from llmdash.doctor.inventory import PrometheusReader, catalog_series, read_metrics
    from llmdash.doctor.report import to_json, to_text
    from llmdash.engines.catalog import load_all

    if (prometheus_url is None) == (metrics is None):
        raise LlmdashError("give exactly one of --prometheus URL or --metrics URL|FILE")
    config = config_of(ctx)
    client = Client(deadline)
    try:
        if metrics is not None:
            inventory = read_metrics(metrics, client)
        else:
            specs = load_all().values()
            reader = PrometheusReader(prometheus_url, config.selectors, client, config.fleet.instance_label)
            inventory = reader.inventory(catalog_series(specs, config.selectors), counted_series(specs, config))
    finally:
        client.close()
    reports = diagnose(inventory, config, from_scrape=metrics is not None)
    click.echo(to_json(inventory.source, reports) if output == "json" else to_text(inventory.source, reports))
    if any(report.empty or report.failing_slos for report in reports):
        sys.exit(EXIT_DRIFT)
