"""`llmdash diff` and `llmdash layout --base` on revisions a branch author controls (issue 20): a revision's
code runs only when the reviewer asks, and then without their credentials; a revision's oversized file, link
out of the tree or malformed dashboard, or a deleted working directory, is one line and exit 2, never a
traceback or a memory blow-up."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from llmdash.engines.catalog import CATALOG_DIR

pytestmark = pytest.mark.process   # runs the llmdash command in a fresh interpreter, as a user does

LLMDASH = Path(sys.executable).with_name("llmdash")  # the console script, as a user runs it
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}
PEAK_MEMORY_MB = 500
SECRETS = {"GRAFANA_TOKEN": "glsa_reviewer_token", "GRAFANA_URL": "https://grafana.example.invalid",
           "MY_API_KEY": "k-123", "DB_PASSWORD": "hunter2", "HTTPS_PROXY": "http://user:pw@proxy.invalid:3128"}
# A revision's llmdash command: proves it ran by writing the environment it saw, then builds nothing.
REVISION_CODE = '''
import json, os, pathlib, sys

def main():
    pathlib.Path({marker!r}).write_text(json.dumps(dict(os.environ)))
    out = pathlib.Path(sys.argv[sys.argv.index("--out") + 1])
    (out / "dashboards").mkdir(parents=True)
'''


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def commit_all(repo, message="commit"):
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def run(*args, cwd, shell_prefix=None):
    """Run the llmdash command with the reviewer's secrets in its environment;
    (exit code, stdout, stderr, peak memory of the process in MB)."""
    env = {k: v for k, v in os.environ.items() if k != "LLMDASH_CATALOG_DIR"} | SECRETS
    command = [str(LLMDASH), *args]
    if shell_prefix:  # e.g. leave the working directory deleted before llmdash starts
        command = ["sh", "-c", f'{shell_prefix} && exec "$0" "$@"', *command]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(process.pid, 0)  # reaps it: the rusage is this process's alone
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return process.returncode, out.read(), err.read(), usage.ru_maxrss / 1024


def assert_one_line_exit_2(result, message):
    code, stdout, stderr, peak = result
    assert code == 2, stderr
    assert stdout == ""
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1] == f"error: {message}"
    assert len([line for line in stderr.splitlines() if not line.startswith("building ")]) == 1
    assert peak < PEAK_MEMORY_MB
    return peak


@pytest.fixture
def source_repo(tmp_path):
    """A branch of "the llmdash source" whose pyproject points the llmdash command at its own code."""
    repo = tmp_path / "branch"
    (repo / "engines").mkdir(parents=True)
    shutil.copy(CATALOG_DIR / "vllm.yaml", repo / "engines" / "vllm.yaml")
    (repo / "llmdash.yaml").write_text("engines: [vllm]\n")
    (repo / "payload").mkdir()
    (repo / "payload" / "__init__.py").write_text("")
    marker = tmp_path / "revision-code-ran.json"
    (repo / "payload" / "cli.py").write_text(REVISION_CODE.format(marker=str(marker)))
    (repo / "pyproject.toml").write_text('[project]\nname = "llmdash"\n'
                                         '[project.scripts]\nllmdash = "payload.cli:main"\n'
                                         '[tool.setuptools]\npackages = ["payload"]\n')
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo)
    return repo, marker


def test_a_revisions_code_never_runs_by_default(source_repo):
    repo, marker = source_repo
    for args in (["diff", "HEAD"], ["diff", "HEAD", "HEAD"], ["layout", "vllm", "--base", "HEAD", "--out", "x.png"]):
        code, stdout, stderr, _ = run(*args, cwd=repo)
        assert code == 0, stderr
        assert not marker.exists(), f"llmdash {' '.join(args)} ran the revision's code"
    assert "no dashboard or rule changes" in run("diff", "HEAD", cwd=repo)[1]  # built from its catalog and config


def test_with_the_flag_the_revisions_code_runs_without_the_reviewers_credentials(source_repo):
    repo, marker = source_repo
    code, stdout, stderr, _ = run("diff", "HEAD", "--build-with-revision-code", cwd=repo)
    assert code == 0, stderr
    seen = json.loads(marker.read_text())
    assert not set(SECRETS) & set(seen)
    assert not any(secret in value for value in seen.values() for secret in SECRETS.values())
    assert seen["PATH"] == os.environ["PATH"]  # the rest of the environment is there


def test_an_entry_point_is_never_pasted_into_python_source(source_repo):
    repo, marker = source_repo
    injected = f"sys import argv; open({str(marker)!r}, 'w'); from os:getcwd"
    pyproject = (repo / "pyproject.toml").read_text().replace('"payload.cli:main"', json.dumps(injected))
    (repo / "pyproject.toml").write_text(pyproject)
    commit_all(repo, "inject")
    assert_one_line_exit_2(run("diff", "HEAD", "HEAD", "--build-with-revision-code", cwd=repo),
                           "building revision HEAD failed: its pyproject.toml declares no llmdash command")
    assert not marker.exists()


@pytest.fixture
def infra_repo(tmp_path):
    """A team's infrastructure repository: llmdash.yaml and the generated/ it builds, committed."""
    repo = tmp_path / "infra"
    repo.mkdir()
    (repo / "llmdash.yaml").write_text("engines: [vllm]\n")
    assert run("build", cwd=repo)[0] == 0
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo)
    return repo


