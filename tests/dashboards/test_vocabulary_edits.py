"""One edit in the vocabulary module is enough: tried in a temporary copy of the repository, as a contributor would.

The copy's own code runs (a small loader maps the `llmdash.*` packages onto the copy's folders, as the
editable install maps them onto this checkout), so what is tested is the edited source, not this one.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process   # runs the llmdash command in a fresh interpreter, as a user does

ROOT = Path(__file__).resolve().parents[2]

# Imports llmdash from the copy given as argv[1], then runs the CLI with the remaining arguments.
RUN_COPY = """
import importlib.util, pathlib, sys
root = pathlib.Path(sys.argv[1])
def load(name, folder):
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
top = load("llmdash", root / "llmdash")
for layer in ("engines", "panels", "dashboards", "rules"):
    setattr(top, layer, load(f"llmdash.{layer}", root / layer))
from llmdash.cli.main import main
sys.argv = ["llmdash"] + sys.argv[2:]
main()
"""


@pytest.fixture
def copy(tmp_path):
    """The working tree's tracked files in a fresh git repository, committed."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    target = tmp_path / "repo"
    for name in filter(None, files.decode().split("\0")):
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=target, check=True)
    subprocess.run(["git", "add", "-A"], cwd=target, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], cwd=target, check=True)
    return target


def llmdash(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN_COPY, str(repo), *args], cwd=repo, capture_output=True, text=True,
                          timeout=300)


def edit(repo: Path, old: str, new: str) -> None:
    path = repo / "llmdash" / "vocabulary.py"
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def generated_text(repo: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((repo / "generated").rglob("*")) if p.is_file())


def test_changing_the_headline_quantile_is_one_edit_that_builds_and_renames_consistently(copy):
    edit(copy, "HEADLINE_QUANTILE = 0.99 ", "HEADLINE_QUANTILE = 0.95 ")
    review = llmdash(copy, "diff")
    assert review.returncode == 1, review.stderr
    assert "TTFT p99" in review.stdout and "TTFT p95" in review.stdout     # named panel by panel
    build = llmdash(copy, "build")
    assert build.returncode == 0, build.stderr
    assert llmdash(copy, "build", "--check").returncode == 0
    text = generated_text(copy)
    assert "histogram_quantile(0.95, " in text and "histogram_quantile(0.99, " not in text
    assert ":llm_ttft_seconds:p95_rate5m" in text and ":p99_" not in text
    assert "LLMServingTTFTP95High" in text and "LLMServingTTFTP99High" not in text
    vllm = json.loads((copy / "generated/dashboards/vllm.json").read_text())
    titles = {p["title"] for p in vllm["panels"]}
    assert {"TTFT p95", "ITL p95"} <= titles and not any("p99" in t for t in titles)
    fleet = json.loads((copy / "generated/dashboards/fleet.json").read_text())
    models = next(p for p in fleet["panels"] if p["title"] == "Models, worst first")
    assert any(":llm_ttft_seconds:p95_rate5m" in t["expr"] for t in models["targets"])   # the TTFT column stays
    assert (copy / "generated/runbooks/LLMServingTTFTP95High.md").is_file()
    assert not (copy / "generated/runbooks/LLMServingTTFTP99High.md").exists()


def test_renaming_an_alert_and_a_panel_title_follows_everywhere(copy):
    edit(copy, 'PREEMPTIONS_HIGH = f"{ALERT_PREFIX}PreemptionsHigh"',
         'PREEMPTIONS_HIGH = f"{ALERT_PREFIX}KVCacheThrashing"')
    edit(copy, 'Panel.DIVERGENCE: "Latency vs throughput divergence"',
         'Panel.DIVERGENCE: "Latency up, throughput flat"')
    config = copy / "llmdash.yaml"
    config.write_text("alerts:\n  runbook_url_template: https://git.example.com/ops/runbooks/{alertname}.md\n")
    build = llmdash(copy, "build")
    assert build.returncode == 0, build.stderr
    text = generated_text(copy)
    assert "LLMServingPreemptionsHigh" not in text and "Latency vs throughput divergence" not in text
    rules = (copy / "generated/rules/vllm.rules.yaml").read_text()
    assert "alert: LLMServingKVCacheThrashing" in rules
    assert "https://git.example.com/ops/runbooks/LLMServingKVCacheThrashing.md" in rules
    inhibit = (copy / "generated/alertmanager/llmdash-inhibit-rules.yaml").read_text()
    assert 'alertname="LLMServingKVCacheThrashing"' in inhibit
    fleet = json.loads((copy / "generated/dashboards/fleet.json").read_text())
    [pages] = [a for a in fleet["annotations"]["list"] if a["name"] == "Preemption pages"]
    assert 'alertname="LLMServingKVCacheThrashing"' in pages["target"]["expr"]
    vllm = json.loads((copy / "generated/dashboards/vllm.json").read_text())
    panels = {p["title"]: p for p in vllm["panels"]}
    # the renamed panel keeps its fixed-window exemption (the linter keys it by its stable key) and its runbook link
    assert panels["Latency up, throughput flat"]["links"][0]["url"].endswith("LLMServingLatencyThroughputDivergence.md")
    assert panels["Preemptions/s"]["links"][0]["url"].endswith("/LLMServingKVCacheThrashing.md")
    runbook = (copy / "generated/runbooks/LLMServingLatencyThroughputDivergence.md").read_text()
    assert "LLMServingKVCacheThrashing" in runbook and not re.search(r"LLMServingPreemptionsHigh", runbook)
    assert (copy / "generated/runbooks/LLMServingKVCacheThrashing.md").is_file()
