"""What each engine offers, as one markdown table row per catalog: `llmdash engines` prints it.

Why: docs/engines.md's engine table and the catalogs must not drift apart; this is the table,
read from the catalogs (series exactly as scraped, with the versions a fallback covers).
"""

from __future__ import annotations

from llmdash.engines.model import EngineSpec, Source
from llmdash.vocabulary import Role

HEADER = ("| Engine: title (versions covered) | Throughput | Latency | Preemption signal |\n"
          "|---|---|---|---|")
LATENCY_ROLES = {Role.TTFT: "TTFT", Role.ITL: "ITL", Role.TPOT: "TPOT", Role.TOKEN_LATENCY_MEAN: "mean time per token"}


def _source(spec: EngineSpec, source: Source) -> str:
    """`series{label="value"}`, with the versions it covers when not all of the engine's."""
    matchers = source.match_text.replace("|", "\\|")  # a bare | would split the markdown table's cell
    text = f"`{source.series}{{{matchers}}}`" if matchers else f"`{source.series}`"
    if source.per is not None:
        text += f" ÷ `{source.per.name}`"
    metric = source.metric
    if metric.exposed_until is not None:
        return f"{text} (before {metric.exposed_until})"
    if metric.since > spec.supported_from:
        return f"{text} ({metric.since}+)"
    return text


def _sources(spec: EngineSpec, role: str) -> str:
    return " or ".join(_source(spec, s) for s in spec.signal(role).sources)


def row(spec: EngineSpec) -> str:
    latency = "; ".join(f"{name} {_sources(spec, role)}" for role, name in LATENCY_ROLES.items() if spec.has(role))
    if spec.has(Role.PREEMPTIONS):
        kind = spec.signal(Role.PREEMPTIONS).sources[0].kind
        preemption = f"{kind} {_sources(spec, Role.PREEMPTIONS)}"
    else:
        preemption = "none: divergence only"
    return (f"| `{spec.id}`: {spec.title} {spec.versions} | {_sources(spec, Role.THROUGHPUT)} | {latency or 'none'} "
            f"| {preemption} |")


def engine_table(specs: dict[str, EngineSpec]) -> str:
    return "\n".join([HEADER] + [row(spec) for spec in specs.values()])
