"""A variant's catalog (`derive:`): its base's, with every series renamed, the ones it does not
re-export dropped, and versions limited to the base releases it re-exports.

Why: NIM and Ray Serve re-export vLLM's series under other names; writing their catalogs by hand
would copy every fact of vLLM's and let the copies drift. The variant says only what differs, and
the catalog it derives is checked like any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmdash.engines.model import EngineSpec

if TYPE_CHECKING:
    from llmdash.engines.catalog import _Parser


def derive(data: dict, base: dict, base_spec: EngineSpec, parser: _Parser) -> tuple[dict, dict]:
    """(the derived plain catalog, the variant's own EngineSpec fields) from a schema-valid variant
    `data`, its base's raw catalog `base` and the base's checked spec.

    Each base series is read under every name in `rename` that applies to it (newest first); a
    signal's sources become each rename's copy of the base sources in turn, so they fall back per
    replica like any rename. `add_labels` are labels the variant's exporter puts on every series;
    `buckets` the bounds of histograms it declares with other bounds than its base's newest.
    """
    derive_ = data["derive"]
    base_id = base_spec.id
    renames = derive_["rename"]
    drop = derive_.get("drop", [])
    if not all(name in base["metrics"] for name in drop):
        raise parser.fail("derive.drop", f"expected a list of {base_id}'s series names")
    generic = derive_.get("generic", False)
    buckets = derive_.get("buckets", {})
    histograms = {name for name, metric in base_spec.metrics.items() if metric.type == "histogram"}
    if not set(buckets) <= histograms:
        raise parser.fail("derive.buckets", f"expected a mapping of {base_id}'s histogram names to bucket bounds")
    added = derive_.get("add_labels", [])
    versions = derive_.get("versions", base["supported"])
    first = parser.version(versions["from"], "derive.versions.from")
    last = parser.version(versions["to"], "derive.versions.to")
    if not base_spec.supported_from <= first <= last <= base_spec.supported_to:
        raise parser.fail("derive.versions", f"{first}–{last} is not within {base_id}'s "
                          f"{base_spec.supported_from}–{base_spec.supported_to}")

    def renamed(base_name: str) -> list[str | None]:
        """The name under each rename, None where its prefix does not apply."""
        out = [r["to"] + base_name[len(r["prefix"]):] if base_name.startswith(r["prefix"]) else None
               for r in renames]
        if not any(out):
            raise parser.fail("derive.rename", f"no prefix applies to {base_id}'s {base_name}")
        return out

    def names(base_name: str) -> list[str]:
        return list(dict.fromkeys(n for n in renamed(base_name) if n))

    kept = [name for name, metric in base_spec.metrics.items()
            if name not in drop and metric.exposed_in(first, last)]
    metrics = {new: {**base["metrics"][n], "labels": list(dict.fromkeys(base["metrics"][n]["labels"] + added)),
                     **({"buckets": buckets[n]} if n in buckets else {}), **({"generic": True} if generic else {})}
               for n in kept for new in names(n)}
    notes = data.get("notes", {})
    signals = {}
    for role, body in base["signals"].items():
        copies = []
        for i in range(len(renames)):
            for src in body["sources"]:
                if src["metric"] not in kept or src.get("per", src["metric"]) not in kept:
                    continue
                copy = {**src, "metric": renamed(src["metric"])[i],
                        **({"per": renamed(src["per"])[i]} if "per" in src else {})}
                if copy["metric"] and copy.get("per", True) and copy not in copies:
                    copies.append(copy)
        note = notes.get(role, body.get("note"))
        if body["sources"] and not copies and role not in notes:
            raise parser.fail(f"notes.{role}", f"every source of {base_id}'s {role} is dropped; say why here")
        signals[role] = {"sources": copies, **({"note": note} if note else {})}
    unknown = set(notes) - set(signals)
    if unknown:
        raise parser.fail(f"notes.{sorted(unknown)[0]}", f"{base_id} has no such signal")
    catalog = {**base, "engine": data["engine"], "title": data["title"], "metrics": metrics, "signals": signals,
               "supported": {"from": str(first), "to": str(last)}}
    if "selectors" in data:
        catalog["selectors"] = data["selectors"]
    if "ranks" in data:   # the deployment shape's own KV-cache unit (Ray Serve's replica), not its base's
        catalog["ranks"] = data["ranks"]
    # The base's routers export the base's names (production-stack's router writes `vllm:` gauges), not the
    # variant's renamed ones.
    catalog.pop("routers", None)
    # A variant's process may print its base's log lines in another format (NIM's containers, Ray's
    # workers), and which ones is unconfirmed: a variant counts no log lines.
    catalog.pop("logs", None)
    variant = {"releases": data["releases"], "base": base_id,
               "renames": tuple((n, tuple(names(n))) for n in kept), "added_labels": tuple(added)}
    return catalog, variant
