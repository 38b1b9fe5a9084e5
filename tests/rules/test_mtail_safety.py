"""What a catalog puts into an mtail program stays what it means there, proven by Debian's real mtail:
catalog text in comments stays one comment line, a `/` in a pattern does not end the regex literal,
a pattern mtail's Go regexp (RE2) refuses is refused at load, and checking an example line against
a pattern takes bounded time whatever the pattern."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import pytest
import yaml

from llmdash.engines.catalog import CATALOG_DIR, load_catalog, load_engine
from llmdash.errors import LlmdashError
from llmdash.lab import mtail
from llmdash.lab.promserver import find_binary
from llmdash.rules.mtail import mtail_program
from llmdash.vocabulary import LOG_PREEMPTIONS
from tests.support.catalogs import refused

LINE = ("WARNING 01-01 12:00:09 [vllm/core/scheduler.py:1769] Sequence group 77 is preempted by "
        "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end "
        "performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
        "total_num_cumulative_preemption=51")
SHORT_LINE = LINE.replace("vllm/core/", "")   # as vLLM logs it when installed from a wheel


@pytest.fixture(scope="module")
def mtail_binary():
    try:
        return find_binary("mtail", mtail.INSTALL_HINT)
    except LlmdashError as exc:
        pytest.fail(f"the mtail tests need Debian's mtail: {exc}", pytrace=False)


def vllm_copy(directory: Path, title: str | None = None, **pattern: str) -> Path:
    """vLLM's catalog with its title, or fields of its `v0-preempted` log pattern, replaced."""
    data = yaml.safe_load((CATALOG_DIR / "vllm.yaml").read_text())
    data["logs"]["v0-preempted"].update(pattern)
    if title is not None:
        data["title"] = title
    path = directory / "vllm.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def replaced(field: str, old: str, new: str) -> str:
    """vLLM's `v0-preempted` `field` with `old` replaced by `new` once."""
    value = load_engine("vllm").log_patterns[0].__getattribute__(field)
    assert old in value
    return value.replace(old, new, 1)


def write_program(directory: Path, text: str) -> Path:
    progs = directory / "progs"
    progs.mkdir()
    (progs / "vllm.mtail").write_text(text)
    return progs


def counted(progs: Path, directory: Path, line: str) -> dict[str, float]:
    log = directory / "engine.log"
    log.write_text(line + "\n")
    text = mtail.one_shot(progs, [log])
    return {m[1]: float(m[2]) for m in re.finditer(rf'^{LOG_PREEMPTIONS}\{{llm_engine="([^"]+)"\}} (\S+)$', text, re.M)}


# ---- catalog text in comments ----------------------------------------------------------------------

INJECTED = "checked.\ncounter evil\n/Sequence/ {\n  evil++\n}\n#"


@pytest.mark.parametrize("field, key", [("note", "logs.v0-preempted.note"), ("source", "logs.v0-preempted.source"),
                                        ("title", "title")])
def test_a_line_break_in_text_that_reaches_mtail_is_refused_at_load(tmp_path, field, key):
    path = vllm_copy(tmp_path, title=INJECTED) if field == "title" else vllm_copy(tmp_path, **{field: INJECTED})
    assert f": {key}: must be one line" in refused(path)


def test_the_generator_keeps_any_text_in_its_comment_line(mtail_binary, tmp_path):
    """Even a spec built in code (never loaded) cannot put program code into a comment."""
    spec = load_engine("vllm")
    pattern = dataclasses.replace(spec.log_patterns[0], note=INJECTED, source="a\r\nb")
    spec = dataclasses.replace(spec, title="vLLM\ncounter evil2", log_patterns=(pattern,))
    program = mtail_program(spec)
    code = [line for line in program.splitlines() if line.strip() and not line.startswith("#")]
    assert code[0] == f"counter {LOG_PREEMPTIONS} by llm_engine" and "counter" not in " ".join(code[1:])
    progs = write_program(tmp_path, program)
    mtail.compile_programs(progs)
    assert counted(progs, tmp_path, SHORT_LINE) == {"vllm": 51.0}


# ---- a `/` in a pattern --------------------------------------------------------------------------

