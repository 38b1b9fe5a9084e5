"""`.ci/build-stack`, run by .ci/install-deps: the current stack from the Go module proxy into the per-user
cache, once per machine, one progress line per binary, and one line naming what went wrong otherwise.

A stand-in `go` (first on PATH) plays the toolchain, so these take milliseconds; the real build is what
`make deps` does (docs/testing.md gives its timings)."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support import stacks
from tests.support.stacks import manifest

SCRIPT = ROOT / ".ci" / "build-stack"
BASH = shutil.which("bash")
# The issue's versions (issue 32): what the proxy serves and the suite runs as the current stack. The
# alertmanager server is absent: v0.35.0's module lacks the web UI its `//go:embed app/dist` needs.
CURRENT = {
    "prometheus": ("github.com/prometheus/prometheus", "v0.316.0"),
    "promtool": ("github.com/prometheus/prometheus", "v0.316.0"),
    "amtool": ("github.com/prometheus/alertmanager", "v0.35.0"),
    "victoria-metrics": ("github.com/VictoriaMetrics/VictoriaMetrics", "v1.151.0"),
    "vmalert": ("github.com/VictoriaMetrics/VictoriaMetrics", "v1.151.0"),
    "sloth": ("github.com/slok/sloth", "v0.16.0"),
}
FAKE_GO = """#!{bash}
# a stand-in toolchain: logs its arguments; `get` of a package named in $REFUSE fails as the proxy would;
# `build -o OUT` writes a binary that answers --version, or fails for a package named in $BREAK
echo "$PWD $*" >> {log}
case "$1" in
  mod) echo "go: creating new go.mod: module x" >&2 ;;
  get) case "$2" in *"$REFUSE"*) echo "go: $2: reading https://proxy.golang.org/: 404 Not Found" >&2; exit 1;; esac ;;
  build)
    out=''; while [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; last="$1"; shift; done
    case "$last" in *"$BREAK"*) echo "$last/main.go:3:1: syntax error" >&2; : > "$out"; exit 1;; esac
    printf '#!{bash}\\necho "%s built"\\n' "$last" > "$out"; chmod +x "$out" ;;
