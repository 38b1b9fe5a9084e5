"""Hostile and careless input: config and catalog values, YAML tricks, interrupted and parallel writes.

Each attack must end in one `error: ...` line with exit code 2 (or succeed), quickly, with
bounded output, and leave `generated/` or a provisioning directory either as it was or
completely rewritten.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest
import yaml

from llmdash.atomic import MANIFEST, regular_file_text
from llmdash.config import Config, load_config
from llmdash.engines.catalog import CATALOG_DIR, _Parser, load_catalog
from llmdash.errors import LlmdashError
from llmdash.inputs import MAX_BYTES
from tests.cli.test_cli import llmdash, snapshot
from tests.support.handshake import Halfway
from tests.support.paths import ROOT

pytestmark = pytest.mark.process   # runs the llmdash command in a fresh interpreter, as a user does

ENGINES = ("dynamo", "lmdeploy", "sglang", "tensorrt-llm-serve", "tensorrt-llm-triton", "vllm")


def float_keys(cls=Config, prefix="") -> list[str]:
    """Every float the config holds, as dotted keys (thresholds' warning/critical included)."""
    keys = []
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        if dataclasses.is_dataclass(hint):
            keys += float_keys(hint, f"{prefix}{field.name}.")
        elif hint is float or float in typing.get_args(hint):
            keys.append(f"{prefix}{field.name}")
    return keys


def nested(key: str, value: str) -> str:
    """`a.b.c: value` as block YAML."""
    parts = key.split(".")
    return "".join(f"{'  ' * depth}{part}:\n" for depth, part in enumerate(parts[:-1])) + \
        f"{'  ' * (len(parts) - 1)}{parts[-1]}: {value}\n"


def refused(tmp_path: Path, text: str) -> str:
    path = tmp_path / "llmdash.yaml"
    path.write_text(text)
    with pytest.raises(LlmdashError) as caught:
        load_config(path)
    message = str(caught.value)
    assert caught.value.exit_code == 2 and "\n" not in message and len(message) < 400
    return message


def assert_one_line_exit_2(result, *fragments: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr


# --- numbers ---------------------------------------------------------------------------------

def test_every_float_of_the_config_is_covered():
    assert {"thresholds.kv_usage.warning", "slo.itl_seconds", "divergence.min_tokens_per_second",
            "preemption.page_share", "preemption.paused_share", "grafana.read_timeout"} <= set(float_keys())


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "9" * 400])
@pytest.mark.parametrize("key", float_keys())
def test_nan_inf_and_huge_numbers_are_refused_naming_the_key(tmp_path, key, value):
    message = refused(tmp_path, nested(key, value))
    assert f": {key}: " in message


def test_nan_threshold_is_one_line_on_the_command_line(tmp_path):
    path = tmp_path / "llmdash.yaml"
    path.write_text("divergence:\n  latency_factor: .nan\n")
    out = tmp_path / "gen"
    assert_one_line_exit_2(llmdash("--config", str(path), "build", "--out", str(out)),
                           "divergence.latency_factor: expected a finite number")
    assert not out.exists()


def test_400_digit_integer_is_one_line(tmp_path):
    path = tmp_path / "llmdash.yaml"
    path.write_text(f"thresholds:\n  waiting_requests: {{warning: 10, critical: {'9' * 400}}}\n")
    result = llmdash("--config", str(path), "build", "--out", str(tmp_path / "gen"))
    assert_one_line_exit_2(result, "thresholds.waiting_requests.critical")
    assert len(result.stderr) < 300  # the number is not echoed whole


def test_integer_beyond_python_digit_limit_is_one_line(tmp_path):
    assert "too long" in refused(tmp_path, f"engines: {'9' * 5000}\n")


# --- durations and Grafana strings ----------------------------------------------------------