@pytest.mark.parametrize("path_regex", [r"(?:[\w.]+\/)*", r"(?:[\w.]+/)*", r"(?:[\w.]+[/])*", r"(?:[\w.]+\x2f)*"])
def test_a_slash_in_a_pattern_matches_a_slash(mtail_binary, tmp_path, path_regex):
    """vLLM logs `[vllm/core/scheduler.py:1769]` when run from a source tree: a pattern reads the path."""
    path = vllm_copy(tmp_path, prefix=replaced("prefix", r"\[?scheduler", r"\[?" + path_regex + "scheduler"),
                     example=LINE)
    progs = write_program(tmp_path, mtail_program(load_catalog(path)))
    mtail.compile_programs(progs)
    assert counted(progs, tmp_path, LINE) == {"vllm": 51.0}
    assert counted(progs, tmp_path, SHORT_LINE) == {"vllm": 51.0}


def test_an_escaped_backslash_before_a_slash_stays_a_backslash_and_a_slash(mtail_binary, tmp_path):
    """`\\/` after `\\\\` in a pattern: a literal backslash, then a slash (a log that writes `vllm\\/core`)."""
    escaped = LINE.replace("vllm/core/", "vllm\\/core\\/")
    path = vllm_copy(tmp_path, prefix=replaced("prefix", r"\[?scheduler", r"\[?(?:\w+\\\/)*scheduler"),
                     example=escaped)
    progs = write_program(tmp_path, mtail_program(load_catalog(path)))
    mtail.compile_programs(progs)
    assert counted(progs, tmp_path, escaped) == {"vllm": 51.0}
    assert counted(progs, tmp_path, LINE) == {}   # a plain / is not a backslash and a /: not even a prefix


# ---- patterns mtail's Go regexp refuses --------------------------------------------------------------

NOT_IN_GO = [
    ("(?=Sequence)Sequence", "not an RE2 regular expression"),       # lookahead
    ("(?<!x)Sequence", "not an RE2 regular expression"),             # lookbehind
    ("(S)equence(?:\\1)?", "not an RE2 regular expression"),         # backreference
    ("(?>Sequence)", "not an RE2 regular expression"),               # atomic group
    ("Seq++uence", "not an RE2 regular expression"),                 # possessive
    ("(S)?(?(1)equence|Sequence)", "not an RE2 regular expression"),  # conditional
    ("(?<word>Sequence)", "(?<name>...) group"),                     # RE2 has it, Go 1.19 does not
    ("\\C?Sequence", "\\C (any byte)"),                               # RE2 has it, Go does not
]


@pytest.mark.parametrize("construct, problem", NOT_IN_GO)
def test_what_mtail_refuses_the_catalog_refuses(mtail_binary, tmp_path, construct, problem):
    message = replaced("message", "Sequence", construct)
    spec = load_engine("vllm")
    unchecked = dataclasses.replace(spec, log_patterns=(dataclasses.replace(spec.log_patterns[0], message=message),))
    with pytest.raises(LlmdashError, match="could not compile"):      # the real mtail refuses it ...
        mtail.compile_programs(write_program(tmp_path, mtail_program(unchecked)))
    refusal = refused(vllm_copy(tmp_path, message=message))
    assert ": logs.v0-preempted: " in refusal and problem in refusal   # ... and so does the catalog


def test_a_class_holding_what_go_lacks_elsewhere_is_accepted(mtail_binary, tmp_path):
    """`(?<` is three plain characters in a class, and `[[:alpha:]]` a named class in one."""
    path = vllm_copy(tmp_path, message=replaced("message", "Sequence", "[(?<]?[[:alpha:]]equence"))
    progs = write_program(tmp_path, mtail_program(load_catalog(path)))
    mtail.compile_programs(progs)
    assert counted(progs, tmp_path, SHORT_LINE) == {"vllm": 51.0}


def test_a_prefix_that_only_balances_with_its_message_is_refused(tmp_path):
    """mtail also matches every prefix alone (the line that creates the series at 0)."""
    path = vllm_copy(tmp_path, prefix=replaced("prefix", r"\[?scheduler", r"(\[?scheduler"),
                     message=")" + load_engine("vllm").log_patterns[0].message)
    assert ": logs.v0-preempted.prefix: not an RE2 regular expression" in refused(path)


# ---- bounded time -------------------------------------------------------------------------------

def test_an_example_against_a_pathological_pattern_is_checked_in_bounded_time(tmp_path):
    """`(x+x+)+y` backtracks exponentially in Python's re (28 x's: seconds); RE2 matches in linear time."""
    load_catalog(vllm_copy(tmp_path, title="vLLM warm-up"))   # jsonschema imported, the schema compiled
    path = vllm_copy(tmp_path, prefix="(x+x+)+y", message=r"(?P<n>\d+)", example="x" * 28)
    started = time.monotonic()
    message = refused(path)
    assert time.monotonic() - started < 1.0
    assert ": logs.v0-preempted.example: the pattern does not count this line" in message
