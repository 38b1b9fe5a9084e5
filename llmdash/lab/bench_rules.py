"""What llmdash's rule groups cost a Prometheus that scrapes N replicas: per group, evaluation time, samples
read, series added and the share of the evaluation interval, at several fleet sizes in one run.

Why: the rules are evaluated every interval whether anyone looks or not, and a group that outgrows its
interval misses evaluations (and pages late). Dashboards are measured by bench-cost; this measures the
standing cost. Each replica's series are the simulator's own for its engine (the catalog's newest names,
labels and bucket layouts, one model per replica, two models), under the target labels a Kubernetes
pod scrape adds (job, namespace, pod, container, service, endpoint, instance, cluster), with counters
growing steadily at a per-replica rate. They are backfilled with `promtool` from a little over the
rules' longest raw window before the start until a few minutes after it (a block may end in the future:
no sample is read before its time), so a real Prometheus 2.42 evaluates the generated rule file live at
the shipped interval (docs/prometheus.yml) on data as a running fleet would have it. What is read
back is Prometheus' own account: `/api/v1/rules` (each group's evaluationTime), its /metrics
(`prometheus_rule_group_last_evaluation_samples`, `process_cpu_seconds_total`) and a count of each
rule's output series.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from llmdash.durations import seconds
from llmdash.engines.catalog import load_engine
from llmdash.lab.exposition import live_text
from llmdash.lab.promserver import PrometheusServer
from llmdash.lab.scenarios import advance, build, instances

SIZES = (20, 200, 1000)            # replicas in all, half per model
SHIPPED_CONFIG = Path(__file__).resolve().parents[2] / "docs" / "prometheus.yml"
EVALUATIONS = 4                    # measured per size, after the first (which warms the page cache)
LEAD_S = 32 * 60                   # history backfilled: the rules' longest raw window (30m) and two minutes
UPTIME_S = 86400.0                 # each replica's uptime at the fleet's time 0
TEMPLATE_AT_S = 900.0              # the simulator's steady scenario, this far in, gives each series its rate
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$")


def shipped_intervals() -> tuple[float, float]:
    """(evaluation, scrape) seconds as docs/prometheus.yml ships them (a group's own interval overrides the first)."""
    config = yaml.safe_load(SHIPPED_CONFIG.read_text())["global"]
    return seconds(config["evaluation_interval"]), seconds(config["scrape_interval"])


@dataclass(frozen=True)
class Template:
    """One series of one replica of `model`: its name and engine labels, and how it moves."""

    model: int
    head: str             # name{labels}, without the target labels
    counter: bool         # counters (and histogram buckets, counts, sums) grow; gauges hold
    value: float          # per second for a counter, the level for a gauge


def templates(engine: str) -> list[Template]:
    """Each model's replica as the simulator serves it, 15 minutes into the steady scenario."""
    spec = load_engine(engine)
    scenario = build("steady")
    insts = instances(scenario, {engine: spec}, seed=1)
    advance(insts, scenario, TEMPLATE_AT_S, scenario.restart_at_s is None)
    out = []
    for m, inst in enumerate(insts):
        inst.emitters[engine].scrape(TEMPLATE_AT_S)
        kinds: dict[str, str] = {}
        for line in live_text([inst.emitters[engine]]).splitlines():
            if line.startswith("# TYPE "):
                _, _, family, kind = line.split(" ", 3)
                kinds[family] = kind
                continue
            found = SAMPLE.match(line)
            if not found:
                continue
            name, labels, value = found.groups()
            family = re.sub(r"_(bucket|count|sum)$", "", name) if name not in kinds else name
            counter = kinds.get(family, "gauge") in ("counter", "histogram", "summary")
            value = float(value)
            out.append(Template(m, f"{name}{labels or '{}'}", counter, value / TEMPLATE_AT_S if counter else value))
    return out


def target_labels(engine: str, model: int, replica: int) -> str:
    """The labels a Kubernetes pod scrape (kube-prometheus' PodMonitor/ServiceMonitor) puts on a series."""
    deployment = f"{engine}-m{model}"
    pod = f"{deployment}-7d9f{replica // 26 % 1000:03d}-{chr(97 + replica % 26)}{replica:04d}"
    return (f'job="llm/{deployment}",namespace="llm",pod="{pod}",container="{engine}",service="{deployment}",'
            f'endpoint="metrics",instance="10.{replica // 65536 % 256}.{replica // 256 % 256}.{replica % 256}:8000",'
            f'cluster="prod-1"')


@dataclass(frozen=True)
class Series:
    """One scraped series of the fleet: its sample name with every label, and how it moves."""

    head: str
    counter: bool
    value: float          # per second for a counter, else the level

    def at(self, elapsed_s: float) -> float:
        """The value `elapsed_s` after the fleet's time 0 (negative: before), the replica up since a day before."""
        return self.value * (UPTIME_S + elapsed_s) if self.counter else self.value


def fleet(engine: str, replicas: int) -> list[Series]:
    """`replicas` replicas, alternating between the two models, each with its own steady load."""
    out = []
    for t in templates(engine):
        for replica in range(t.model, replicas, 2):
            factor = 0.6 + (replica * 7 % 10) / 10
            head = t.head[:-1] + ("," if t.head[-2] != "{" else "") + target_labels(engine, t.model, replica) + "}"
            out.append(Series(head, t.counter, t.value * factor if t.counter else t.value))
    return out


def write_history(path: Path, series: list[Series], start: float, end: float, scrape_s: float) -> int:
    """OpenMetrics of `series` scraped every `scrape_s` from `start` up to `end`, one series at a time
    (promtool accepts series-major order, and needs a family's TYPE line before its samples);
    returns the samples written. Time 0 of the fleet is `end`."""
    steps = int((end - start) // scrape_s)
    stamps = [(end - (steps - k) * scrape_s - end, f" {end - (steps - k) * scrape_s:.0f}\n") for k in range(steps + 1)]
    declared: set[str] = set()
    samples = 0
    with open(path, "w") as out:
        for s in sorted(series, key=lambda s: s.head):
            name = s.head.split("{", 1)[0]
            if name not in declared and (name.endswith("_total") or not s.counter):   # histograms go untyped
                declared.add(name)
                kind = "counter" if s.counter else "gauge"
                out.write(f"# TYPE {name.removesuffix('_total') if s.counter else name} {kind}\n")
            out.write("".join(f"{s.head} {s.at(e):.6g}{stamp}" for e, stamp in stamps))
            samples += len(stamps)
        out.write("# EOF\n")
    return samples


class Exporter:
    """The fleet's /metrics on 127.0.0.1, each value as of the moment it is scraped (time 0: `zero`)."""

    def __init__(self, series: list[Series], zero: float):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        import threading

        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                body = exporter.page().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.series, self.zero = series, zero
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def page(self) -> str:
        elapsed = time.time() - self.zero
        return "".join(f"{s.head} {s.at(elapsed):.6g}\n" for s in self.series)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass(frozen=True)
class GroupCost:
    """One rule group at one fleet size: medians over the measured evaluations."""

    replicas: int
    group: str
    interval_s: float
    eval_s: float               # Prometheus' evaluationTime (wall)
    samples: int                # prometheus_rule_group_last_evaluation_samples
    series: int                 # series its rules write now (recorded series, ALERTS)
    evaluations: int

    @property
    def share(self) -> float:
        return self.eval_s / self.interval_s


@dataclass(frozen=True)
class SizeCost:
    replicas: int
    series_scraped: int
    groups: list[GroupCost]
    cpu_s_per_evaluation: float   # per interval, every group on schedule (`scheduled_cpu`)
    interval_s: float
    cpu_s_per_interval: float     # per interval as measured: Prometheus' CPU with the rules less its CPU without them
    doctor_s: float = float("nan")      # `llmdash doctor --prometheus` against this fleet, wall clock
    doctor_exit: int = 0

    @property
    def samples_per_interval(self) -> float:
        """Samples the groups read per `interval_s`, each group's per evaluation times its evaluations in it."""
        return sum(g.samples * self.interval_s / g.interval_s for g in self.groups)

    @property
    def cpu_share(self) -> float:
        return self.cpu_s_per_evaluation / self.interval_s


def _samples_read(server: PrometheusServer, group: dict, at: float) -> int:
    """Samples the group's rules read in one evaluation at `at`: each rule's expression replayed as an
    instant query with stats=all (Prometheus' own metrics count only the samples a group returns)."""
    total = 0
    for rule in group["rules"]:
        data = server._api("query", {"query": rule["expr"], "time": f"{at:.3f}", "stats": "all"})
        total += int(data["stats"]["samples"]["totalQueryableSamples"])
    return total


def _series_written(server: PrometheusServer, group: dict, at: float) -> int:
    total = 0
    for rule in group["rules"]:
        if "record" in rule:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(rule.get("labels", {}).items()))
            selector = f"{rule['record']}{{{labels}}}"
        else:
            selector = f'ALERTS{{alertname="{rule["alert"]}"}}'
        found = server.query(f"count({selector})", at)
        total += int(float(found[0]["value"][1])) if found else 0
    return total


def ranged_recordings(model: dict) -> list[dict]:
    """The recording rules whose series some rule reads over a range (in a `…_over_time` call: the chronic share's
    means, the healed-page subquery, the baselines), each as its rule, where its own expression reads raw series
    only: what a fleet's Prometheus has the history of, and a freshly loaded rule file does not."""
    records = [rule for group in model["groups"] for rule in group["rules"] if "record" in rule]
    names = {rule["record"] for rule in records}
    over = [rule["expr"] for group in model["groups"] for rule in group["rules"] if "_over_time(" in rule["expr"]]
    return [rule for rule in records if any(_reads(rule["record"], expr) for expr in over)
            and not any(_reads(name, rule["expr"]) for name in names)]


def _reads(name: str, expr: str) -> bool:
    return re.search(rf"(?<![\w:]){re.escape(name)}(?![\w:])", expr) is not None


def backfill_recorded(server: PrometheusServer, model: dict, start: float, interval_s: float) -> bool:
    """Write the history of `ranged_recordings` from `start` until now (`promtool tsdb create-blocks-from rules`,
    evaluated against the server at the rule interval), so a mean over 30 minutes of a recorded rate reads
    30 minutes of it, as in a fleet that has run the rules; True when blocks were written (load them: restart)."""
    rules = ranged_recordings(model)
    if not rules:
        return False
    path = server.dir / "ranged.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "backfill", "rules": rules}]}, sort_keys=False,
                                   width=10_000))
    run = subprocess.run([server.promtool, "tsdb", "create-blocks-from", "rules", f"--start={start:.0f}",
                          f"--end={time.time():.0f}", f"--url={server.url}", f"--eval-interval={interval_s:g}s",
                          f"--output-dir={server.data}", "--quiet", str(path)], capture_output=True, text=True,
                         timeout=1800)
    if run.returncode != 0:
        raise RuntimeError(f"promtool could not backfill the recorded series: {(run.stderr or run.stdout)[-500:]}")
    return True


