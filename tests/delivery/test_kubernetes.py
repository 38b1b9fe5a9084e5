"""`llmdash provision --format kubernetes DIR`: manifests that the real CRD and ConfigMap schemas accept,
carrying exactly what generated/ holds (tests/support/k8s_schemas/SOURCES.md says where the schemas come from)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from llmdash.atomic import MANIFEST
from llmdash.build import build_dashboards, build_rule_files
from llmdash.cli.delivery import provision_command
from llmdash.config import Config, KubernetesSettings, load_config
from llmdash.delivery.kubernetes import CONFIGMAP_MAX_BYTES, manifest_files, write_manifests
from llmdash.errors import EXIT_OK, EXIT_USAGE, LlmdashError
from tests.support.paths import ROOT, SUPPORT

SCHEMAS = SUPPORT / "k8s_schemas"
GO_ONLY_PATTERN = "^(?i)(abort|warn)?$"


def strictify(schema):
    """Close every object that lists its properties, as the API server's strict field validation does."""
    if isinstance(schema, dict):
        closed = {key: strictify(value) for key, value in schema.items()}
        if "properties" in closed and "additionalProperties" not in closed \
                and not closed.get("x-kubernetes-preserve-unknown-fields"):
            closed["additionalProperties"] = False
        return closed
    if isinstance(schema, list):
        return [strictify(item) for item in schema]
    return schema


def load_schema(name: str) -> dict:
    text = (SCHEMAS / name).read_text()
    # Go RE2 allows a leading global flag Python's re rejects; (?i:...) means the same.
    text = text.replace(json.dumps(GO_ONLY_PATTERN)[1:-1], "^(?i:abort|warn)?$")
    return strictify(json.loads(text))


def validator(name: str):
    schema = load_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


VALIDATORS = {
    "ConfigMap": validator("configmap.v1.json"),
    "GrafanaDashboard": validator("grafanadashboard.grafana.integreatly.org.v1beta1.json"),
    "GrafanaManifest": validator("grafanamanifest.grafana.integreatly.org.v1beta1.json"),
    "PrometheusRule": validator("prometheusrule.monitoring.coreos.com.v1.json"),
    "Kustomization": validator("kustomization.json"),
}


def problems(manifest: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in VALIDATORS[manifest["kind"]].iter_errors(manifest)]


