"""Reading the YAML a user hands us (`llmdash.yaml`, engine catalogs) without trusting it.

The file is bounded before it is parsed: a regular file (a FIFO would block the read) of at
most `MAX_BYTES`, UTF-8 text. The parsed document is bounded before it is turned into Python
objects: at most `MAX_DEPTH` levels and `MAX_NODES` nodes once aliases are expanded (a
400-byte alias bomb otherwise becomes millions of nodes), no recursive aliases, no duplicate
keys (YAML would silently keep the last one), no integer too long to convert. Every refusal
is one `LlmdashError` line naming the file and, where there is one, the line.
"""

from __future__ import annotations

import codecs
import os
import reprlib
import stat
from pathlib import Path

import yaml

from llmdash.errors import LlmdashError

MAX_BYTES = 1 << 20
MAX_DEPTH = 50
MAX_NODES = 100_000
ECHO_CHARS = 80
MERGE_TAG = "tag:yaml.org,2002:merge"

_echo = reprlib.Repr()  # keyword arguments only from Python 3.12
_echo.maxlevel, _echo.maxdict, _echo.maxlist, _echo.maxtuple, _echo.maxset = 2, 4, 6, 6, 6
_echo.maxstring = _echo.maxother = ECHO_CHARS
_echo.maxlong = 40


def shorten(value) -> str:
    """`repr(value)` cut to about ECHO_CHARS, for echoing user input in one error line."""
    text = _echo.repr(value)
    return text if len(text) <= ECHO_CHARS else text[: ECHO_CHARS - 3] + "..."


class StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The safe loader (C-accelerated when libyaml is there) refusing duplicate keys and overlong integers."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first_line: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    line = first_line.get(key)
                except TypeError:  # an unhashable key: the base constructor refuses it
                    continue
                if line is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {shorten(key)} (first on line {line})", key_node.start_mark)
                first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # Python refuses to convert integers of more than 4300 digits
            raise yaml.constructor.ConstructorError(
                None, None, f"integer {shorten(node.value)} is too long", node.start_mark) from None


StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)


def read_yaml(path: Path, what: str):
    """The document in `path` (None when empty); `what` names the file in errors ("config", "catalog")."""
    text = read_text(Path(path), what)
    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node, path)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}:" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise LlmdashError(f"{path}:{where} malformed YAML ({problem[:200]})") from None
    except RecursionError:  # the pure-Python parser, where libyaml (which stops at 1000 levels) is missing
        raise LlmdashError(f"{path}: nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


def read_text(path: Path, what: str, limit: int = MAX_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes; every refusal is one line naming `path`."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise LlmdashError(f"{path}: cannot read {what} ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LlmdashError(f"{path}: {what} is not a regular file")
        if info.st_size > limit:
            raise LlmdashError(f"{path}: {what} is {info.st_size} bytes, more than the {limit} allowed")
        try:
            raw = handle.read(limit + 1)
        except OSError as exc:
            raise LlmdashError(f"{path}: cannot read {what} ({exc.strerror})") from None
    if len(raw) > limit:
        raise LlmdashError(f"{path}: {what} is more than the {limit} bytes allowed")
    if raw.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise LlmdashError(f"{path}: {what} is UTF-16 or UTF-32 text; save it as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise LlmdashError(f"{path}: line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x})") from None


def _children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_size(root, path: Path) -> None:
    """Refuse recursive aliases, nesting deeper than MAX_DEPTH and more than MAX_NODES nodes with
    aliases expanded; measured on the node graph (each node once), never by expanding it."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            children = _children(node)
            size[key] = 1 + sum(size[id(c)] for c in children)
            height[key] = 1 + max((height[id(c)] for c in children), default=0)
            open_nodes.discard(key)
            line = node.start_mark.line + 1
            if size[key] > MAX_NODES:
                raise LlmdashError(f"{path}: line {line}: more than {MAX_NODES} values once aliases are expanded")
            if height[key] > MAX_DEPTH:
                raise LlmdashError(f"{path}: line {line}: nested deeper than {MAX_DEPTH} levels")
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise LlmdashError(f"{path}: line {node.start_mark.line + 1}: an alias refers to its own anchor")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