def _merged(server: PrometheusServer, timeout_s: float = 600) -> None:
    """Wait for the compaction that merges the recorded series' blocks with the raw ones they overlap (the TSDB's
    first compaction tick, a minute after start), so its CPU is not counted as the rules'."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        page = server.session.get(f"{server.url}/metrics", timeout=30).text
        found = re.search(r"^prometheus_tsdb_vertical_compactions_total (\S+)$", page, re.M)
        if found and float(found.group(1)) > 0:
            return
        time.sleep(2)
    raise RuntimeError("the backfilled blocks were not compacted in time")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid` so far (/proc/PID/stat, fields 14 and 15, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_rate(pid: int, seconds_: float) -> float:
    """CPU seconds per second of `pid` over the next `seconds_` seconds."""
    began, used = time.monotonic(), _cpu_seconds(pid)
    time.sleep(seconds_)
    return (_cpu_seconds(pid) - used) / (time.monotonic() - began)


def measure_size(engine: str, replicas: int, rule_file: Path, interval_s: float, scrape_s: float,
                 evaluations: int = EVALUATIONS, progress=lambda message: None) -> SizeCost:
    """Backfill `replicas`' history, scrape them live, measure Prometheus' CPU without the rules, load
    `rule_file`, and read what its groups' next `evaluations` evaluations (after a first) cost."""
    model = yaml.safe_load(rule_file.read_text())
    series = fleet(engine, replicas)
    read = {s.head.split("{", 1)[0] for s in series if s.head.split("{", 1)[0] in rule_file.read_text()}
    server = PrometheusServer(scrape_interval=f"{scrape_s:g}s", evaluation_interval=f"{interval_s:g}s")
    zero = time.time()                  # live scrapes from here on; the history backfilled ends here
    exporter = Exporter(series, zero)
    try:
        server.config["scrape_configs"] = [{"job_name": "fleet", "honor_labels": True,
                                            "static_configs": [{"targets": [exporter.target]}]}]
        server.start()
        began = time.monotonic()
        path = server.dir / "fleet.om"
        samples = write_history(path, [s for s in series if s.head.split("{", 1)[0] in read], zero - LEAD_S, zero,
                                scrape_s)
        server.backfill(path, then_restart=True)
        path.unlink()
        server.restart()                # the blocks are loaded at start; what was scraped meanwhile is in the WAL
        progress(f"{engine}: {replicas} replicas ({len(series):,} series), {samples:,} samples of the series the "
                 f"rules read backfilled in {time.monotonic() - began:.0f} s")
        if backfill_recorded(server, model, zero - LEAD_S, interval_s):
            server.restart()
            _merged(server)
        time.sleep(2 * scrape_s)                                      # scrapes after the restart
        idle = _cpu_rate(server.proc.pid, 2 * max(interval_s, scrape_s))
        server.config["rule_files"] = [str(rule_file.resolve())]
        (server.dir / "prometheus.yml").write_text(yaml.safe_dump(server.config, sort_keys=False))
        server.session.post(f"{server.url}/-/reload", timeout=30).raise_for_status()
        seen: dict[str, list[tuple[str, float]]] = {}   # group -> [(lastEvaluation, eval s)]
        cpu_began = None
        every = {group["name"]: seconds(group.get("interval", f"{interval_s:g}s")) for group in model["groups"]}
        # each group evaluated `evaluations` times over the shortest interval in the window (once at least)
        wanted = {name: max(1, round(evaluations * interval_s / s_)) for name, s_ in every.items()}
        deadline = time.monotonic() + (evaluations + 2) * max(every.values()) * 6 + 120
        while time.monotonic() < deadline:
            for group in server.rules():
                stamp = group.get("lastEvaluation", "")
                if stamp.startswith("0001") or any(s[0] == stamp for s in seen.get(group["name"], [])):
                    continue
                seen.setdefault(group["name"], []).append((stamp, float(group["evaluationTime"])))
            if cpu_began is None and seen:                     # CPU from the first evaluation on, not the reload
                cpu_began, cpu_used = time.monotonic(), _cpu_seconds(server.proc.pid)
                before = {name: len(s) for name, s in seen.items()}
            if len(seen) == len(every) and all(len(s) > 1 and len(s) - before.get(name, 0) >= wanted[name]
                                               for name, s in seen.items()):
                break
            time.sleep(min(1.0, interval_s / 5))
        else:
            raise RuntimeError(f"{replicas} replicas: too few evaluations of every group before the deadline")
        # per evaluation, not per interval: a group slower than its interval skips evaluations
        window = time.monotonic() - cpu_began
        spent = _cpu_seconds(server.proc.pid) - cpu_used - idle * window
        within = {name: s[before.get(name, 0):] for name, s in seen.items()}
        now = time.time()
        out = []
        for group in model["groups"]:
            measured = seen[group["name"]][1:]
            out.append(GroupCost(replicas, group["name"], every[group["name"]],
                                 statistics.median(m[1] for m in measured), _samples_read(server, group, now),
                                 _series_written(server, group, now), len(measured)))
        per_evaluation = scheduled_cpu(spent, {name: [e for _, e in s] for name, s in within.items()}, every,
                                       interval_s)
        return SizeCost(replicas, len(series), out, per_evaluation, interval_s, spent / window * interval_s,
                        *_doctor_seconds(server))
    finally:
        server.stop()
        exporter.close()


