"""Every alert states its unit and when it resolves (rules/lifecycle.py), and the unit's labels are the catalogs'."""

from llmdash.config import Config
from llmdash.engines.catalog import load_engine
from llmdash.rules.lifecycle import LIFECYCLE, unit_labels
from llmdash.vocabulary import Alert


def test_every_alert_has_a_unit_and_an_end():
    assert set(LIFECYCLE) == set(Alert)
    assert all(entry.about and entry.resolves for entry in LIFECYCLE.values())


def test_the_pages_unit_is_the_replica_on_ray_serve_and_the_engine_core_on_vllm():
    config = Config()
    assert unit_labels(Alert.PREEMPTIONS_HIGH, load_engine("ray-serve-vllm"), config) == (
        "cluster", "namespace", "model_name", "instance", "ReplicaId", "engine")
    assert unit_labels(Alert.PREEMPTIONS_CHRONIC, load_engine("vllm"), config) == (
        "cluster", "namespace", "model_name", "instance", "engine")
    assert unit_labels(Alert.DIVERGENCE, load_engine("dynamo"), config) == ("cluster", "namespace", "model_name")
    assert unit_labels(Alert.SIGNAL_MISSING, load_engine("vllm"), config) == (
        "cluster", "namespace", "model_name", "instance", "signal")
