"""`llmdash provision` into a directory of the user's GitOps repository: their manifests, dashboards and
kustomization.yaml stay as they are; only what llmdash wrote there is ever replaced or removed."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from llmdash.cli.delivery import provision_command
from llmdash.config import KubernetesSettings
from llmdash.delivery.kubernetes import KUSTOMIZATION_ASIDE, write_manifests
from llmdash.delivery.provision import write_provisioning
from llmdash.errors import EXIT_OK, EXIT_USAGE
from tests.support.builds import default_dashboards, default_rules
from tests.support.trees import plant, snapshot

THEIR_KUSTOMIZATION = "resources:\n  - sidecar\n  - ../base\npatches:\n  - path: labels.yaml\n"
THEIRS = {"kustomization.yaml": THEIR_KUSTOMIZATION,
          "sidecar/team-dashboard.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: team}\n",
          "grafana-operator/grafana.yaml": "kind: Grafana\n",
          "prometheus-operator/node-rules.yaml": "kind: PrometheusRule\n"}


def provision_kubernetes(out: Path):
    return CliRunner().invoke(provision_command, ["--format", "kubernetes", str(out)])


def without(models: dict[str, dict], engine: str) -> dict[str, dict]:
    return {name: model for name, model in models.items() if name != engine}


def test_kubernetes_keeps_the_users_manifests_and_kustomization(tmp_path):
    theirs = plant(tmp_path, THEIRS)
    result = provision_kubernetes(tmp_path)
    assert result.exit_code == EXIT_OK, result.output
    after = snapshot(tmp_path)
    assert {rel: after[rel] for rel in theirs} == theirs
    ours = yaml.safe_load((tmp_path / KUSTOMIZATION_ASIDE).read_text())
    assert ours["resources"] == ["grafana-operator", "prometheus-operator", "sidecar"]
    assert f"note: {tmp_path}/kustomization.yaml is not llmdash's, so it was kept and llmdash's is " \
           f"{tmp_path}/{KUSTOMIZATION_ASIDE}" in result.output
    assert "left alone 3 files llmdash did not write: 1 in grafana-operator/, 1 in prometheus-operator/, " \
           "1 in sidecar/" in result.output
    # a second run with an engine dropped removes that engine's manifests and nothing of theirs
    write_manifests(without(default_dashboards(), "tgi"), without(default_rules(), "tgi"), tmp_path,
                    KubernetesSettings())
    after = snapshot(tmp_path)
    assert {rel: after[rel] for rel in theirs} == theirs
    assert not list(tmp_path.rglob("llmdash-tgi.yaml")) and (tmp_path / "sidecar/llmdash-vllm.yaml").exists()


def test_kubernetes_own_kustomization_is_updated_and_an_identical_one_adopted(tmp_path):
    write_manifests(default_dashboards(), default_rules(), tmp_path, KubernetesSettings())
    (tmp_path / ".llmdash-manifest.json").unlink()           # as an older llmdash left it: no manifest
    outcome = write_manifests(default_dashboards(), default_rules(), tmp_path, KubernetesSettings())
    assert outcome.diverted == {} and outcome.written == []   # exactly what llmdash writes: adopted
    outcome = write_manifests(default_dashboards(), default_rules(), tmp_path, KubernetesSettings(namespace="serving"))
    assert outcome.diverted == {} and "kustomization.yaml" in outcome.written   # ours now: updated in place
    assert yaml.safe_load((tmp_path / "kustomization.yaml").read_text())["namespace"] == "serving"
    assert not (tmp_path / KUSTOMIZATION_ASIDE).exists()


def test_kubernetes_kustomization_replaced_by_the_users_own_is_kept(tmp_path):
    write_manifests(default_dashboards(), default_rules(), tmp_path, KubernetesSettings())
    (tmp_path / "kustomization.yaml").write_text(THEIR_KUSTOMIZATION)   # they took the file over
    outcome = write_manifests(default_dashboards(), default_rules(), tmp_path, KubernetesSettings())
    assert (tmp_path / "kustomization.yaml").read_text() == THEIR_KUSTOMIZATION
    assert outcome.diverted == {"kustomization.yaml": KUSTOMIZATION_ASIDE} and outcome.edited == []
    assert outcome.written == [KUSTOMIZATION_ASIDE]
    (tmp_path / "kustomization.yaml").unlink()                          # and gave it back
    outcome = write_manifests(default_dashboards(), default_rules(), tmp_path, KubernetesSettings())
    assert outcome.written == ["kustomization.yaml"] and outcome.removed == [KUSTOMIZATION_ASIDE]


def test_files_layout_keeps_a_users_dashboard_even_with_an_llmdash_uid(tmp_path):
    copied = {**default_dashboards()["vllm"], "uid": "llmdash-vllm-team-copy", "title": "Our vLLM"}
    theirs = plant(tmp_path, {"dashboards/vllm-team-copy.json": json.dumps(copied),
                              "provisioning/dashboards/team.yaml": "apiVersion: 1\nproviders: []\n"})
    kwargs = {"folder_uid": "llm-serving", "folder_title": "LLM serving"}
    write_provisioning(copy.deepcopy(default_dashboards()), tmp_path, **kwargs)
    outcome = write_provisioning(copy.deepcopy(without(default_dashboards(), "tgi")), tmp_path, **kwargs)
    assert outcome.removed == ["dashboards/tgi.json"]
    after = snapshot(tmp_path)
    assert {rel: after[rel] for rel in theirs} == theirs
    assert sorted(outcome.foreign) == sorted(theirs)


@pytest.mark.parametrize("layout, link", [("files", "dashboards"), ("files", "provisioning"),
                                          ("kubernetes", "sidecar")])
def test_a_symlinked_directory_is_refused_with_one_line(tmp_path, layout, link):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    plant(elsewhere, {"keep.yaml": "x: 1\n"})
    out.mkdir()
    (out / link).symlink_to(elsewhere, target_is_directory=True)
    result = CliRunner().invoke(provision_command, ["--format", layout, str(out)])
    assert result.exit_code == EXIT_USAGE and result.stderr.count("\n") == 1, result.output
    assert f"{str(out / link)!r} is a symlink" in result.stderr
    assert snapshot(elsewhere) == {"keep.yaml": b"x: 1\n"} and sorted(p.name for p in out.iterdir()) == [link]
