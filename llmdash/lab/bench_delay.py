"""Page delay per backend: when does the preemption page fire on Prometheus, and on VictoriaMetrics with vmalert?

Why: `promtool test rules` (the rest of bench-detect) evaluates on one synchronous store, so it cannot show
what a scale-out ruler costs. vmalert writes recorded series back by remote write, asynchronously, and
VictoriaMetrics hides samples younger than `-search.latencyOffset` (30s by default) from queries at the
current time; the page reads recorded series, so each level of the chain waits again. Both only happen at
the wall clock (a replay neither writes asynchronously nor queries near "now"), so this measures live.

One run per seed: the kv-collapse scenario is simulated (phased scrapes, as in a real fleet) and its history
is backfilled up to `LEAD_S` before the first preemption of the collapsing replica, mapped so that the cut is
now, into one Prometheus (evaluating the default-target rule file) and one VictoriaMetrics per vmalert
variant in `BACKENDS` (latency offset 30s or 0s; evaluating at second 15 or 45 of the interval; the
`rules.target: vmalert` file, or that file with the page reading the recorded series as it did before;
`-datasource.queryTimeAlignment` on or off), each with its own live vmalert, all evaluating every
`rules.evaluation_interval` (Prometheus' default, 1m). The rest of the scenario is then fed at the wall
clock: every scrape's samples, with their own timestamps, become available at their scrape time, pushed into
every VictoriaMetrics (`/api/v1/import/prometheus`) and scraped by Prometheus every second from a loopback
/metrics serving each process's next due scrape (`honor_labels`, explicit timestamps), so all the stores
hold the same samples within a second of their time. The page's firing is polled every second on each ruler's
`/api/v1/alerts`; its delay is the wall-clock time it was first seen firing for the collapsing replica minus
the first preemption mapped to the wall clock.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

from llmdash.config import Config
from llmdash.durations import seconds
from llmdash.engines.catalog import load_engine
from llmdash.lab import scenarios
from llmdash.lab.promserver import PrometheusServer, free_port
from llmdash.lab.vmserver import SAMPLE, VictoriaMetricsServer, VmalertServer
from llmdash.rules.generate import build_rules, render_rules
from llmdash.rules.targets import for_target
from llmdash.vocabulary import Alert

SCENARIO = "kv-collapse"
ENGINES = ("vllm",)
SEEDS = (1, 2, 3, 4)     # run at once: a run mostly waits for the wall clock
LEAD_S = 120.0          # the backfill ends this long before the first preemption: the rest is fed live
TIMEOUT_S = 600.0       # of live feed, after which a page not seen is reported as missed
POLL_S = 1.0
PROMETHEUS_SCRAPE = "1s"   # how soon Prometheus picks up a due scrape from the loopback /metrics
PROMETHEUS_VERSION, VMALERT_VERSION = "2.42", "1.79"


@dataclass(frozen=True)
class Backend:
    """A ruler and its store: Prometheus (`latency_offset` None), or VictoriaMetrics with vmalert running the
    `rules.target: vmalert` file, or (`page_on_recorded`) that file as it was before the page read raw series:
    the default file with its hold moved into the expression, the page reading the recorded shares.
    `phase_s`: the second of each evaluation interval at which vmalert evaluates (see `vmalert_phase`).
    `query_time_alignment`: vmalert's `-datasource.queryTimeAlignment` (its default true: it queries at the
    interval's start, whatever second it evaluates at)."""

    name: str
    latency_offset: str | None = None
    page_on_recorded: bool = False
    phase_s: float | None = None
    query_time_alignment: bool = True

    @property
    def label(self) -> str:
        if self.latency_offset is None:
            return f"Prometheus {PROMETHEUS_VERSION}"
        return f"VictoriaMetrics + vmalert {VMALERT_VERSION}" + (
            ", page on recorded series" if self.page_on_recorded else "") + (
            "" if self.query_time_alignment else ", `-datasource.queryTimeAlignment=false`")


PROMETHEUS = Backend("prometheus")
# vmalert evaluates at a second of the minute fixed by its group's hash, and queries at the minute's start
# (-datasource.queryTimeAlignment): 15 s in, data 15 s old is hidden by a 30 s latency offset; 45 s in it is not
PHASES_S = (15.0, 45.0)
BACKENDS = (PROMETHEUS,) + tuple(
    Backend(f"victoriametrics-{offset}{'-recorded' if recorded else ''}-at{phase:g}s", offset, recorded, phase)
    for phase in PHASES_S for recorded in (False, True) for offset in ("30s", "0s")) + tuple(
    Backend(f"victoriametrics-30s-unaligned-at{phase:g}s", "30s", False, phase, False) for phase in PHASES_S)


