"""The per-engine emitters: one module per engine, every one registered, each for an engine the catalog knows."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from llmdash.engines.catalog import load_all
from llmdash.lab import emitters
from llmdash.lab.emitters import EMITTERS, emitter_class
from llmdash.lab.emitters.base import EngineMetrics


def _defined_emitters() -> dict[str, list[type[EngineMetrics]]]:
    """Module name -> the EngineMetrics subclasses it defines."""
    found = {}
    for info in pkgutil.iter_modules(emitters.__path__):
        module = importlib.import_module(f"{emitters.__name__}.{info.name}")
        found[info.name] = [cls for _, cls in inspect.getmembers(module, inspect.isclass)
                            if issubclass(cls, EngineMetrics) and cls is not EngineMetrics
                            and cls.__module__ == module.__name__]
    return found


def test_each_engine_module_defines_one_emitter_and_every_one_is_registered():
    defined = {name: classes for name, classes in _defined_emitters().items() if name != "base"}
    assert all(len(classes) == 1 for classes in defined.values()), defined
    assert sorted(EMITTERS.values(), key=str) == sorted((c for cs in defined.values() for c in cs), key=str)


def test_every_registered_emitter_is_for_a_catalog_engine_and_variants_use_their_base():
    specs = load_all()
    assert set(EMITTERS) <= set(specs)
    for spec in specs.values():
        if spec.base is not None and spec.base in EMITTERS:
            assert emitter_class(spec) is EMITTERS[spec.base]
