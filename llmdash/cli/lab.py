"""`llmdash simulate` and `llmdash demo`: the serving simulator from the command line."""

from __future__ import annotations

import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click

from llmdash.config import load_config
from llmdash.lab import bench, bench_report
from llmdash.engines.catalog import load_all, load_engine
from llmdash.errors import LlmdashError
from llmdash.lab.emitters import simulated_engines
from llmdash.lab.exposition import live_text
from llmdash.lab.scenarios import SCENARIOS, SCRAPE_INTERVAL_S, advance, build, instances, write_openmetrics


def _config_path(ctx: click.Context) -> str | None:
    return (ctx.obj or {}).get("config_path")


@click.command("simulate")
@click.option("--engine", required=True, type=click.Choice(simulated_engines(load_all())),
              help="Engine whose metrics to emit.")
@click.option("--scenario", required=True, type=click.Choice(list(SCENARIOS)), help="Traffic scenario.")
@click.option("--seed", default=1, show_default=True, help="Same seed, same data.")
@click.option("--serve", "port", type=click.IntRange(1, 65535), default=None,
              help="Serve a live /metrics on 127.0.0.1:PORT for a Prometheus to scrape.")
@click.option("--speed", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="With --serve: scenario seconds per wall-clock second.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the whole scenario as OpenMetrics for `promtool tsdb create-blocks-from openmetrics`.")
def simulate_command(engine: str, scenario: str, seed: int, port: int | None, speed: float, out: Path | None) -> None:
    """Simulate ENGINE serving SCENARIO: a backfill file (--out) or a live endpoint (--serve)."""
    if (port is None) == (out is None):
        raise LlmdashError("give exactly one of --serve PORT or --out FILE")
    spec = load_engine(engine)
    chosen = build(scenario)
    if out is not None:
        _write_backfill(engine, spec, chosen, seed, out)
    else:
        _serve(engine, spec, chosen, seed, port, speed)


def _write_backfill(engine, spec, scenario, seed: int, out: Path) -> None:
    """Timestamps end at the last full minute, so the data is recent and inside retention."""
    start = (time.time() // 60) * 60 - scenario.duration_s
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        with open(tmp, "w") as handle:
            samples = write_openmetrics(scenario, {engine: spec}, seed, start, handle)
            handle.write("# EOF\n")
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise LlmdashError(f"cannot write {out}: {exc.strerror}") from None
    click.echo(f"wrote {samples} samples of {engine} / {scenario.name} to {out}\n"
               f"load them with: promtool tsdb create-blocks-from openmetrics {out} <prometheus data dir>")


def _serve(engine, spec, scenario, seed: int, port: int, speed: float) -> None:
    """Advance the simulation to 'now' on every scrape; 503 while a scrape would be missed."""
    insts = instances(scenario, {engine: spec}, seed)
    lock = threading.Lock()
    began = time.monotonic()
    restarted = scenario.restart_at_s is None

    def metrics() -> tuple[int, str]:
        nonlocal restarted
        t = (time.monotonic() - began) * speed
        with lock:
            restarted = advance(insts, scenario, t, restarted)
            for inst in insts:
                inst.emitters[engine].scrape(t)
            text = live_text([inst.emitters[engine] for inst in insts],
                             [inst.replica.target_labels(engine, inst.model.name, live=True) for inst in insts])
        if not scenario.scraped(t):
            return 503, "scrape missed by the scenario\n"
        return 200, text

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            status, body = metrics()
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        raise LlmdashError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
    click.echo(f"serving {engine} / {scenario.name} on http://127.0.0.1:{port}/metrics "
               f"(speed x{speed:g}, onset at {scenario.onset_s / 60 / speed:.1f} min; scrape every "
               f"{SCRAPE_INTERVAL_S:g}s, see docs/prometheus.yml); Ctrl-C stops")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@click.command("demo")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("out/demo"),
              show_default=True, help="Where to write <engine>.png.")
@click.option("--seed", default=1, show_default=True, help="Simulator seed.")
@click.pass_context
def demo_command(ctx: click.Context, out: Path, seed: int) -> None:
    """Build, simulate a KV-cache collapse on a local Prometheus, draw every engine's dashboard to OUT/."""
    from llmdash.lab.demo import run_demo   # matplotlib only when drawing

    paths = run_demo(load_config(_config_path(ctx)), out, seed, progress=lambda m: click.echo(m, err=True))
    click.echo(f"\n{len(paths)} dashboards drawn: " + " ".join(str(p) for p in paths))


@click.command("bench-detect")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=bench_report.default_path("bench-detect"),
              show_default=True, help="Where to write the table (markdown, stamped with the commit and date).")
@click.option("--engine", "engine_ids", multiple=True, help="Only these engines (default: the config's).")
@click.option("--scenario", "scenario_names", multiple=True, type=click.Choice(bench.SCENARIOS),
              help="Only these scenarios (default: all).")
@click.option("--seed", "seeds", multiple=True, type=int, default=bench.SEEDS, show_default=True,
              help="Simulator seeds (repeat the option); delays are reported as min/median/max over them.")
@click.option("--delay-seed", "delay_seeds", multiple=True, type=int,
              help="Seeds of the live page-delay runs per backend (repeat the option; default 1 to 4; the seeds "
                   "run at once, ~6 min per engine).")
@click.option("--delay/--no-delay", default=True, show_default=True,
              help="Measure the page delay on Prometheus and VictoriaMetrics live (vLLM, or the --engine ones).")