@dataclass(frozen=True)
class Timeline:
    """Where the scenario sits on the wall clock: scenario second s is wall-clock `start + s`."""

    start: float
    cut_s: float                 # scenario second the backfill ends at (scrapes from it on are fed live)
    first_preemption_s: float

    @classmethod
    def plan(cls, first_preemption_s: float, now: float, lead_s: float = LEAD_S) -> "Timeline":
        """The backfill ends `lead_s` before the first preemption, and that cut is `now`: everything
        backfilled is in the past (Prometheus refuses samples below its newest block)."""
        cut = first_preemption_s - lead_s
        return cls(now - cut, cut, first_preemption_s)

    def wall(self, scenario_s: float) -> float:
        return self.start + scenario_s

    def delay_s(self, fired_at: float) -> float:
        """Seconds from the first preemption to a wall-clock moment."""
        return fired_at - self.wall(self.first_preemption_s)


@dataclass(frozen=True)
class Scrape:
    """One scrape of one simulated process: its scenario time and its rendered OpenMetrics lines
    (timestamps in scenario seconds, HELP/TYPE once per family over the whole scenario)."""

    at: float
    process: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Result:
    seed: int
    engine: str
    first_preemption_s: float
    delays: tuple[tuple[str, float | None], ...]     # backend name -> page delay in seconds (None: missed)
    prometheus_phase_s: float | None = None

    def delay(self, backend: Backend) -> float | None:
        return dict(self.delays).get(backend.name)


def simulate(engine: str, seed: int, scenario: scenarios.Scenario) -> list[Scrape]:
    """Every phased scrape of the scenario, in time order."""
    specs = {engine: load_engine(engine)}
    declared: set[str] = set()
    return [Scrape(at, emitter.target, tuple(emitter.render(emitter.target, round(at, 3), declared)))
            for _t, batch in scenarios.timed_scrapes(scenario, specs, seed, phased=True)
            for at, _engine, _model, emitter in batch]


def openmetrics(scrapes: list[Scrape], timeline: Timeline) -> str:
    """The backfill: OpenMetrics with wall-clock timestamps in seconds, `# EOF` last."""
    lines = []
    for scrape in scrapes:
        for line in scrape.lines:
            match = SAMPLE.match(line)
            lines.append(line if match is None else
                         f"{match['series']} {match['value']} {timeline.wall(float(match['ts'])):.3f}")
    return "\n".join(lines + ["# EOF", ""])


def exposition(scrape: Scrape, timeline: Timeline) -> str:
    """One scrape in the Prometheus text format with wall-clock millisecond timestamps (what both the
    scraping Prometheus and VictoriaMetrics' import take)."""
    return "".join(f"{m['series']} {m['value']} {round(timeline.wall(float(m['ts'])) * 1000)}\n"
                   for m in map(SAMPLE.match, scrape.lines) if m is not None)


def firing(answer: dict, alert: str, instance: str) -> bool:
    """Whether an `/api/v1/alerts` answer (Prometheus' or vmalert's) has `alert` firing for `instance`."""
    return any(a.get("state") == "firing" and a.get("labels", {}).get("instance") == instance
               and (a.get("labels", {}).get("alertname") or a.get("name")) == alert
               for a in (answer.get("data") or {}).get("alerts") or ())


class Feed:
    """The live half of the scenario: a loopback /metrics for Prometheus serving each process's next due
    scrape (the previous one again when none is due: an exact duplicate, which Prometheus ignores), a
    thread pushing every scrape into each VictoriaMetrics when it falls due, and a sink for vmalert's
    notifications. `stop()` ends both and closes the socket."""

    def __init__(self, scrapes: list[Scrape], timeline: Timeline, stores: list[VictoriaMetricsServer]):
        self.timeline, self.stores = timeline, stores
        self.scrapes = sorted(scrapes, key=lambda s: s.at)
        self.queues: dict[str, list[Scrape]] = {}
        for scrape in self.scrapes:
            self.queues.setdefault(scrape.process, []).append(scrape)
        self.served: dict[str, str] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.error: Exception | None = None
        feed = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                body = feed.metrics().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):  # noqa: N802 - vmalert's notifications: accepted and dropped
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.threads = [threading.Thread(target=self.server.serve_forever, daemon=True),
                        threading.Thread(target=self._push, daemon=True)]

    def start(self) -> "Feed":
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        if self.threads[0].is_alive():
            self.server.shutdown()   # waits for serve_forever to return: only once it runs
        self.server.server_close()

    def metrics(self) -> str:
        now = time.time()
        with self.lock:
            for process, queue in self.queues.items():
                if queue and self.timeline.wall(queue[0].at) <= now:
                    self.served[process] = exposition(queue.pop(0), self.timeline)
            return "".join(self.served.values())

    def _push(self) -> None:
        try:
            for scrape in self.scrapes:
                if self.stopped.wait(max(0.0, self.timeline.wall(scrape.at) - time.time())):
                    return
                text = exposition(scrape, self.timeline)
                for store in self.stores:
                    store.ingest(text)
        except Exception as exc:   # noqa: BLE001 - reported by the run, which polls `error`
            self.error = exc


