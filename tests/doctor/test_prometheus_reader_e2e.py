"""The doctor's questions on a real Prometheus, the oldest supported and the current: every kind of series with a
sample in the last hour is read (a model gone 40 minutes ago, a bucket bound exported until half an hour ago),
nothing older, and no answer lists a replica's series unless its replicas are counted."""

from __future__ import annotations

import time

import pytest

from llmdash.doctor.fetch import Client
from llmdash.doctor.inventory import PrometheusReader, catalog_series
from llmdash.engines.catalog import load_engine
from llmdash.lab.promserver import PrometheusServer

pytestmark = pytest.mark.e2e

TTFT = "vllm:time_to_first_token_seconds_bucket"
SCRAPE_S = 15


def history(now: float) -> str:
    """OpenMetrics for promtool: (model, replica, bounds, from, until) as seconds before `now`."""
    spans = [("m", r, ("0.1", "0.5", "+Inf"), 3500, 0) for r in range(3)] + [
        ("m", 0, ("0.25",), 3500, 1800),            # replica 0's buckets until it was restarted with others
        ("gone", 9, ("0.1", "+Inf"), 3500, 2400),   # a model taken down 40 minutes ago
        ("old", 8, ("0.1", "+Inf"), 7000, 4300)]    # last sampled 72 minutes ago
    lines = []
    for model, replica, bounds, since, until in spans:
        for le in bounds:
            head = (f'{TTFT}{{engine="0",model_name="{model}",job="vllm",instance="10.0.0.{replica}:8000",'
                    f'pod="vllm-{replica}",le="{le}"}}')
            lines += [f"{head} {k} {now - since + k * SCRAPE_S:.0f}" for k in range(int((since - until) / SCRAPE_S))]
    return "\n".join(lines) + "\n# EOF\n"


def test_the_last_hour_is_read_by_kind_on_a_real_prometheus(tmp_path, stack):
    server = PrometheusServer(stack=stack)
    try:
        path = tmp_path / "history.om"
        path.write_text(history(time.time()))
        server.backfill(path)
        server.start()
        wanted = catalog_series([load_engine("vllm")], {})
        client = Client(60)
        try:
            by_kind = PrometheusReader(server.url, {}, client, "instance").inventory(wanted)
            by_replica = PrometheusReader(server.url, {}, client, "instance").inventory(wanted, {TTFT: {TTFT}})
        finally:
            client.close()
    finally:
        server.stop()
    assert sorted((s["model_name"], s["le"]) for s in by_kind.series[TTFT]) == [
        ("gone", "+Inf"), ("gone", "0.1"), ("m", "+Inf"), ("m", "0.1"), ("m", "0.25"), ("m", "0.5")]
    assert all(set(s) == {"engine", "model_name", "le"} for s in by_kind.series[TTFT])
    assert sorted((s["instance"], s["le"]) for s in by_replica.series[TTFT]) == sorted(
        [(f"10.0.0.{r}:8000", le) for r in range(3) for le in ("0.1", "0.5", "+Inf")]
        + [("10.0.0.0:8000", "0.25"), ("10.0.0.9:8000", "0.1"), ("10.0.0.9:8000", "+Inf")])
