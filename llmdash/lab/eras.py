"""Which name, labels and buckets each catalog series is exported under in an engine era.

Why: a replica before a rename must expose the old names, or dashboards' `new or old` fallbacks are never
exercised. An era is `new` (the catalog's newest names), `old` (for every signal with renamed sources, its
oldest source instead: see `era_names`) or a release version such as "0.4.3", which exports exactly the
series, labels and bucket bounds the catalog gives that release (see `version_names`). A variant (NIM,
Ray Serve LLM) re-exports its base engine's series under its own names (see `stand_ins`).
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from llmdash.engines.catalog import load_catalog
from llmdash.engines.model import EngineSpec

NEW, OLD = "new", "old"   # metric-name eras: the catalog's newest names, or each signal's oldest source
ERAS = (NEW, OLD)         # ... or a release version ("0.4.3"): what the catalog says that release exports


def era_names(spec: EngineSpec, era: str) -> dict[str, str | None]:
    """Emitted name -> the name it is exported under in `era`, None when that era does not export it.

    `old` mimics a replica before the renames: for every signal whose sources (newest first) have
    fallbacks, the newer sources give way to the oldest one. A newer source with the oldest one's type
    and labels is the same series renamed (vLLM's ITL, KV usage); any other (SGLang's realtime
    counter) is simply absent, since the emitter already exports the oldest source itself.
    """
    if era not in ERAS:
        raise ValueError(f"unknown metric-name era {era!r} (known: {', '.join(ERAS)})")
    names: dict[str, str | None] = {}
    if era == OLD:
        for signal in spec.signals.values():
            oldest = signal.sources[-1].metric if signal.sources else None
            for source in signal.sources[:-1]:
                same = (source.metric.type, source.metric.labels) == (oldest.type, oldest.labels)
                names[source.metric.name] = oldest.name if same else None
    return names


def version_names(spec: EngineSpec, version: Version) -> dict[str, str | None]:
    """Emitted name -> the name `version` exports it under, None when that release does not export it.

    A source the release does not export gives way to the next fallback of its signal that the release
    does export, when that one has the same type and labels (the same series under an older name);
    otherwise it is absent, as in the `old` era.
    """
    names: dict[str, str | None] = {}
    for signal in spec.signals.values():
        for i, source in enumerate(signal.sources):
            if source.metric.exposed_in(version, version):
                continue
            fallback = next((s.metric for s in signal.sources[i + 1:] if s.metric.exposed_in(version, version)), None)
            same = (fallback is not None
                    and (source.metric.type, source.metric.labels) == (fallback.type, fallback.labels))
            names[source.metric.name] = fallback.name if same else None
    return names


def era_version(spec: EngineSpec, era: str) -> Version:
    """The release whose labels and bucket bounds an era exports: the newest for the name eras."""
    if era in ERAS:
        return spec.supported_to
    try:
        return Version(era)
    except InvalidVersion:
        raise ValueError(f"unknown metric-name era {era!r} (known: {', '.join(ERAS)}, or a release version)") from None


def stand_ins(spec: EngineSpec) -> dict[str, str]:
    """For a variant: each base series it does not export -> its own series standing in for it, the
    newest later source of the same base signal with the same type and labels (NIM, re-exporting
    vLLM releases before `inter_token_latency_seconds`, carries those samples as the older
    `time_per_output_token_seconds`, as vLLM itself did)."""
    if spec.base is None:
        return {}
    base = load_catalog(spec.path.parent / f"{spec.base}.yaml")
    out = {}
    for signal in base.signals.values():
        for i, source in enumerate(signal.sources):
            missing = source.metric
            if spec.exported_name(missing.name) is not None:
                continue
            for later in signal.sources[i + 1:]:
                standing = spec.exported_name(later.metric.name)
                if standing and (later.metric.type, later.metric.labels) == (missing.type, missing.labels):
                    out[missing.name] = standing
                    break
    return out