def load(text: str):
    """A manifest parsed by libyaml where installed: the same objects, and the dashboards' JSON blocks take the
    pure-Python parser seconds."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    out = tmp_path_factory.mktemp("k8s")
    result = CliRunner().invoke(provision_command, ["--format", "kubernetes", str(out)])
    assert result.exit_code == EXIT_OK, result.output
    manifests = {str(p.relative_to(out)): load(p.read_text()) for p in sorted(out.rglob("*.yaml"))}
    return out, manifests


def test_every_engine_gets_a_configmap_a_grafanadashboard_and_a_prometheusrule(written):
    _, manifests = written
    kinds = {}
    for manifest in manifests.values():
        kinds.setdefault(manifest["kind"], []).append(manifest.get("metadata", {}).get("name"))
    engines = sorted(f"llmdash-{engine}" for engine in Config().engine_ids)
    assert sorted(kinds["ConfigMap"]) == sorted(kinds["GrafanaDashboard"]) == sorted(engines + ["llmdash-fleet"])
    assert sorted(kinds["GrafanaManifest"]) == sorted(engines + ["llmdash-fleet"])
    assert sorted(kinds["PrometheusRule"]) == engines
    assert len(kinds["Kustomization"]) == 5


def test_every_manifest_validates_against_the_real_schemas(written):
    _, manifests = written
    for path, manifest in manifests.items():
        assert problems(manifest) == [], path


@pytest.mark.parametrize("kind, path, typo", [
    ("GrafanaDashboard", ("spec",), "instanceSelectr"),
    ("GrafanaManifest", ("spec",), "instanceSelectr"),
    ("GrafanaManifest", ("spec", "template", "metadata"), "annotation"),
    ("PrometheusRule", ("spec", "groups", 0, "rules", 0), "recrod"),
    ("ConfigMap", ("metadata",), "label"),
])
def test_a_misspelled_field_fails_validation(written, kind, path, typo):
    _, manifests = written
    manifest = copy.deepcopy(next(m for m in manifests.values() if m["kind"] == kind))
    target = manifest
    for key in path:
        target = target[key]
    target[typo] = {"dashboards": "grafana"} if kind != "PrometheusRule" else "x"
    assert any(typo in p for p in problems(manifest))


def test_missing_instance_selector_fails_validation(written):
    _, manifests = written
    manifest = copy.deepcopy(next(m for m in manifests.values() if m["kind"] == "GrafanaDashboard"))
    del manifest["spec"]["instanceSelector"]
    assert problems(manifest)


def test_embedded_json_is_generated_dashboards_byte_for_byte(written):
    _, manifests = written
    for engine in Config().engine_ids:
        committed = (ROOT / "generated" / "dashboards" / f"{engine}.json").read_text()
        assert manifests[f"sidecar/llmdash-{engine}.yaml"]["data"] == {f"{engine}.json": committed}
        assert manifests[f"grafana-operator/llmdash-{engine}.yaml"]["spec"]["json"] == committed


def test_grafana_manifests_carry_the_generated_v2_dashboards(written):
    _, manifests = written
    for name in [*Config().engine_ids, "fleet"]:
        committed = json.loads((ROOT / "generated" / "dashboards-v2" / f"{name}.json").read_text())
        manifest = manifests[f"grafana-operator-v2/llmdash-{name}.yaml"]
        template = manifest["spec"]["template"]
        assert (template["apiVersion"], template["kind"]) == ("dashboard.grafana.app/v2", "Dashboard")
        assert template["metadata"]["name"] == committed["metadata"]["name"] == f"llmdash-{name}"
        assert template["spec"] == committed["spec"]
        assert manifest["spec"]["instanceSelector"] == {"matchLabels": {"dashboards": "grafana"}}


def test_grafana_manifest_without_a_template_name_fails_validation(written):
    _, manifests = written
    manifest = copy.deepcopy(manifests["grafana-operator-v2/llmdash-vllm.yaml"])
    del manifest["spec"]["template"]["metadata"]["name"]
    assert any("'name' is a required property" in p for p in problems(manifest))


def test_rule_groups_are_generated_rules(written):
    _, manifests = written
    for engine in Config().engine_ids:
        committed = yaml.safe_load((ROOT / "generated" / "rules" / f"{engine}.rules.yaml").read_text())
        assert manifests[f"prometheus-operator/llmdash-{engine}.yaml"]["spec"]["groups"] == committed["groups"]


def test_defaults_match_kube_prometheus_stack_and_grafana_operator(written):
    _, manifests = written
    vllm = {m["kind"]: m for p, m in manifests.items() if p.endswith("llmdash-vllm.yaml")}
    assert vllm["ConfigMap"]["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert vllm["ConfigMap"]["metadata"]["annotations"] == {"grafana_folder": "LLM serving"}
    assert vllm["PrometheusRule"]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert vllm["GrafanaDashboard"]["spec"]["instanceSelector"] == {"matchLabels": {"dashboards": "grafana"}}
    assert vllm["GrafanaDashboard"]["spec"]["folder"] == "LLM serving"
    assert {m["metadata"]["namespace"] for m in vllm.values()} == {"monitoring"}


def test_each_kustomization_lists_exactly_the_files_beside_it(written):
    out, manifests = written
    for path, manifest in manifests.items():
        if manifest["kind"] != "Kustomization":
            continue
        folder = (out / path).parent
        # DIR's own leaves out grafana-operator-v2: the same dashboards as grafana-operator/, one uid each,
        # for a Grafana 13 that takes v2; applying both would fight over them.
        beside = sorted(p.name for p in folder.iterdir()
                        if p.name not in ("kustomization.yaml", MANIFEST, "grafana-operator-v2"))
        assert manifest["resources"] == beside, path
        assert manifest["namespace"] == "monitoring"
    assert manifests["kustomization.yaml"]["resources"] == ["grafana-operator", "prometheus-operator", "sidecar"]


def test_settings_from_the_config_reach_the_manifests(tmp_path):
    config_file = tmp_path / "llmdash.yaml"
    config_file.write_text(yaml.safe_dump({"engines": ["vllm"], "kubernetes": {
        "namespace": "llm-ops", "dashboard_labels": {"grafana_dashboard": "llm"},
        "folder_annotation": "k8s-sidecar-target-directory",
        "folder": "Inference", "instance_selector": {"app.kubernetes.io/instance": "grafana-prod"},
        "rule_labels": {"release": "prom", "team": "inference"}}}))
    config = load_config(config_file)
    files = manifest_files(build_dashboards(config), build_rule_files(config), config.kubernetes)
    manifests = {path: load(text) for path, text in files.items()}
    assert all(problems(m) == [] for m in manifests.values())
    assert manifests["sidecar/llmdash-vllm.yaml"]["metadata"]["annotations"] == {
        "k8s-sidecar-target-directory": "Inference"}
    assert manifests["sidecar/llmdash-vllm.yaml"]["metadata"]["labels"]["grafana_dashboard"] == "llm"
    operator = manifests["grafana-operator/llmdash-vllm.yaml"]["spec"]
    assert operator["instanceSelector"]["matchLabels"] == {"app.kubernetes.io/instance": "grafana-prod"}
    assert operator["folder"] == "Inference"
    rule = manifests["prometheus-operator/llmdash-vllm.yaml"]["metadata"]
    assert rule["labels"]["team"] == "inference" and rule["namespace"] == "llm-ops"


@pytest.mark.parametrize("settings, key", [
    ({"namespace": "LLM_Ops"}, "kubernetes.namespace"),
    ({"namespace": "a" * 64}, "kubernetes.namespace"),
    ({"dashboard_labels": {"grafana dashboard": "1"}}, "kubernetes.dashboard_labels"),
    ({"rule_labels": {"release": "kube prometheus"}}, "kubernetes.rule_labels"),
    ({"instance_selector": {"Example.COM/x": "y"}}, "kubernetes.instance_selector"),
    ({"rule_labels": {"release": 1}}, "kubernetes.rule_labels"),
    ({"folder_annotation": "-folder"}, "kubernetes.folder_annotation"),
])
def test_bad_kubernetes_settings_are_one_line_errors(tmp_path, settings, key):
    config_file = tmp_path / "llmdash.yaml"
    config_file.write_text(yaml.safe_dump({"kubernetes": settings}))
    with pytest.raises(LlmdashError) as error:
        load_config(config_file)
    assert error.value.exit_code == EXIT_USAGE and key in str(error.value) and "\n" not in str(error.value)


def test_a_dashboard_over_one_mib_is_refused_and_nothing_is_written(tmp_path, default_build, default_rules):
    dashboards = copy.deepcopy(default_build)
    dashboards["sglang"]["description"] = "x" * CONFIGMAP_MAX_BYTES
    out = tmp_path / "out"
    with pytest.raises(LlmdashError) as error:
        write_manifests(dashboards, default_rules, out, KubernetesSettings())
    assert error.value.exit_code == EXIT_USAGE
    assert "dashboard sglang" in str(error.value) and "1048576" in str(error.value)
    assert not out.exists()


def test_the_limit_counts_utf8_bytes_of_the_data(tmp_path, default_build):
    dashboards = {"vllm": copy.deepcopy(default_build["vllm"])}
    size = len((ROOT / "generated/dashboards/vllm.json").read_text().encode())
    # Each "é" is 2 bytes in UTF-8 but 1 character: fits by characters, not by bytes.
    dashboards["vllm"]["description"] += "é" * ((CONFIGMAP_MAX_BYTES - size) // 2 + 10)
    with pytest.raises(LlmdashError):
        manifest_files(dashboards, {}, KubernetesSettings())
    padding = "é" * ((CONFIGMAP_MAX_BYTES - size) // 2 - 10)
    dashboards["vllm"]["description"] = default_build["vllm"]["description"] + padding
    assert manifest_files(dashboards, {}, KubernetesSettings())


def test_cli_refuses_oversized_dashboard_with_one_line_exit_2(tmp_path, monkeypatch, default_build):
    import llmdash.cli.delivery as delivery
    big = copy.deepcopy(default_build)
    big["vllm"]["description"] = "x" * (CONFIGMAP_MAX_BYTES + 1)
    monkeypatch.setattr(delivery, "build_dashboards", lambda config: big)
    out = tmp_path / "out"
    result = CliRunner().invoke(provision_command, ["--format", "kubernetes", str(out)])
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.startswith("error: dashboard vllm is") and result.stderr.count("\n") == 1
    assert not out.exists()


def test_rerun_rewrites_nothing_and_a_dropped_engine_is_removed(tmp_path, default_build, default_rules):
    write_manifests(default_build, default_rules, tmp_path, KubernetesSettings())
    assert write_manifests(default_build, default_rules, tmp_path, KubernetesSettings()).writes == {}
    fewer = {k: v for k, v in default_build.items() if k != "lmdeploy"}
    fewer_rules = {k: v for k, v in default_rules.items() if k != "lmdeploy"}
    outcome = write_manifests(fewer, fewer_rules, tmp_path, KubernetesSettings())
    assert "sidecar/llmdash-lmdeploy.yaml" in outcome.removed
    assert not list(tmp_path.rglob("llmdash-lmdeploy.yaml"))
    kustomization = yaml.safe_load((tmp_path / "sidecar/kustomization.yaml").read_text())
    assert "llmdash-lmdeploy.yaml" not in kustomization["resources"]