esac
"""


@pytest.fixture
def toolchain(tmp_path) -> tuple[Path, Path]:
    """(PATH directory holding the stand-in go, its log)."""
    bin_dir, log = tmp_path / "go-bin", tmp_path / "go.log"
    bin_dir.mkdir()
    (bin_dir / "go").write_text(FAKE_GO.format(bash=BASH, log=log))
    (bin_dir / "go").chmod(stat.S_IRWXU)
    return bin_dir, log


def run(tmp_path: Path, path: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([BASH, str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env={"PATH": path, "XDG_CACHE_HOME": str(tmp_path / "cache"), "TMPDIR": str(tmp_path),
                               "REFUSE": "nothing-refused", "BREAK": "nothing-broken", **env})


def cached(tmp_path: Path, binary: str) -> Path:
    module, version = CURRENT[binary]
    return tmp_path / "cache" / "llmdash" / "stack" / f"{module}@{version}" / "bin" / binary


def test_the_manifest_names_the_issues_versions():
    assert {binary: (module, version) for binary, module, version in manifest()} == CURRENT


def test_builds_each_binary_once_with_one_line_each(tmp_path, toolchain):
    bin_dir, log = toolchain
    result = run(tmp_path, f"{bin_dir}:/usr/bin:/bin")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(CURRENT)
    for line, (binary, (module, version)) in zip(lines, CURRENT.items()):
        assert re.fullmatch(rf"building {binary} from {module}@{version} \.\.\. done in \d+ s: "
                            + re.escape(str(cached(tmp_path, binary))), line), line
        assert subprocess.run([cached(tmp_path, binary), "--version"], capture_output=True).returncode == 0
    calls = log.read_text().splitlines()
    gets = [c.split()[2] for c in calls if c.split()[1] == "get"]
    assert gets == ["github.com/prometheus/prometheus/cmd/prometheus@v0.316.0",
                    "github.com/prometheus/prometheus/cmd/promtool@v0.316.0",
                    "github.com/prometheus/alertmanager/cmd/amtool@v0.35.0",
                    "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics@v1.151.0",
                    "github.com/VictoriaMetrics/VictoriaMetrics/app/vmalert@v1.151.0",
                    "github.com/slok/sloth/cmd/sloth@v0.16.0"]
    builds = [c for c in calls if c.split()[1] == "build"]
    assert all(" -trimpath " in c for c in builds) and len(builds) == len(CURRENT)
    assert "-X github.com/prometheus/common/version.Version=3.16.0" in builds[0]
    # one throw-away module per upstream module: prometheus and promtool share one, VictoriaMetrics another
    directories = {c.split()[0] for c in calls}
    assert len(directories) == 4 and not any(Path(d).exists() for d in directories)
    # once per machine: built binaries that answer --version are kept, and go is not even asked
    again = run(tmp_path, f"{bin_dir}:/usr/bin:/bin")
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert log.read_text().splitlines() == calls


def test_without_go_one_line_names_what_it_could_not_build(tmp_path):
    result = run(tmp_path, "/usr/bin:/bin")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == ("error: go not found: the current stack (prometheus promtool amtool victoria-metrics "
                             "vmalert sloth) is built from the Go module proxy with Go 1.26; install Go and run "
                             "make deps again\n")


def test_a_refused_module_is_one_line_and_leaves_nothing_of_it(tmp_path, toolchain):
    bin_dir, _ = toolchain
    result = run(tmp_path, f"{bin_dir}:/usr/bin:/bin", REFUSE="VictoriaMetrics")
    assert result.returncode == 1
    assert result.stderr == ("error: the Go module proxy refused github.com/VictoriaMetrics/VictoriaMetrics/app/"
                             "victoria-metrics@v1.151.0: go: github.com/VictoriaMetrics/VictoriaMetrics/app/"
                             "victoria-metrics@v1.151.0: reading https://proxy.golang.org/: 404 Not Found\n")
    assert cached(tmp_path, "amtool").exists() and not cached(tmp_path, "victoria-metrics").parent.exists()


def test_a_failed_build_is_one_line_and_nothing_half_written(tmp_path, toolchain):
    bin_dir, _ = toolchain
    result = run(tmp_path, f"{bin_dir}:/usr/bin:/bin", BREAK="cmd/promtool")
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == \
        "building promtool from github.com/prometheus/prometheus@v0.316.0 ... failed"
    assert result.stderr == ("error: go build of github.com/prometheus/prometheus/cmd/promtool@v0.316.0 failed: "
                             "github.com/prometheus/prometheus/cmd/promtool/main.go:3:1: syntax error\n")
    assert sorted(p.name for p in cached(tmp_path, "promtool").parent.iterdir()) == ["prometheus"]


@pytest.mark.parametrize("ci", ["true", None])
def test_a_stack_not_built_fails_under_ci_and_skips_elsewhere_naming_make_deps(tmp_path, monkeypatch, ci):
    """The `stack` fixture's check (tests/conftest.py): .ci/run (CI=true) never passes without the current stack."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
    if ci:
        monkeypatch.setenv("CI", ci)
    else:
        monkeypatch.delenv("CI", raising=False)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome) as raised:
        stacks.require("current")
    message = str(raised.value)
    assert "the current stack (github.com/VictoriaMetrics/VictoriaMetrics@v1.151.0, " in message
    assert message.endswith("is not built (6 binaries missing, first "
                            f"{tmp_path}/empty/llmdash/stack/github.com/prometheus/prometheus@v0.316.0/bin/prometheus)"
                            ": build it with `make deps` (.ci/build-stack: Go and the Go module proxy)")
    assert message.startswith("cannot test " if ci else "the current stack")
    assert stacks.require("oldest").binaries is None      # Debian's, on PATH