@pytest.mark.parametrize("key, value, problem", [
    ("rules.interval", "99999999999999999999d", "longer than Prometheus accepts"),
    ("rules.latency_alert_for", "106752d", "longer than Prometheus accepts"),
    ("divergence.alert_for", "9223372037s", "longer than Prometheus accepts"),
    ("divergence.window", "9" * 5000 + "m", "expected a Prometheus duration"),
    ("dashboard.refresh", "9" * 5000 + "s", "Grafana refresh interval"),
    ("divergence.annotation_step", "0s", "must be longer than 0s"),
    ("divergence.window", "0m", "must be longer than 0s"),
    ("divergence.baseline_resolution", "0s", "must be longer than 0s"),
    ("preemption.window", "0h", "must be longer than 0s"),
    ("rules.interval", "0s", "must be longer than 0s"),
    ("dashboard.refresh", "30 seconds", "Grafana refresh interval"),
    ("dashboard.refresh", "1s", "Grafana refresh interval"),
    ("dashboard.refresh", "0s", "Grafana refresh interval"),
    ("dashboard.time_from", "yesterday", "Grafana relative time"),
    ("dashboard.time_from", "now-", "Grafana relative time"),
    ("dashboard.time_from", "now-3 h", "Grafana relative time"),
])
def test_out_of_range_durations_and_grafana_strings_are_refused(tmp_path, key, value, problem):
    message = refused(tmp_path, nested(key, f'"{value}"'))
    assert f": {key}: " in message and problem in message


@pytest.mark.parametrize("key, value", [
    ("preemption.alert_for", "0s"), ("rules.latency_alert_for", "0s"),
    ("dashboard.refresh", "5m"), ("dashboard.refresh", "1h"), ("dashboard.refresh", '""'),
    ("dashboard.time_from", "now-7d"), ("dashboard.time_from", "now/d"), ("dashboard.time_from", "now-1d/d"),
])
def test_valid_durations_and_grafana_strings_are_accepted(tmp_path, key, value):
    path = tmp_path / "llmdash.yaml"
    path.write_text(nested(key, value))
    load_config(path)


def test_refresh_false_turns_auto_refresh_off(tmp_path):
    path = tmp_path / "llmdash.yaml"
    path.write_text("dashboard:\n  refresh: false\n")
    assert load_config(path).dashboard.refresh == ""


# --- YAML tricks -----------------------------------------------------------------------------

def test_duplicate_config_key_names_key_and_lines(tmp_path):
    message = refused(tmp_path, "divergence:\n  window: 5m\n  latency_factor: 3\n  window: 10m\n")
    assert "line 4" in message and "duplicate key 'window' (first on line 2)" in message


def test_duplicate_top_level_section_is_refused(tmp_path):
    assert "duplicate key 'thresholds'" in refused(tmp_path, "thresholds: {}\nrules: {}\nthresholds: {}\n")


@pytest.fixture
def catalog_copy(tmp_path: Path) -> Path:
    target = tmp_path / "vllm.yaml"
    shutil.copy(CATALOG_DIR / "vllm.yaml", target)
    return target


def catalog_refused(path: Path) -> str:
    with pytest.raises(LlmdashError) as caught:
        load_catalog(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
    return str(caught.value)


def test_duplicate_catalog_key_is_refused(catalog_copy):
    text = catalog_copy.read_text()
    catalog_copy.write_text(text.replace("\nsupported:", "\ntitle: Again\nsupported:", 1))
    assert "duplicate key 'title'" in catalog_refused(catalog_copy)


@pytest.mark.parametrize("bound", [".nan", ".inf"])
def test_non_finite_catalog_bucket_bound_is_refused(catalog_copy, bound):
    text = catalog_copy.read_text()
    assert "buckets: [1, 2, 3, 4, 5, 10, 20]" in text
    catalog_copy.write_text(text.replace("buckets: [1, 2, 3, 4, 5, 10, 20]", f"buckets: [1, 2, {bound}]", 1))
    assert "metrics.vllm:request_num_preemptions.buckets: expected a list of finite numbers" in \
        catalog_refused(catalog_copy)


def _leaves(node, prefix=()):
    if prefix:
        yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, prefix + (index,))


@pytest.mark.parametrize("engine", ENGINES)
def test_catalog_field_of_any_wrong_type_is_a_one_line_error(engine):
    """Every key of every catalog, replaced by values of the wrong type: never a traceback."""
    path = CATALOG_DIR / f"{engine}.yaml"
    data = yaml.safe_load(path.read_text())
    for where in _leaves(data):
        for wrong in ([1], {"x": 1}, 7, None, math.nan, True, 10 ** 400):
            mutated = copy.deepcopy(data)
            parent = mutated
            for step in where[:-1]:
                parent = parent[step]
            parent[where[-1]] = wrong
            try:
                _Parser(path).engine(mutated)
            except LlmdashError as error:
                assert "\n" not in str(error) and len(str(error)) < 500, where
            # a wrong value some keys accept (7 as a version, None as a note) is fine