def test_an_oversized_config_in_a_revision_is_refused_before_it_is_read(infra_repo):
    size = 150 * 1024 * 1024
    with open(infra_repo / "llmdash.yaml", "w") as config:
        config.write("engines: [vllm]\n#")
        config.truncate(size)  # a sparse file: zero bytes git compresses well
    commit_all(infra_repo, "a 150 MB config")
    # refused by the size git lists, before a byte is read (the peak also counts git's own processes, which hash
    # the 150 MB working-tree copy, so it is held to the 500 MB bound rather than to the file's size)
    assert_one_line_exit_2(run("diff", "HEAD", cwd=infra_repo),
                           f"HEAD:llmdash.yaml: config is {size} bytes, more than the 1048576 allowed")


def test_links_in_a_revision_are_never_followed(infra_repo):
    (infra_repo / "elsewhere").symlink_to("/etc/passwd")
    commit_all(infra_repo, "an absolute link")
    code, stdout, stderr, _ = run("diff", "HEAD", cwd=infra_repo)  # a link the build does not read: no matter
    assert code == 0 and "no dashboard or rule changes" in stdout, stderr
    assert_one_line_exit_2(run("diff", "HEAD", "--build-with-revision-code", cwd=infra_repo),
                           "cannot extract revision HEAD: 'elsewhere' is a link to an absolute path")
    (infra_repo / "llmdash.yaml").unlink()
    (infra_repo / "llmdash.yaml").symlink_to("/etc/passwd")
    commit_all(infra_repo, "the config is a link")
    assert_one_line_exit_2(run("diff", "HEAD", cwd=infra_repo),
                           "HEAD:llmdash.yaml: config is not a plain file (git mode 120000)")


def test_a_committed_dashboard_with_a_string_grid_position_is_one_line(infra_repo):
    path = infra_repo / "generated" / "dashboards" / "vllm.json"
    model = json.loads(path.read_text())
    panel = next(p for p in model["panels"] if p["type"] != "row")
    panel["gridPos"]["y"] = str(panel["gridPos"]["y"])
    path.write_text(json.dumps(model))
    commit_all(infra_repo, "hand-edited")
    assert_one_line_exit_2(run("diff", cwd=infra_repo),
                           f"HEAD:generated/dashboards/vllm.json: panel {panel['title']!r} gridPos.y is "
                           f"{panel['gridPos']['y']!r}, not an integer")


@pytest.mark.parametrize("args", [["diff"], ["layout", "vllm", "--out", "x.png"]])
def test_a_deleted_working_directory_is_one_line(infra_repo, args):
    gone = infra_repo / "gone"
    gone.mkdir()
    assert_one_line_exit_2(run(*args, cwd=gone, shell_prefix=f"rmdir {str(gone)!r}"),
                           "the current directory no longer exists; cd into the project again")