def scheduled_cpu(spent_s: float, evaluations: dict[str, list[float]], every: dict[str, float],
                  interval_s: float) -> float:
    """The rule CPU of one `interval_s` with every group evaluated on schedule: `spent_s` (CPU over the window)
    shared among the groups by their evaluation time in it (`evaluations`: group -> each evaluation's seconds),
    each group's share over its evaluations in the window, times its evaluations per `interval_s` (`every`: group ->
    its interval). A group slower than its interval skips evaluations, so the CPU per interval measured would
    under-count what it needs; this does not."""
    busy = sum(sum(times) for times in evaluations.values())
    if not busy:
        return float("nan")
    return sum(spent_s * sum(times) / busy / len(times) * interval_s / every[name]
               for name, times in evaluations.items() if times)


def _doctor_seconds(server: PrometheusServer) -> tuple[float, int]:
    """Wall time and exit code of `llmdash doctor --prometheus` (this code, a fresh interpreter) on the fleet."""
    began = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "llmdash.cli.main", "doctor", "--prometheus", server.url,
                          "--format", "json"], capture_output=True, text=True, timeout=600,
                         cwd=Path(__file__).resolve().parents[2])
    return time.monotonic() - began, run.returncode


def growth_exponent(points: list[tuple[float, float]]) -> float:
    """The b of cost = a * replicas^b fitted by least squares on logarithms (NaN under two usable points)."""
    usable = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len(usable) < 2:
        return float("nan")
    mx = sum(x for x, _ in usable) / len(usable)
    my = sum(y for _, y in usable) / len(usable)
    spread = sum((x - mx) ** 2 for x, _ in usable)
    return sum((x - mx) * (y - my) for x, y in usable) / spread if spread else float("nan")


