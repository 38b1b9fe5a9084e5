"""`llmdash publish` and `llmdash provision`: the two ways dashboards reach a Grafana.

Credentials are read from the environment or a file only; there is deliberately no
`--token` or `--password` option, so secrets stay out of shell history and `ps`.
"""

from __future__ import annotations

import os
import sys

import click
import urllib3

from llmdash import redact
from llmdash.build import build_dashboards, build_rule_files, dashboard_names
from llmdash.cli.build import ownership
from llmdash.config import DNS1123_LABEL, load_config
from llmdash.delivery.credentials import resolve_connection
from llmdash.delivery.discovery import API_CHOICES, SCHEMA_CHOICES, connect
from llmdash.delivery.kubernetes import DIRECTORIES
from llmdash.delivery.provision import DEFAULT_GRAFANA_PATH, write_provisioning
from llmdash.delivery.publish import PublishOptions, git_revision, publish
from llmdash.errors import LlmdashError
from llmdash.inputs import shorten


def _selected(config, names: tuple[str, ...]) -> dict[str, dict]:
    known = dashboard_names(config)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise LlmdashError(f"unknown dashboard {', '.join(unknown)} (built: {', '.join(sorted(known))})")
    return build_dashboards(config, names or None)


def _config(ctx: click.Context, config_path: str | None):
    """This command's --config, else the one given to the `llmdash` group."""
    return load_config(config_path or (ctx.obj or {}).get("config_path"))


def _shown(text: str, secrets: tuple[str, ...] = ()) -> str:
    """What publish prints, line by line: secrets scrubbed (a hostile Grafana may echo the token in
    any field) and control characters escaped (a dashboard title may carry terminal escape sequences)."""
    return "\n".join(redact.escape_controls(line) for line in redact.scrub(text, secrets).split("\n"))


def _fail(error: LlmdashError, secrets: tuple[str, ...] = ()) -> None:
    click.echo(redact.error_line(error, secrets), err=True)
    sys.exit(error.exit_code)


@click.command("publish")
@click.argument("names", nargs=-1)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="llmdash.yaml (default ./llmdash.yaml)")
@click.option("--url", help="Grafana base URL; overrides GRAFANA_URL and grafana.url")
@click.option("--token-file", type=click.Path(dir_okay=False), help="File holding a service-account token")
@click.option("--folder-uid", help="Target folder uid (default grafana.folder_uid, llm-serving)")
@click.option("--folder-title", help="Title used when the folder is created")
@click.option("--ca-cert", type=click.Path(dir_okay=False), help="CA bundle to verify Grafana's TLS certificate")
@click.option("--insecure", is_flag=True, help="Skip TLS verification (explicit opt-out)")
@click.option("--connect-timeout", type=float, help="Seconds to wait for a connection (default 5)")
@click.option("--read-timeout", type=float, help="Seconds to wait for each read of an answer (default 30)")
@click.option("--deadline", type=float,
              help="Seconds one request may take in all: connect, headers and body (default 60)")
@click.option("--retries", type=click.IntRange(0, 10), default=3, show_default=True,
              help="Retries on connection errors and 5xx")
@click.option("--retry-backoff", type=click.FloatRange(0, 60), default=0.5, show_default=True,
              help="First pause between retries in seconds; doubles each time")
@click.option("--api", type=click.Choice(API_CHOICES), help="Dashboard API: legacy /api, resource "
              "/apis/dashboard.grafana.app (Grafana 12+), or auto: resource where offered (default grafana.api, auto)")
@click.option("--schema", type=click.Choice(SCHEMA_CHOICES), default="auto", show_default=True,
              help="Dashboard model: v1 classic JSON, v2 the schema v2 resource (dashboard.grafana.app/v2, Grafana "
              "13), or auto: v2 where /apis lists it (not with --api legacy), else v1")
@click.option("--namespace", help="Resource API namespace (default: from the org, default or org-<id>; "
              "Grafana Cloud: stacks-<id>)")
