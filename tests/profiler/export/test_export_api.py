"""Specification of the format switch the CLI uses: render by name, write atomically, .json.gz."""

from __future__ import annotations

import gzip
import json

import pytest

from profiler import get_timer_tree, hierarchical_timer
from profiler.export import EXPORT_FORMATS, render, write_export


def test_the_formats_are_named_for_the_cli():
    assert EXPORT_FORMATS == ("chrome", "speedscope", "collapsed", "html", "mlagents", "memory-svg")


def test_an_unknown_format_is_refused_with_the_valid_names(trainer_tree):
    with pytest.raises(ValueError, match="unknown export format 'svg'; choose one of: chrome, speedscope, collapsed, html, mlagents, memory-svg"):
        render(trainer_tree, "svg")


@pytest.mark.parametrize("format_name", EXPORT_FORMATS)
def test_write_export_writes_what_render_returns(format_name, trainer_tree, tmp_path):
    path = write_export(trainer_tree, format_name, tmp_path / "out" / f"run.{format_name}")
    assert path == tmp_path / "out" / f"run.{format_name}"
    assert path.read_text(encoding="utf-8") == render(trainer_tree, format_name)


@pytest.mark.parametrize("format_name", ["chrome", "speedscope"])
def test_json_formats_render_as_json(format_name, trainer_tree):
    assert isinstance(json.loads(render(trainer_tree, format_name)), dict)


def test_a_chrome_trace_ending_in_json_gz_is_gzip_compressed(trainer_tree, tmp_path):
    path = write_export(trainer_tree, "chrome", tmp_path / "trace.json.gz")
    assert json.loads(gzip.decompress(path.read_bytes())) == json.loads(render(trainer_tree, "chrome"))


def test_a_failed_export_leaves_no_file(tmp_path):
    not_a_tree = {"name": "root"}  # no total, no children
    with pytest.raises(KeyError):
        write_export(not_a_tree, "html", tmp_path / "report.html")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_export_keeps_the_previous_file(trainer_tree, tmp_path):
    path = write_export(trainer_tree, "collapsed", tmp_path / "stacks.txt")
    before = path.read_text()
    with pytest.raises(ValueError):
        write_export(trainer_tree, "flamegraph", path)
    assert path.read_text() == before


@pytest.mark.parametrize("format_name", ["chrome", "speedscope"])
def test_json_formats_are_strict_json_even_with_nan_readings(format_name, run_with_nan_readings, strict_json):
    assert isinstance(strict_json(render(run_with_nan_readings, format_name)), dict)


# The memory picture names blocks only where it shades them: its own test covers it.
@pytest.mark.parametrize("format_name", [name for name in EXPORT_FORMATS if name != "memory-svg"])
def test_a_name_with_a_lone_surrogate_is_written_as_its_escape(format_name, fake_clock, tmp_path):
    with hierarchical_timer("load \udcff.bin"):
        fake_clock.advance(1.0)
    path = write_export(get_timer_tree(), format_name, tmp_path / "out")
    text = path.read_text(encoding="utf-8")
    # The name holds the six characters of the escape; JSON formats escape its backslash again.
    assert "load \\udcff.bin" in text.replace("\\\\", "\\")