# Issue 28: what a deny-list of names let through, and the credential files a reviewer's HOME holds.
PLANTED_VARIABLES = {
    "MYSQL_PWD": "mysql-secret", "GITHUB_PAT": "ghp_planted", "CI_JOB_JWT": "eyJplanted",
    "AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=https;AccountKey=planted",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.invalid/services/planted", "NETRC": "/planted/netrc",
    "KUBECONFIG": "/planted/kubeconfig", "DOCKER_CONFIG": "/planted/docker", "KRB5CCNAME": "FILE:/planted/krb5cc",
    "XDG_CONFIG_HOME": "/planted/xdg-config", "PYTHONSTARTUP": "/planted/startup.py",
}
PLANTED_FILES = (".netrc", ".aws/credentials", ".config/gh/hosts.yml", ".git-credentials", ".vault-token")
# The revision's code reports its whole environment and which credential files it finds through HOME and XDG.
FINDING_CODE = '''
import json, os, pathlib, sys

def main():
    home = pathlib.Path.home()
    config = pathlib.Path(os.environ.get("XDG_CONFIG_HOME", home / ".config"))
    candidates = [home / name for name in {files!r}] + [config / "gh" / "hosts.yml"]
    found = [str(path) for path in candidates if path.exists()]
    pathlib.Path({marker!r}).write_text(json.dumps({{"environ": dict(os.environ), "found": found}}))
    out = pathlib.Path(sys.argv[sys.argv.index("--out") + 1])
    (out / "dashboards").mkdir(parents=True)
'''


def test_revision_code_sees_only_the_allow_list_and_an_empty_home(source_repo, tmp_path, monkeypatch):
    repo, marker = source_repo
    (repo / "payload" / "cli.py").write_text(FINDING_CODE.format(files=PLANTED_FILES, marker=str(marker)))
    commit_all(repo, "report what it finds")
    home = tmp_path / "reviewer-home"
    for name in PLANTED_FILES:
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text("machine example.invalid login me password planted\n")
    planted = PLANTED_VARIABLES | {"HOME": str(home), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
                                   "TMPDIR": str(tmp_path)}
    credentials = [*PLANTED_VARIABLES.values(), *SECRETS.values(), str(home)]
    monkeypatch.setattr(sys.modules[__name__], "SECRETS", SECRETS | planted)   # what run() hands llmdash
    code, _, stderr, _ = run("diff", "HEAD", "HEAD", "--build-with-revision-code", cwd=repo)
    assert code == 0, stderr
    seen = json.loads(marker.read_text())
    child_home = seen["environ"]["HOME"]
    assert seen["found"] == []
    assert child_home != str(home) and not child_home.startswith(str(home))
    assert {name: seen["environ"][name] for name in ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")} == \
        {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC", "TMPDIR": str(tmp_path)}
    xdg = {"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"}
    assert all(seen["environ"][name].startswith(child_home + "/") for name in xdg)
    # nothing else: the python it runs with adds PYTHONPATH (the staged packages) and nothing more
    assert set(seen["environ"]) - xdg - {"PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "HOME", "PYTHONPATH"} <= {"LC_CTYPE"}
    assert [value for value in credentials if value in json.dumps(seen)] == []


def test_a_variable_the_reviewer_names_is_passed_and_only_with_the_flag(source_repo, monkeypatch):
    repo, marker = source_repo
    monkeypatch.setattr(sys.modules[__name__], "SECRETS", SECRETS | {"PIP_INDEX_URL": "https://mirror.invalid/simple"})
    code, _, stderr, _ = run("diff", "HEAD", "HEAD", "--build-with-revision-code", "--pass-env", "PIP_INDEX_URL",
                             cwd=repo)
    assert code == 0, stderr
    seen = json.loads(marker.read_text())
    assert seen["PIP_INDEX_URL"] == "https://mirror.invalid/simple" and "GRAFANA_TOKEN" not in seen
    assert_one_line_exit_2(run("diff", "HEAD", "--pass-env", "PIP_INDEX_URL", cwd=repo),
                           "--pass-env only applies with --build-with-revision-code")