@click.option("--dry-run", is_flag=True, help="Show what would be created, updated or refused; write nothing")
@click.option("--force", is_flag=True, help="Overwrite dashboards edited in Grafana since the last publish")
@click.option("--annotate", is_flag=True, help="Post a Grafana annotation tagged with the git revision")
@click.pass_context
def publish_command(ctx, names, config_path, url, token_file, folder_uid, folder_title, ca_cert, insecure,
                    connect_timeout, read_timeout, deadline, retries, retry_backoff, api, schema, namespace, dry_run,
                    force, annotate):
    """Publish the built dashboards to Grafana.

    Exit codes: 0 published or unchanged, 1 a dashboard was refused (edited in Grafana,
    provisioned, conflict), 2 usage/config/invalid dashboard, 3 Grafana or network error.
    Credentials: GRAFANA_TOKEN, --token-file, or GRAFANA_USER + GRAFANA_PASSWORD.
    """
    connection = None
    try:
        config = _config(ctx, config_path)
        settings = config.grafana
        connection = resolve_connection(
            settings, os.environ, url=url, token_file=token_file, ca_cert=ca_cert, insecure=insecure,
            connect_timeout=connect_timeout, read_timeout=read_timeout, deadline=deadline, retries=retries,
            backoff_base=retry_backoff)
        dashboards = _selected(config, names)
        if connection.verify is False:
            click.echo("warning: TLS verification is off (--insecure or grafana.verify_tls: false)", err=True)
            # That line says it once; urllib3 would add a multi-line warning for every request.
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        options = PublishOptions(folder_uid=folder_uid or settings.folder_uid,
                                 folder_title=folder_title or settings.folder_title,
                                 force=force, dry_run=dry_run, annotate=annotate, revision=git_revision())
        namespace = namespace or settings.namespace
        if namespace is not None and not DNS1123_LABEL.match(namespace):
            raise LlmdashError(f"--namespace {shorten(namespace)} is not a namespace "
                               "like default, org-2 or stacks-12345")
        backend = connect(connection, api or settings.api, namespace, schema)
        echo = lambda text: click.echo(_shown(text, connection.secrets))  # noqa: E731
        echo(f"dashboard API: {backend.description}")
        code = publish(dashboards, backend, options, echo=echo)
    except LlmdashError as error:
        _fail(error, connection.secrets if connection else ())
    ctx.exit(code)


@click.command("provision", help=f"""Write a Grafana file-provisioning layout, or Kubernetes manifests, to DIRECTORY.

    --format files: DIRECTORY/provisioning/dashboards/llmdash.yaml is the provider (mount it
    under /etc/grafana/provisioning/dashboards); DIRECTORY/dashboards/*.json are the models
    (mount them at --grafana-path).

    --format kubernetes: {"; ".join(f"DIRECTORY/{folder}/ ({what})" for folder, what in DIRECTORIES.items())};
    each with a kustomization.yaml; settings under `kubernetes:` in the config.
    A DIRECTORY/kustomization.yaml of your own is kept: llmdash's goes to kustomization.llmdash.yaml.

    {ownership("DIRECTORY")}""")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="llmdash.yaml (default ./llmdash.yaml)")
@click.option("--format", "layout", type=click.Choice(["files", "kubernetes"]), default="files", show_default=True,
              help="files: Grafana file provisioning; kubernetes: ConfigMaps, GrafanaDashboards, PrometheusRules")
@click.option("--grafana-path", default=DEFAULT_GRAFANA_PATH, show_default=True,
              help="Where Grafana will see the dashboard files (the provider's options.path; --format files)")
@click.pass_context
def provision_command(ctx, directory, config_path, layout, grafana_path):
    try:
        config = _config(ctx, config_path)
        if layout == "kubernetes":
            from llmdash.delivery.kubernetes import write_manifests
            outcome = write_manifests(build_dashboards(config), build_rule_files(config), directory,
                                      config.kubernetes)
        else:
            outcome = write_provisioning(build_dashboards(config), directory, folder_uid=config.grafana.folder_uid,
                                         folder_title=config.grafana.folder_title, grafana_path=grafana_path)
    except LlmdashError as error:
        _fail(error)
    for line in outcome.lines():
        click.echo(line)
