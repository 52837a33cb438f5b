"""Specification of ``profiler.dumps``: the live process's per-block stats as text."""

from __future__ import annotations

import csv
import io
import json

import pytest

import profiler
from profiler import hierarchical_timer


@pytest.fixture
def two_blocks(fake_clock):
    """``step`` runs once for 3 s; ``poll`` four times for 0.5 s each (2 s)."""
    with hierarchical_timer("step"):
        fake_clock.advance(3.0)
    for _ in range(4):
        with hierarchical_timer("poll"):
            fake_clock.advance(0.5)


def blocks(text):
    return json.loads(text)["blocks"]


def test_dumps_is_exported_from_the_package():
    assert "dumps" in profiler.__all__


def test_the_table_lists_every_block_with_its_figures(two_blocks):
    text = profiler.dumps()
    assert text.startswith("rlprof stats: wall time 5.00 s, 2 blocks, sorted by total (descending)")
    assert any(line.split()[-1] == "poll" and "500.00 ms" in line for line in text.splitlines())


def test_json_sorts_by_total_largest_first_by_default(two_blocks):
    assert [block["name"] for block in blocks(profiler.dumps(format="json"))] == ["step", "poll"]


def test_json_sorts_by_calls_when_asked(two_blocks):
    assert [block["name"] for block in blocks(profiler.dumps(format="json", sort_by="count"))] == [
        "poll", "step"]


def test_ascending_puts_the_smallest_first(two_blocks):
    listed = blocks(profiler.dumps(format="json", sort_by="avg", ascending=True))
    assert [(block["name"], block["avg"]) for block in listed] == [("poll", 0.5), ("step", 3.0)]


def test_json_names_the_columns_it_has(two_blocks):
    assert json.loads(profiler.dumps(format="json"))["columns"] == [
        "total", "self", "count", "avg", "share"]


def test_csv_has_a_row_per_block(two_blocks):
    rows = list(csv.DictReader(io.StringIO(profiler.dumps(format="csv"))))
    assert [(row["block"], row["count"]) for row in rows] == [("step", "1"), ("poll", "4")]


def test_sorting_by_max_is_refused_while_nodes_do_not_record_it(two_blocks):
    with pytest.raises(ValueError, match="per-call min/max"):
        profiler.dumps(sort_by="max")


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="unknown format"):
        profiler.dumps(format="xml")


def test_reset_clears_the_timers_after_reading_them(two_blocks):
    assert len(blocks(profiler.dumps(format="json", reset=True))) == 2
    assert blocks(profiler.dumps(format="json")) == []


def test_without_reset_the_timers_keep_running(two_blocks):
    profiler.dumps()
    assert len(blocks(profiler.dumps(format="json"))) == 2