def fnv64a(data: bytes) -> int:
    value = 0xcbf29ce484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return value


def vmalert_phase(path: str, group: str, interval_s: float) -> float:
    """The second of each interval at which vmalert 1.79 evaluates a group: it sleeps to `interval x ID / 2^64`
    past the interval's start, the group ID being FNV-64a of its file path, 0xff, its name and its datasource
    type (app/vmalert/group.go); checked against a live vmalert's `lastEvaluation`."""
    return interval_s * fnv64a(f"{path}\xff{group}prometheus".encode("latin-1")) / 2 ** 64


def _rule_file(engine: str, config: Config, backend: Backend, directory: Path) -> Path:
    """The rule file the backend's ruler loads (see `Backend`), at a path that puts vmalert's evaluations at
    the backend's phase (within half a second, or a twentieth of a shorter interval)."""
    target = "prometheus" if backend.latency_offset is None or backend.page_on_recorded else "vmalert"
    on_vmalert = backend.latency_offset is not None     # its MetricsQL has no native-histogram functions
    model = build_rules(load_engine(engine), dataclasses.replace(
        config, rules=dataclasses.replace(config.rules, target=target),
        histograms=dataclasses.replace(config.histograms, native=False) if on_vmalert else config.histograms))
    if backend.page_on_recorded:
        model = for_target(model, "vmalert")
    path = directory / f"{engine}.{backend.name}.rules.yaml"
    if backend.phase_s is not None:
        group = model["groups"][0]
        interval_s = seconds(group.get("interval") or config.rules.evaluation_interval)
        phase, within = backend.phase_s % interval_s, min(0.5, interval_s / 20)
        path = next(candidate for n in itertools.count()
                    if abs(vmalert_phase(str(candidate := directory / f"{engine}.{backend.name}.{n}.rules.yaml"),
                                         group["name"], interval_s) - phase) < within)
    path.write_text(render_rules(model))
    return path


def prometheus_phase(prometheus: PrometheusServer, interval_s: float) -> float:
    """The second of each interval at which Prometheus evaluates the rule group (from its hash, not ours to set)."""
    last = prometheus.rules()[0]["lastEvaluation"]
    whole, _, fraction = last.rstrip("Z").partition(".")
    stamp = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc).timestamp()
    return (stamp + float(f"0.{fraction or 0}")) % interval_s


