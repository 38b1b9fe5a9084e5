"""Kubernetes manifests for where SREs deploy: the Grafana sidecar, grafana-operator, prometheus-operator.

Layout written under DIR, one kustomization per consumer so each can be applied on its own:

    DIR/kustomization.yaml                              the three below
    DIR/sidecar/llmdash-<engine>.yaml                   ConfigMap, data <engine>.json (kube-prometheus-stack sidecar)
    DIR/grafana-operator/llmdash-<engine>.yaml          GrafanaDashboard (grafana.integreatly.org/v1beta1)
    DIR/prometheus-operator/llmdash-<engine>.yaml       PrometheusRule (monitoring.coreos.com/v1)
    DIR/<each>/kustomization.yaml                       its files, with the namespace
    DIR/grafana-operator-v2/llmdash-<engine>.yaml       GrafanaManifest wrapping the schema v2 Dashboard
                                                        (generated/dashboards-v2/<engine>.json), with its own
                                                        kustomization.yaml and not listed in DIR's: apply it
                                                        instead of grafana-operator/, never both (one uid)

The dashboard JSON inside is exactly generated/dashboards/<engine>.json and the rule groups exactly
generated/rules/<engine>.rules.yaml, from the same build. Everything is rendered and checked
before the first write (a dashboard too big for a ConfigMap refuses the whole run). DIR is often a
directory of the user's GitOps repository: only files llmdash wrote there are ever removed, and a
DIR/kustomization.yaml of the user's own is kept, llmdash's going to DIR/kustomization.llmdash.yaml
(for the user to list in their resources) instead.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from llmdash.atomic import Outcome, quoted, update_outputs
from llmdash.build import render_json
from llmdash.dashboards import v2
from llmdash.delivery.publish import check_all
from llmdash.errors import EXIT_USAGE, LlmdashError

# ValidateConfigMap (kubernetes pkg/apis/core/validation) sums the byte lengths of the data and
# binaryData values and refuses more than MaxSecretSize, 1 MiB.
CONFIGMAP_MAX_BYTES = 1024 * 1024
SIDECAR, OPERATOR, RULES = "sidecar", "grafana-operator", "prometheus-operator"
FOLDERS = (SIDECAR, OPERATOR, RULES)
# grafana-operator's GrafanaDashboard is v1-only (grafana-operator #2760); its GrafanaManifest carries any
# Grafana resource, here the v2 Dashboard (grafana-operator docs/examples/manifests/dashboards-v2).
OPERATOR_V2 = "grafana-operator-v2"
KUSTOMIZATION = "kustomization.yaml"
# Every directory written under DIR -> what it holds: the one list `provision --help` and docs/kubernetes.md show.
DIRECTORIES = {SIDECAR: "ConfigMaps for the Grafana dashboard sidecar", OPERATOR: "GrafanaDashboards",
               RULES: "PrometheusRules",
               OPERATOR_V2: "GrafanaManifests of the schema v2 dashboards, not listed in the top-level "
                            f"{KUSTOMIZATION}: apply it instead of {OPERATOR}/, never both"}
# Where DIR's kustomization goes when DIR/kustomization.yaml is the user's own.
KUSTOMIZATION_ASIDE = "kustomization.llmdash.yaml"
COMMON_LABELS = {"app.kubernetes.io/managed-by": "llmdash"}


def object_name(engine: str) -> str:
    return f"llmdash-{engine}"


def configmap(engine: str, dashboard_json: str, settings) -> dict:
    metadata = {"name": object_name(engine), "namespace": settings.namespace,
                "labels": {**COMMON_LABELS, **settings.dashboard_labels}}
    if settings.folder_annotation:
        metadata["annotations"] = {settings.folder_annotation: settings.folder}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {f"{engine}.json": dashboard_json}}


def configmap_bytes(manifest: dict) -> int:
    """What the API server counts against the 1 MiB limit: the UTF-8 bytes of every data value."""
    return sum(len(value.encode("utf-8")) for value in manifest.get("data", {}).values())


def grafana_dashboard(engine: str, dashboard_json: str, settings) -> dict:
    return {
        "apiVersion": "grafana.integreatly.org/v1beta1", "kind": "GrafanaDashboard",
        "metadata": {"name": object_name(engine), "namespace": settings.namespace, "labels": dict(COMMON_LABELS)},
        "spec": {"instanceSelector": {"matchLabels": dict(settings.instance_selector)}, "folder": settings.folder,
                 "json": dashboard_json},
    }


def grafana_manifest(engine: str, resource: dict, settings) -> dict:
    """The v2 Dashboard resource as the GrafanaManifest's `spec.template`. No `grafana.app/folder` annotation:
    it takes a folder uid that must already exist in Grafana, where GrafanaDashboard's `folder` is a title the
    operator creates."""
    return {
        "apiVersion": "grafana.integreatly.org/v1beta1", "kind": "GrafanaManifest",
        "metadata": {"name": object_name(engine), "namespace": settings.namespace, "labels": dict(COMMON_LABELS)},
        "spec": {"instanceSelector": {"matchLabels": dict(settings.instance_selector)},
                 "template": {"apiVersion": resource["apiVersion"], "kind": resource["kind"],
                              "metadata": {"name": resource["metadata"]["name"], "labels": dict(COMMON_LABELS)},
                              "spec": resource["spec"]}},
    }


def prometheus_rule(engine: str, rule_model: dict, settings) -> dict:
    return {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
        "metadata": {"name": object_name(engine), "namespace": settings.namespace,
                     "labels": {**COMMON_LABELS, **settings.rule_labels}},
        "spec": {"groups": rule_model["groups"]},
    }


def kustomization(namespace: str, resources: list[str]) -> dict:
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": namespace,
            "resources": sorted(resources)}


def manifest_files(dashboards: dict[str, dict], rules: dict[str, dict], settings) -> dict[str, str]:
    """Relative path under DIR -> YAML text; raises (exit 2) before anything is written."""
    check_all(dashboards)
    files: dict[str, dict] = {}
    for engine, model in sorted(dashboards.items()):
        text = render_json(model)
        sidecar = configmap(engine, text, settings)
        size = configmap_bytes(sidecar)
        if size > CONFIGMAP_MAX_BYTES:
            raise LlmdashError(f"dashboard {engine} is {size} bytes, over the {CONFIGMAP_MAX_BYTES}-byte ConfigMap "
                               "limit; nothing was written", EXIT_USAGE)
        files[f"{SIDECAR}/{object_name(engine)}.yaml"] = sidecar
        files[f"{OPERATOR}/{object_name(engine)}.yaml"] = grafana_dashboard(engine, text, settings)
        files[f"{OPERATOR_V2}/{object_name(engine)}.yaml"] = grafana_manifest(engine, v2.rendered(model), settings)
    for engine, model in sorted(rules.items()):
        files[f"{RULES}/{object_name(engine)}.yaml"] = prometheus_rule(engine, model, settings)
    for folder in (*FOLDERS, OPERATOR_V2):
        listed = [path.split("/", 1)[1] for path in files if path.startswith(folder + "/")]
        files[f"{folder}/{KUSTOMIZATION}"] = kustomization(settings.namespace, listed)
    files[KUSTOMIZATION] = kustomization(settings.namespace, list(FOLDERS))
    return {path: render_yaml(manifest) for path, manifest in files.items()}


def write_manifests(dashboards: dict[str, dict], rules: dict[str, dict], directory: str | Path,
                    settings) -> Outcome:
    """Write the layout; returns what was written, removed (llmdash's manifests no longer built) and left alone."""
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise LlmdashError(f"{quoted(root)} exists and is not a directory", EXIT_USAGE)
    files = manifest_files(dashboards, rules, settings)
    return update_outputs(root, files, (*FOLDERS, OPERATOR_V2, KUSTOMIZATION, KUSTOMIZATION_ASIDE),
                          aside={KUSTOMIZATION: KUSTOMIZATION_ASIDE})


class _BlockStrings(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """Multi-line strings (the dashboard JSON) as `|` blocks, so the manifests stay readable in review; libyaml's
    emitter where installed (the same text; writing every manifest took 10 s with the pure-Python emitter, 2.4 s
    with it)."""


_BlockStrings.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def render_yaml(manifest: dict) -> str:
    return "# Generated by llmdash; do not edit.\n" + yaml.dump(
        manifest, Dumper=_BlockStrings, sort_keys=False, width=10_000, allow_unicode=True)