def table(engine: str, sizes: list[SizeCost]) -> str:
    """Markdown: one row per size and group, the fleet's totals, then the fitted growth of each column."""
    lines = [f"### {engine}", "",
             "| replicas | group | interval | eval s (median) | share of interval | samples read (all: per interval) "
             "| series added "
             "| added per replica |", "|---|---|---|---|---|---|---|---|"]
    for size in sizes:
        for g in size.groups:
            lines.append(f"| {size.replicas} | {g.group} | {g.interval_s:g} s | {g.eval_s:.3f} | {g.share:.1%} | "
                         f"{g.samples:,} | {g.series:,} | {g.series / size.replicas:.1f} |")
        total_eval = sum(g.eval_s / g.interval_s for g in size.groups) * size.interval_s
        lines.append(f"| {size.replicas} | **all** ({size.series_scraped:,} series scraped) | {size.interval_s:g} s "
                     f"| {total_eval:.3f} | {total_eval / size.interval_s:.1%} | "
                     f"{size.samples_per_interval:,.0f} | {sum(g.series for g in size.groups):,} | "
                     f"{sum(g.series for g in size.groups) / size.replicas:.1f} |")
    lines += ["", "| replicas | rule CPU per evaluation (every group on schedule) | share of interval | "
              "rule CPU per interval (measured) | share of interval | `llmdash doctor --prometheus` |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {s.replicas} | {s.cpu_s_per_evaluation:.3f} s | {s.cpu_share:.1%} | {s.cpu_s_per_interval:.3f} s | "
              f"{s.cpu_s_per_interval / s.interval_s:.1%} | {s.doctor_s:.1f} s (exit {s.doctor_exit}) |" for s in sizes]
    fits = {
        "evaluation time": [(s.replicas, sum(g.eval_s for g in s.groups)) for s in sizes],
        "CPU": [(s.replicas, s.cpu_s_per_evaluation) for s in sizes],
        "samples read": [(s.replicas, s.samples_per_interval) for s in sizes],
        "series added": [(s.replicas, sum(g.series for g in s.groups)) for s in sizes],
    }
    lines += ["", "Fitted growth (cost ∝ replicas^b): " + "; ".join(
        f"{what} b = {growth_exponent(points):.2f}" for what, points in fits.items()) + "."]
    return "\n".join(lines) + "\n"


