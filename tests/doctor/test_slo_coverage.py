"""`llmdash doctor`'s slo section on a fleet where some replicas cannot be counted (an inventory shaped by hand,
as a Prometheus lists its series): the replicas left out are named, with the coverage the rules record."""

from __future__ import annotations

from llmdash.config import Config, Objective, Slo
from llmdash.doctor.inventory import Inventory
from llmdash.doctor.slo import slo_checks
from llmdash.engines.catalog import load_engine


def test_replicas_without_the_target_bucket_are_named_with_the_coverage():
    """Three SGLang replicas as a Prometheus inventory lists them: two export the 1 s bound, one was started with
    `--bucket-time-to-first-token 0.5 2 5`. Two of three are counted (67 %); the third is named."""
    inventory = Inventory("http://127.0.0.1:9090")
    name = "sglang:time_to_first_token_seconds"
    default, custom = ("0.5", "1.0", "2.0"), ("0.5", "2.0", "5.0")
    for replica, bounds in (("r0", default), ("r1", default), ("r2", custom)):
        labels = {"instance": replica, "model_name": "chat"}
        for bound in (*bounds, "+Inf"):
            inventory.add(f"{name}_bucket", {**labels, "le": bound})
        inventory.add(f"{name}_count", labels)
    config = Config(engines=("sglang",), slo=Slo(objectives=(Objective(name="ttft", target_seconds=1.0),)))
    (check,) = slo_checks(inventory, load_engine("sglang"), config)
    assert check.found
    assert check.problems == [
        '1 of 3 replicas have no bucket at le="1.0", so the SLO leaves them out of its good and valid '
        "events (coverage 67 %, recorded as llm_slo_coverage:ratio; LLMServingSLOCoverageLow warns): "
        'model_name="chat", instance="r2"']
