"""Layout pictures: a real image of the grid, and --base highlighting exactly the changed panels."""

import struct

import pytest
from click.testing import CliRunner

from llmdash.cli import review as cli_review
from llmdash.review.layout import changed_panels, render_layout
from llmdash.errors import LlmdashError
from tests.review.test_diff import (  # noqa: F401  (repo is a fixture)
    ITL_WHERE, OWN_CODE, _dashboard, _panel, _panel_by_title, repo)


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_png_of_the_grid_has_a_plausible_size(tmp_path):
    picture = render_layout(_dashboard(), tmp_path / "vllm.png")
    width, height = _png_size(picture.path)
    # 24 columns at half an inch, 100 dpi; 27 grid units of height at 0.19 inch plus margins.
    assert width == 1200
    assert 400 < height < 800
    assert picture.highlighted_new == set() and picture.highlighted_old == set()
    assert [p.name for p in tmp_path.iterdir()] == ["vllm.png"]  # no partial file left beside it


def test_svg_names_rows_panels_and_types(tmp_path):
    picture = render_layout(_dashboard(), tmp_path / "vllm.svg")
    svg = picture.path.read_text()
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    # matplotlib embeds text as glyph paths; the title strings appear in the SVG's comments.
    for label in ("Throughput vs latency", "ITL p99", "Preemptions/s", "timeseries"):
        assert label in svg


def test_base_highlights_only_the_changed_panel(tmp_path):
    old, new = _dashboard(), _dashboard()
    _panel_by_title(new, "ITL p99")["targets"][0]["expr"] = "vector(1)"
    picture = render_layout(new, tmp_path / "side-by-side.png", old)
    assert picture.highlighted_new == {ITL_WHERE}
    assert picture.highlighted_old == {ITL_WHERE}
    width, _ = _png_size(picture.path)
    assert width == 2400  # two grids side by side


def test_removed_panel_is_highlighted_on_the_old_side_and_added_on_the_new(tmp_path):
    old, new = _dashboard(), _dashboard()
    new["panels"].remove(_panel_by_title(new, "KV cache usage"))
    new["panels"].append(_panel(30, "Running", 12, 19))
    new["templating"]["list"].pop()
    in_old, in_new, elsewhere = changed_panels(old, new)
    assert in_old == {'row "Preemption" / panel "KV cache usage"': "removed"}
    assert in_new == {'row "Queue" / panel "Running"': "added"}
    assert [c.where for c in elsewhere] == ['variable "model_name"']


def test_unsupported_picture_format_writes_nothing(tmp_path):
    with pytest.raises(LlmdashError, match=r"must end in \.png or \.svg"):
        render_layout(_dashboard(), tmp_path / "vllm.jpg")
    assert list(tmp_path.iterdir()) == []


def test_layout_command_with_base_revision(repo, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.chdir(repo)
    out = tmp_path / "pictures" / "vllm.png"
    result = CliRunner().invoke(cli_review.layout_command, ["vllm", "--out", str(out), "--base", "HEAD~1", OWN_CODE])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"wrote {out}\nhighlighted 1 changed panel(s)\n  {ITL_WHERE}\n"
    assert result.stderr == "building the working tree...\nbuilding revision HEAD~1...\n"
    assert _png_size(out)[0] == 2400


def test_layout_command_unknown_dashboard(repo, monkeypatch):  # noqa: F811
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli_review.layout_command, ["vlm", "--out", "x.png", OWN_CODE])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == "error: unknown dashboard 'vlm' (built: vllm)"


def test_panel_moved_to_another_row_is_highlighted_on_both_sides():
    old, new = _dashboard(), _dashboard()
    _panel_by_title(new, "Waiting")["gridPos"] = {"h": 8, "w": 12, "x": 12, "y": 10}
    _panel_by_title(new, "KV cache usage")["gridPos"]["y"] = 18
    _panel_by_title(new, "Queue")["gridPos"]["y"] = 26
    in_old, in_new, _ = changed_panels(old, new)
    assert in_new == {'row "Preemption" / panel "Waiting"': "changed",
                      'row "Preemption" / panel "KV cache usage"': "changed"}
    assert in_old == {'row "Queue" / panel "Waiting"': "changed",
                      'row "Preemption" / panel "KV cache usage"': "changed"}
