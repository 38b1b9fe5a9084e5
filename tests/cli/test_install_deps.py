"""`.ci/install-deps`, the one script behind `make deps` (which demo, test and test-e2e need) and .ci/run:
installs Debian's packages for the missing commands, or says on one line exactly what to install; then
builds the current stack (.ci/build-stack, tests/cli/test_build_stack.py), here found already built."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support import stacks

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "install-deps"
PACKAGES = {"prometheus": ("prometheus", "promtool"), "mtail": ("mtail",),
            "prometheus-alertmanager": ("prometheus-alertmanager", "amtool"),
            "victoria-metrics": ("victoria-metrics", "vmalert")}
BASH = shutil.which("bash")


def tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!{BASH}\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def run(bin_dir: Path):
    """The script with only `bin_dir` on PATH: the commands there are all it can find; the current stack is
    in a cache of `bin_dir`'s parent (`user_bin` puts it there)."""
    return subprocess.run([BASH, str(SCRIPT)], env={"PATH": str(bin_dir), "XDG_CACHE_HOME": str(bin_dir.parent)},
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def user_bin(tmp_path, monkeypatch) -> Path:
    """A PATH of a user who is not root: `id -u` says 1000, and `env` is there for apt-get's environment;
    the current stack already built (binaries that answer --version) in the user's cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for path in stacks.current().binaries.values():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tool(Path(path).parent, Path(path).name, "exit 0")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool(bin_dir, "id", 'if [ "$1" = -u ]; then echo 1000; else echo "uid=1000(user)"; fi')
    (bin_dir / "env").symlink_to(shutil.which("env"))
    return bin_dir


def test_with_everything_installed_it_does_nothing():
    absent = [command for commands in PACKAGES.values() for command in commands if not shutil.which(command)]
    assert absent + stacks.missing(stacks.current()) == [], f"run `make deps` first: {absent} not on PATH"
    result = subprocess.run([BASH, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_missing_and_not_root_says_exactly_what_to_install_on_one_line(user_bin):
    result = run(user_bin)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert "sudo apt-get install prometheus mtail prometheus-alertmanager victoria-metrics" in result.stderr
    assert "prometheus promtool mtail prometheus-alertmanager amtool victoria-metrics vmalert not found" \
        in result.stderr


def test_only_the_missing_packages_are_named(user_bin):
    for command in ("prometheus", "promtool", "mtail", "amtool", "victoria-metrics", "vmalert"):
        tool(user_bin, command, "exit 0")
    tool(user_bin, "sudo", "exit 1")                     # sudo that wants a password
    result = run(user_bin)
    assert result.returncode == 1
    assert re.search(r"install Debian's prometheus-alertmanager \(sudo apt-get install prometheus-alertmanager\)",
                     result.stderr), result.stderr


def test_with_passwordless_sudo_it_installs_the_missing_packages(user_bin, tmp_path):
    log = tmp_path / "apt.log"
    tool(user_bin, "sudo", '[ "$1" = -n ] && shift; [ "$1" = true ] && exit 0; exec "$@"')
    # apt-get as Debian's would: each package's commands appear on PATH
    (user_bin / "chmod").symlink_to(shutil.which("chmod"))
    cases = " ".join(f"{package}) commands='{' '.join(commands)}';;" for package, commands in PACKAGES.items())
    tool(user_bin, "apt-get", f"""echo "$DEBIAN_FRONTEND $*" >> {log}
for package in "$@"; do
  commands=''; case "$package" in {cases} esac
  for c in $commands; do echo "#!{BASH}" > "${{0%/*}}/$c"; chmod +x "${{0%/*}}/$c"; done
done""")
    result = run(user_bin)
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines() == [
        " update -qq",
        "noninteractive install -y -qq --no-install-recommends prometheus mtail prometheus-alertmanager "
        "victoria-metrics"]
    assert run(user_bin).returncode == 0 and len(log.read_text().splitlines()) == 2   # now a no-op


@pytest.mark.parametrize("target", ["demo", "test", "test-e2e"])
def test_make_targets_run_the_script_first(target):
    # as a user types it, not as a sub-make of `make test` (which would announce the directory it enters)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    result = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "bash .ci/install-deps"


def test_ci_runs_the_same_script_and_has_no_copy_of_it():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash .ci/install-deps" in ci and "apt-get install" not in ci