def measure(engine: str, config: Config, seed: int, backends: tuple[Backend, ...] = BACKENDS,
            scenario: scenarios.Scenario | None = None, lead_s: float = LEAD_S, timeout_s: float = TIMEOUT_S,
            progress=lambda message: None) -> Result:
    """One live run: every backend on the same feed, until each has paged or `timeout_s` of live feed."""
    scenario = scenario or scenarios.build(SCENARIO)
    first = scenarios.first_preemption(scenario, {engine: load_engine(engine)}, seed)[engine]
    if first is None:
        raise ValueError(f"{scenario.name} seed {seed}: {engine} never preempts, there is no page to wait for")
    scrapes = simulate(engine, seed, scenario)
    instance = scenario.affected_replica().instance(engine, scenario.models[0].name)
    interval = config.rules.evaluation_interval
    fired: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="llmdash-delay-") as tmp, ExitStack() as stack:
        directory = Path(tmp)
        timeline = Timeline.plan(first, time.time(), lead_s)
        backfill = directory / "backfill.om"
        backfill.write_text(openmetrics([s for s in scrapes if s.at < timeline.cut_s], timeline))
        live = [s for s in scrapes if s.at >= timeline.cut_s]
        stores = [stack.enter_context(VictoriaMetricsServer(b.latency_offset)) for b in backends
                  if b.latency_offset is not None]
        for store in stores:
            store.backfill(backfill)
        feed = Feed(live, timeline, stores)
        stack.callback(feed.stop)
        rulers: dict[str, str] = {}
        if PROMETHEUS in backends:
            prometheus = PrometheusServer((_rule_file(engine, config, PROMETHEUS, directory),), interval,
                                          PROMETHEUS_SCRAPE, [{"job_name": "llmdash-live", "honor_labels": True,
                                                               "static_configs": [{"targets": [feed.url[7:]]}]}])
            stack.callback(prometheus.stop)
            prometheus.backfill(backfill)
            prometheus.start()
            rulers[PROMETHEUS.name] = prometheus.url
        for backend, store in zip([b for b in backends if b.latency_offset is not None], stores):
            rules = _rule_file(engine, config, backend, directory)
            rulers[backend.name] = stack.enter_context(VmalertServer([rules], store, feed.url, interval,
                                                                     backend.query_time_alignment)).url
        feed.start()
        progress(f"{engine} seed {seed}: live from {lead_s:g}s before the first preemption, on {', '.join(rulers)}")
        session = stack.enter_context(requests.Session())
        deadline = time.time() + timeout_s
        while len(fired) < len(rulers) and time.time() < deadline and feed.error is None:
            for name, url in rulers.items():
                if name not in fired and firing(session.get(f"{url}/api/v1/alerts", timeout=10).json(),
                                                Alert.PREEMPTIONS_HIGH, instance):
                    fired[name] = time.time()
                    progress(f"{engine} seed {seed}: paged on {name} {timeline.delay_s(fired[name]):+.0f}s "
                             "after the first preemption")
            time.sleep(POLL_S)
        if feed.error is not None:
            raise feed.error
        phase = prometheus_phase(prometheus, seconds(interval)) if PROMETHEUS in backends else None
    return Result(seed, engine, first, tuple((b.name, timeline.delay_s(fired[b.name]) if b.name in fired else None)
                                             for b in backends), phase)


def run(engines: tuple[str, ...], config: Config, seeds: tuple[int, ...] = SEEDS,
        progress=lambda message: None) -> list[Result]:
    """Every engine and seed, the seeds of an engine at once (each run mostly waits for the wall clock)."""
    results = []
    for engine in engines:
        with ThreadPoolExecutor(max_workers=len(seeds)) as pool:
            results += pool.map(lambda seed: measure(engine, config, seed, progress=progress), seeds)
    return results


def _seconds(value: float | None) -> str:
    return "missed" if value is None else f"{value:+.0f} s"


def table(results: list[Result], config: Config | None = None) -> str:
    """Markdown: one row per engine and backend, the page delay per seed and its difference to Prometheus."""
    config = config or Config()
    seeds = sorted({r.seed for r in results})
    engines = list(dict.fromkeys(r.engine for r in results))
    lines = [f"Live, at the wall clock: {SCENARIO}, the page `{Alert.PREEMPTIONS_HIGH}` for the collapsing replica; "
             f"seconds from its first preemption, rules evaluated every {config.rules.evaluation_interval}. "
             f"Prometheus {PROMETHEUS_VERSION} evaluates the default rule file, vmalert {VMALERT_VERSION} the "
             "`rules.target: vmalert` one against its VictoriaMetrics. *Evaluates at*: the second of each "
             "interval the ruler evaluates at (Prometheus: per seed, from its group's hash).", "",
             "| engine | backend | latency offset | evaluates at | " + " | ".join(f"seed {s}" for s in seeds)
             + " | median | minus Prometheus (median) |", "|---|---|---|---|" + "---|" * (len(seeds) + 2)]
    for engine in engines:
        runs = {r.seed: r for r in results if r.engine == engine}
        base = [runs[s].delay(PROMETHEUS) for s in seeds]
        for backend in BACKENDS:
            delays = [runs[s].delay(backend) for s in seeds]
            known = [d for d in delays if d is not None]
            diffs = [d - b for d, b in zip(delays, base) if d is not None and b is not None]
            phase = (f"{backend.phase_s:.0f} s" if backend.phase_s is not None else " / ".join(
                "?" if runs[s].prometheus_phase_s is None else f"{runs[s].prometheus_phase_s:.0f}" for s in seeds)
                + " s")
            lines.append(f"| {engine} | {backend.label} | {backend.latency_offset or '–'} | {phase} | "
                         + " | ".join(map(_seconds, delays))
                         + f" | {_seconds(statistics.median(known) if known else None)} | "
                         + (f"{statistics.median(diffs):+.0f} s" if diffs and backend != PROMETHEUS else "–") + " |")
    return "\n".join(lines) + "\n"
