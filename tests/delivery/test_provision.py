"""`llmdash provision DIR`: a file-provisioning layout Grafana can load as-is
(Grafana's docs/sources/administration/provisioning/index.md)."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from click.testing import CliRunner

from llmdash.cli.delivery import provision_command
from llmdash.delivery.provision import write_provisioning
from llmdash.errors import EXIT_OK, EXIT_USAGE, LlmdashError
from tests.support.builds import default_dashboards

pytestmark = pytest.mark.publish


def provision(directory, dashboards=None, **kwargs):
    kwargs.setdefault("folder_uid", "llm-serving")
    kwargs.setdefault("folder_title", "LLM serving")
    return write_provisioning(copy.deepcopy(dashboards or default_dashboards()), directory, **kwargs)


def test_provider_yaml_is_a_grafana_file_provider(tmp_path):
    provision(tmp_path, grafana_path="/srv/grafana/llmdash")
    provider = yaml.safe_load((tmp_path / "provisioning/dashboards/llmdash.yaml").read_text())
    assert provider["apiVersion"] == 1
    [entry] = provider["providers"]
    assert entry["type"] == "file"
    assert entry["folder"] == "LLM serving" and entry["folderUid"] == "llm-serving"
    assert entry["allowUiUpdates"] is False
    assert entry["options"] == {"path": "/srv/grafana/llmdash", "foldersFromFilesStructure": False}


def test_dashboard_files_are_raw_models_of_the_build(tmp_path, default_build):
    provision(tmp_path)
    files = sorted(p.name for p in (tmp_path / "dashboards").glob("*.json"))
    assert files == sorted(f"{stem}.json" for stem in default_build)
    for stem, dashboard in default_build.items():
        model = json.loads((tmp_path / "dashboards" / f"{stem}.json").read_text())
        assert "dashboard" not in model                      # no API wrapper: Grafana reads the model itself
        assert model["uid"] == dashboard["uid"] and model["id"] is None
        assert model["panels"] == dashboard["panels"]


def test_provisioning_twice_is_byte_identical(tmp_path):
    provision(tmp_path)
    first = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    provision(tmp_path)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == first


def test_dropped_engine_file_is_removed_but_user_files_stay(tmp_path, default_build):
    provision(tmp_path)
    user_file = tmp_path / "dashboards" / "team-notes.json"
    user_file.write_text(json.dumps({"uid": "team-notes", "title": "Ours"}))
    outcome = provision(tmp_path, {"vllm": default_build["vllm"]})
    assert sorted(p.name for p in (tmp_path / "dashboards").glob("*.json")) == ["team-notes.json", "vllm.json"]
    assert "dashboards/sglang.json" in outcome.removed and outcome.foreign == ["dashboards/team-notes.json"]


def test_invalid_dashboard_writes_nothing(tmp_path, default_build):
    broken = copy.deepcopy(default_build)
    broken["vllm"]["uid"] = "Not A Valid UID"
    target = tmp_path / "out"
    with pytest.raises(LlmdashError) as error:
        provision(target, broken)
    assert error.value.exit_code == EXIT_USAGE and "vllm is invalid" in str(error.value)
    assert not target.exists()


@pytest.mark.parametrize("grafana_path, expected", [("relative/path", "must be absolute")])
def test_relative_grafana_path_is_refused(tmp_path, grafana_path, expected):
    with pytest.raises(LlmdashError) as error:
        provision(tmp_path / "out", grafana_path=grafana_path)
    assert error.value.exit_code == EXIT_USAGE and expected in str(error.value)
    assert not (tmp_path / "out").exists()


def test_cli_writes_layout_and_names_each_file(tmp_path, default_build):
    result = CliRunner().invoke(provision_command, [str(tmp_path / "gitops")])
    assert result.exit_code == EXIT_OK, result.output
    assert "provisioning/dashboards/llmdash.yaml" in result.output
    assert result.output.count(".json") == len(default_build)


def test_cli_target_that_is_a_file_is_exit_2(tmp_path):
    target = tmp_path / "taken"
    target.write_text("")
    result = CliRunner().invoke(provision_command, [str(target)])
    assert result.exit_code == EXIT_USAGE and "is a file" in result.stderr
    with pytest.raises(LlmdashError, match="is not a directory"):
        provision(target)


def test_cli_uses_folder_from_config(tmp_path):
    config = tmp_path / "llmdash.yaml"
    config.write_text("grafana:\n  folder_uid: inference\n  folder_title: Inference\n")
    result = CliRunner().invoke(provision_command, [str(tmp_path / "out"), "--config", str(config)])
    assert result.exit_code == EXIT_OK, result.output
    provider = yaml.safe_load((tmp_path / "out/provisioning/dashboards/llmdash.yaml").read_text())
    assert provider["providers"][0]["folderUid"] == "inference"
    assert provider["providers"][0]["folder"] == "Inference"