def test_non_utf8_config_is_one_line(tmp_path):
    path = tmp_path / "llmdash.yaml"
    path.write_bytes(b"dashboard:\n  time_from: now-3h\n  tags: [\xff\xfe]\n")
    assert_one_line_exit_2(llmdash("--config", str(path), "build", "--out", str(tmp_path / "gen")),
                           "line 3: not UTF-8 text")


def test_utf16_config_is_one_line(tmp_path):
    path = tmp_path / "llmdash.yaml"
    path.write_bytes("dashboard:\n  refresh: 1m\n".encode("utf-16"))
    assert_one_line_exit_2(llmdash("--config", str(path), "build", "--out", str(tmp_path / "gen")),
                           "save it as UTF-8")


@pytest.mark.parametrize("text", [
    "selectors: " + "[" * 5000 + "]" * 5000 + "\n",
    "selectors:\n" + "- " * 5000 + "v\n",
    "selectors: " + "{a: " * 60 + "1" + "}" * 60 + "\n",
], ids=["flow-5000", "block-5000", "flow-60"])
def test_deep_nesting_is_one_line(tmp_path, text):
    path = tmp_path / "llmdash.yaml"
    path.write_text(text)
    result = llmdash("--config", str(path), "build", "--out", str(tmp_path / "gen"))
    assert_one_line_exit_2(result)
    assert "nest" in result.stderr


ALIAS_BOMB = "\n".join(
    ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]" for previous, name in zip("abcdefgh", "bcdefghi")]
) + "\n"


def test_alias_bomb_is_refused_fast_with_a_short_message(tmp_path):
    assert len(ALIAS_BOMB) < 500  # 9**9 = 387 million strings once expanded
    path = tmp_path / "llmdash.yaml"
    path.write_text(ALIAS_BOMB)
    started = time.monotonic()
    result = llmdash("--config", str(path), "build", "--out", str(tmp_path / "gen"))
    assert time.monotonic() - started < 20
    assert_one_line_exit_2(result, "once aliases are expanded")
    assert len(result.stderr) < 200


def test_recursive_alias_is_refused(tmp_path):
    assert "refers to its own anchor" in refused(tmp_path, "selectors: &loop {a: *loop}\n")


def test_bad_value_is_echoed_truncated(tmp_path):
    message = refused(tmp_path, f"dashboard:\n  time_from: {'x' * 100_000}\n")
    assert len(message) < 300