def preamble(interval_s: float, sizes: tuple[int, ...], evaluations: int, elapsed_s: float | None = None) -> str:
    took = f" This run took {elapsed_s / 60:.0f} minutes on the shared 2-core machine." if elapsed_s is not None else ""
    return (f"Each size is a fresh Prometheus 2.42 evaluating the engine's generated rule file every "
            f"{interval_s:g} s (docs/prometheus.yml's evaluation_interval; a group's own interval where it sets "
            f"one): {', '.join(map(str, sizes))} replicas, each serving one of 2 models, with the simulator's "
            "series (catalog names, labels, bucket layouts) under Kubernetes target labels (job, namespace, pod, "
            f"container, service, endpoint, instance, cluster); {LEAD_S // 60} minutes of 15 s scrapes backfilled, "
            "then scraped live. Eval s is the median of "
            f"{evaluations} evaluations after the first (`/api/v1/rules` evaluationTime: wall clock, on a shared "
            "machine); samples read = each rule replayed as an instant query with stats=all "
            "(totalQueryableSamples); series added = the series the group's rules write (recorded series, ALERTS). "
            "Rule CPU = Prometheus' CPU (/proc/PID/stat) over those evaluations less its CPU over two intervals "
            "before the rules were loaded (scrapes only): per interval as measured, and per evaluation with every "
            "group on schedule (the CPU shared among the groups by their evaluation time, over each group's "
            "evaluations, times its evaluations per interval), which a group that skips evaluations does not "
            "under-count. The recorded series some rule reads over a range (the chronic share's means of the "
            "short-window rates) are backfilled too (`promtool tsdb create-blocks-from rules`). The doctor is this "
            "checkout's, in a fresh "
            "interpreter, with the default config, against the same Prometheus (exit 1: some panel is empty on "
            "the synthetic series, which do not carry every engine's labels)." + took)
