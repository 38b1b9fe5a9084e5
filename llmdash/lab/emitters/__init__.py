"""Per-engine metric emitters, one module per engine, registered here.

Each emitter exposes every series its engine's catalog lists for the era it runs in (`llmdash.lab.eras`),
with that catalog's names, labels and buckets, and updates them as the engine does (docs/engines.md). A
variant (NIM, Ray Serve LLM) runs its base engine's emitter under its own names. Adding an engine: a
module here with its `EngineMetrics` subclass, and one entry in `EMITTERS`.
"""

from __future__ import annotations

from llmdash.engines.model import EngineSpec
from llmdash.lab.emitters.base import EngineMetrics
from llmdash.lab.emitters.dynamo import DynamoMetrics
from llmdash.lab.emitters.llama_cpp import LlamaCppMetrics
from llmdash.lab.emitters.lmdeploy import LmdeployMetrics
from llmdash.lab.emitters.sglang import SglangMetrics
from llmdash.lab.emitters.tgi import TgiMetrics
from llmdash.lab.emitters.triton import TritonMetrics
from llmdash.lab.emitters.trtllm_serve import TrtllmServeMetrics
from llmdash.lab.emitters.vllm import VllmMetrics

EMITTERS: dict[str, type[EngineMetrics]] = {
    cls.engine: cls for cls in (VllmMetrics, SglangMetrics, TrtllmServeMetrics, TritonMetrics, LmdeployMetrics,
                                DynamoMetrics, TgiMetrics, LlamaCppMetrics)
}


def emitter_class(spec: EngineSpec) -> type[EngineMetrics] | None:
    """The emitter of an engine, or of the engine a variant derives from (same events, renamed series)."""
    return EMITTERS.get(spec.id) or EMITTERS.get(spec.base or "")


def simulated_engines(specs: dict[str, EngineSpec]) -> list[str]:
    """The engines among `specs` the simulator can emit, sorted."""
    return sorted(engine for engine, spec in specs.items() if emitter_class(spec))