@click.pass_context
def bench_detect_command(ctx: click.Context, out: Path, engine_ids, scenario_names, seeds: tuple[int, ...],
                         delay_seeds: tuple[int, ...], delay: bool) -> None:
    """Detection delay and false firings of the alerts vs naive baselines, on simulated scenarios; then the
    page's delay per backend (Prometheus, VictoriaMetrics with vmalert), live at the wall clock."""
    from llmdash.lab import bench_delay   # requests and the local servers only when benchmarking

    config = load_config(_config_path(ctx))
    for engine in engine_ids:
        load_engine(engine)
    delay_engines = tuple(engine_ids) or bench_delay.ENGINES
    engine_ids = tuple(engine_ids) or config.engine_ids
    started = time.monotonic()
    progress = lambda message: click.echo(message, err=True)  # noqa: E731
    outcomes = bench.run(engine_ids, config, names=tuple(scenario_names) or bench.SCENARIOS,
                         progress=progress, seeds=tuple(seeds))
    body = bench.table(outcomes, engine_ids, config)
    if delay:
        results = bench_delay.run(delay_engines, config, tuple(delay_seeds) or bench_delay.SEEDS, progress=progress)
        body += "\n## Page delay by backend\n\n" + bench_delay.table(results, config)
    text = bench_report.write(out, "Detection quality", "make bench-detect", body)
    click.echo(text + "\n" + bench.summary(outcomes, engine_ids, config)
               + f"\nwritten to {out} ({time.monotonic() - started:.0f} s)")


@click.command("bench-cost")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=bench_report.default_path("bench-cost"),
              show_default=True, help="Where to write the table (markdown, stamped with the commit and date).")
@click.option("--anchor", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="vLLM's own overview dashboard JSON (from vLLM's examples/observability), measured as the "
                   "reference; llmdash ships no copy of it.")
@click.option("--fleet", "fleet_names", multiple=True, metavar="INSTANCESxRANGE",
              help="Measure only this load, e.g. 200x24h (repeat the option; default: every load, 20x3h, 200x0.5h "
                   "and 200x24h).")
@click.pass_context
def bench_cost_command(ctx: click.Context, out: Path, anchor: Path, fleet_names: tuple[str, ...]) -> None:
    """Samples and evaluation time of one load of every dashboard, raw and recorded, on synthetic vLLM
    fleets of 20 and 200 instances (3 h, 30 min and 24 h loads) in a local Prometheus, beside vLLM's own overview
    dashboard."""
    from llmdash.lab import bench_cost

    started = time.monotonic()
    known = [f.name for f in bench_cost.FLEETS]
    unknown = [name for name in fleet_names if name not in known]
    if unknown:
        raise click.BadParameter(f"{unknown[0]!r} is not a load; choose from {', '.join(known)}",
                                 param_hint="--fleet")
    fleets = tuple(f for f in bench_cost.FLEETS if not fleet_names or f.name in fleet_names)
    rows, rule_costs = bench_cost.run(load_config(_config_path(ctx)), anchor, fleets,
                                      progress=lambda message: click.echo(message, err=True))
    text = bench_report.write(out, "Query cost", "make bench-cost", bench_cost.table(rows, rule_costs, fleets))
    click.echo(text + f"\nwritten to {out} ({time.monotonic() - started:.0f} s)")


@click.command("bench-rules")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=bench_report.default_path("bench-rules"),
              show_default=True, help="Where to write the table (markdown, stamped with the commit and date).")
@click.option("--engine", "engine_ids", multiple=True, default=("vllm",), show_default=True,
              help="Engines whose generated rule file to measure (repeat the option).")
@click.option("--replicas", "sizes", multiple=True, type=click.IntRange(min=2), show_default=True,
              default=(20, 200, 1000), help="Fleet sizes, replicas in all (repeat the option).")
@click.pass_context
def bench_rules_command(ctx: click.Context, out: Path, engine_ids: tuple[str, ...], sizes: tuple[int, ...]) -> None:
    """Evaluation time, samples read, series added and share of the interval of each rule group, on a
    real Prometheus evaluating the generated rules at the shipped interval over N backfilled replicas."""
    import tempfile

    from llmdash.build import build_rule_files
    import yaml

    from llmdash.lab import bench_rules

    config = load_config(_config_path(ctx))
    for engine in engine_ids:
        load_engine(engine)
    started = time.monotonic()
    interval, scrape = bench_rules.shipped_intervals()
    progress = lambda message: click.echo(message, err=True)  # noqa: E731
    files = build_rule_files(config)
    sections = []
    with tempfile.TemporaryDirectory(prefix="llmdash-bench-rules-") as tmp:
        for engine in engine_ids:
            rule_file = Path(tmp) / f"{engine}.rules.yaml"
            rule_file.write_text(yaml.safe_dump(files[engine], sort_keys=False, width=10_000))
            measured = [bench_rules.measure_size(engine, n, rule_file, interval, scrape, progress=progress)
                        for n in sorted(sizes)]
            sections.append(bench_rules.table(engine, measured))
    body = bench_rules.preamble(interval, tuple(sorted(sizes)), bench_rules.EVALUATIONS,
                                time.monotonic() - started) + "\n\n" + "\n".join(sections)
    text = bench_report.write(out, "Rule evaluation cost", "make bench-rules", body)
    click.echo(text + f"\nwritten to {out} ({time.monotonic() - started:.0f} s)")
