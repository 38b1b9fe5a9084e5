"""The engine catalogs the tests expect, written out by hand so that adding or dropping an engine
is a deliberate change the tests notice (tests/engines/test_catalog.py checks it against engines/)."""

import shutil
from pathlib import Path

import pytest

from llmdash.engines.catalog import CATALOG_DIR, load_catalog
from llmdash.errors import LlmdashError

ENGINES = ["dynamo", "llama-cpp", "lmdeploy", "nim", "ray-serve-vllm", "sglang", "tensorrt-llm-serve",
           "tensorrt-llm-triton", "tgi", "vllm"]


def copy_catalog(directory: Path, engine: str = "vllm") -> Path:
    """A private copy of `engine`'s shipped catalog in `directory`, for a test to break."""
    target = directory / f"{engine}.yaml"
    shutil.copy(CATALOG_DIR / f"{engine}.yaml", target)
    return target


def refused(path: Path) -> str:
    """The one-line error loading the catalog at `path` gives (it must be refused, and name the file first)."""
    with pytest.raises(LlmdashError) as caught:
        load_catalog(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    return message