def test_oversized_config_is_refused(tmp_path):
    message = refused(tmp_path, "# padding\n" * (MAX_BYTES // 10 + 1))
    assert "more than the" in message


def test_config_that_is_a_fifo_does_not_hang(tmp_path):
    fifo = tmp_path / "llmdash.yaml"
    os.mkfifo(fifo)
    assert_one_line_exit_2(llmdash("--config", str(fifo), "build", "--out", str(tmp_path / "gen")),
                           "not a regular file")


# --- the catalog directory --------------------------------------------------------------------

@pytest.mark.parametrize("args", [("build",), ("build", "--check"), ("engines",), ("rules",),
                                  ("publish", "--dry-run", "--url", "http://127.0.0.1:9")])
@pytest.mark.parametrize("catalogs", ["missing", "empty"])
def test_mistyped_catalog_dir_is_an_error_for_every_command(tmp_path, args, catalogs):
    directory = tmp_path / "catalogs"
    if catalogs == "empty":
        directory.mkdir()
        (directory / "vllm.yml").write_text("engine: vllm\n")  # not *.yaml
    env = {"LLMDASH_CATALOG_DIR": str(directory), "GRAFANA_TOKEN": "glsa_test"}
    out_args = ("--out", str(tmp_path / "gen")) if args[0] in ("build", "rules") else ()
    result = llmdash(*args, *out_args, env=env)
    # the directory is named (a long path is cut in the middle, so check its end)
    assert_one_line_exit_2(result, "/catalogs")
    assert not (tmp_path / "gen").exists()


# --- interrupted and parallel writes ----------------------------------------------------------

@pytest.fixture(scope="module")
def fresh_build(tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("fresh") / "gen"
    assert llmdash("build", "--out", str(out)).returncode == 0
    return snapshot(out)


def stale_tree(out: Path, fresh: dict[str, bytes]) -> dict[str, bytes]:
    """`out` holding every built file with stale content, plus a user's own file."""
    shutil.rmtree(out, ignore_errors=True)
    for rel in fresh:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text("stale\n")
    (out / "dashboards" / "NOTES.md").write_text("ours\n")
    return snapshot(out)


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name != out.name)


def start(*args, env=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "llmdash.cli.main", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})


def half_renamed(out: Path, expected: dict[str, bytes]):
    """True once some file under `out` has its new content: the renames have begun."""
    return lambda: any(regular_file_text(out / rel) == content.decode() for rel, content in expected.items())


@pytest.mark.e2e
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_the_renames_waits_for_all_of_them(tmp_path, tmp_path_factory, fresh_build, signum):
    out = tmp_path / "gen"
    stale_tree(out, fresh_build)
    halfway = Halfway(tmp_path_factory.mktemp("handshake"))
    build = start("build", "--out", str(out), env=halfway.env)
    halfway.wait(build)
    assert half_renamed(out, fresh_build)()
    build.send_signal(signum)
    halfway.resume(build)
    _, stderr = build.communicate(timeout=60)
    assert build.returncode in (130, -signum) and "Traceback" not in stderr
    assert snapshot(out) == {**fresh_build, "dashboards/NOTES.md": b"ours\n"}  # no temporary file either
    assert leftovers(out) == []


@pytest.mark.e2e
def test_sigint_at_random_moments_leaves_old_or_new_never_a_mix(tmp_path, fresh_build):
    out = tmp_path / "gen"
    new = {**fresh_build, "dashboards/NOTES.md": b"ours\n"}
    rng = random.Random(12)
    for _ in range(5):
        old = stale_tree(out, fresh_build)
        build = start("build", "--out", str(out))
        time.sleep(rng.uniform(0.2, 1.5))
        build.send_signal(signal.SIGINT)
        build.communicate(timeout=60)
        after = snapshot(out)
        assert after in (old, new)
        if build.returncode != 0:  # an interrupted run cleans up after itself
            assert leftovers(out) == []


@pytest.mark.e2e
def test_leftovers_of_a_killed_build_are_never_output_and_the_next_build_cleans_up(tmp_path, tmp_path_factory,
                                                                                   fresh_build):
    out = tmp_path / "gen"
    stale_tree(out, fresh_build)
    halfway = Halfway(tmp_path_factory.mktemp("handshake"))
    build = start("build", "--out", str(out), env=halfway.env)
    halfway.wait(build)
    assert half_renamed(out, fresh_build)()
    build.kill()  # SIGKILL cannot wait: half the files are renamed, the others still temporary
    build.communicate(timeout=60)
    temporary = [p.name for p in out.rglob(".*") if p.name != MANIFEST]
    assert temporary and all(".llmdash-tmp-" in name for name in temporary)
    check = llmdash("build", "--check", "--out", str(out))
    assert check.returncode == 1 and ".llmdash-tmp-" not in check.stderr
    result = llmdash("build", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert snapshot(out) == {**fresh_build, "dashboards/NOTES.md": b"ours\n"}


@pytest.mark.e2e
def test_parallel_builds_over_a_stale_tree_all_succeed(tmp_path, fresh_build):
    out = tmp_path / "gen"
    stale_tree(out, fresh_build)
    builds = [start("build", "--out", str(out)) for _ in range(4)]
    results = [(b, *b.communicate(timeout=120)) for b in builds]
    for build, _, stderr in results:
        assert build.returncode == 0 and "Traceback" not in stderr, stderr
    everything = f"{len(fresh_build) - 1} written, 0 unchanged"  # every file but the manifest
    assert sum(everything in stdout for _, stdout, _ in results) == 1
    assert snapshot(out) == {**fresh_build, "dashboards/NOTES.md": b"ours\n"}
    assert leftovers(out) == []


def test_build_check_never_passes_having_checked_nothing(tmp_path):
    from llmdash.build import check
    with pytest.raises(LlmdashError, match="nothing was built"):
        check({}, tmp_path)


# --- provisioning -------------------------------------------------------------------------------

def test_provision_with_a_directory_in_place_of_a_file_writes_nothing(tmp_path):
    target = tmp_path / "gitops"
    (target / "dashboards" / "sglang.json").mkdir(parents=True)
    before = sorted(str(p) for p in target.rglob("*"))
    result = llmdash("provision", str(target))
    assert_one_line_exit_2(result, "sglang.json' is a directory")
    assert sorted(str(p) for p in target.rglob("*")) == before
    assert leftovers(target) == []


def test_provision_with_a_fifo_named_json_does_not_hang(tmp_path):
    target = tmp_path / "gitops"
    (target / "dashboards").mkdir(parents=True)
    os.mkfifo(target / "dashboards" / "pipe.json")
    result = llmdash("provision", str(target))
    assert result.returncode == 0, result.stderr
    assert (target / "dashboards" / "pipe.json").is_fifo()  # not ours: left alone
    assert (target / "dashboards" / "vllm.json").is_file()


@pytest.mark.e2e
def test_signal_during_the_provision_renames_leaves_a_whole_layout(tmp_path, tmp_path_factory):
    target = tmp_path / "gitops"
    assert llmdash("provision", str(target)).returncode == 0
    complete = snapshot(target)
    for path in (target / "dashboards").glob("*.json"):
        path.write_text("{}\n")
    halfway = Halfway(tmp_path_factory.mktemp("handshake"))
    run = start("provision", str(target), env=halfway.env)
    halfway.wait(run)
    assert half_renamed(target, {rel: c for rel, c in complete.items() if rel.startswith("dashboards/")})()
    run.send_signal(signal.SIGINT)
    halfway.resume(run)
    run.communicate(timeout=60)
    assert run.returncode == 130
    assert snapshot(target) == complete and leftovers(target) == []


# --- the command line ----------------------------------------------------------------------------

@pytest.mark.parametrize("args, fragment", [
    (("build", "--no-such-flag"), "No such option '--no-such-flag'"),
    (("buidl",), "No such command 'buidl'"),
    (("layout",), "Missing argument 'ENGINE'"),
])
def test_usage_errors_are_one_line(args, fragment):
    assert_one_line_exit_2(llmdash(*args), fragment, "--help")


@pytest.mark.parametrize("error", [RecursionError(), MemoryError(),
                                   UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")],
                         ids=["recursion", "memory", "unicode"])
def test_a_parser_error_that_slips_through_is_still_one_line_exit_2(monkeypatch, capsys, error):
    code, stderr = main_raising(monkeypatch, capsys, error)
    assert code == 2
    assert stderr.startswith("error: ") and stderr.count("\n") == 1


def main_raising(monkeypatch, capsys, error) -> tuple[int, str]:
    """(exit code, stderr) of the `llmdash` entry point when the command it runs raises `error`."""
    from llmdash.cli import main as cli_main

    def explode(*_args, **_kwargs):
        raise error

    monkeypatch.setattr(cli_main.cli, "main", explode)
    with pytest.raises(SystemExit) as exited:
        cli_main.main()
    return exited.value.code, capsys.readouterr().err


def test_an_error_from_any_module_is_scrubbed_and_escaped(monkeypatch, capsys):
    """Issue 28: every CLI error goes through redact.error_line (a config value's URL kept its password)."""
    error = LlmdashError("x.yaml: got 'https://ops:PW-1@wiki/x'\nsecond")
    assert main_raising(monkeypatch, capsys, error) == (2, "error: x.yaml: got 'https://***@wiki/x'\\x0asecond\n")


def test_a_text_encoding_failure_says_so_rather_than_input_too_large(monkeypatch, capsys):
    failure = UnicodeEncodeError("ascii", "g\xe9n", 1, 2, "ordinal not in range(128)")
    assert main_raising(monkeypatch, capsys, failure) == (
        2, "error: text that ascii cannot carry (UnicodeEncodeError); use a UTF-8 locale such as LANG=C.UTF-8\n")

