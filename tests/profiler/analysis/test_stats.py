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
        "total", "self", "count", "avg", "min", "max", "share"]


@pytest.fixture
def uneven_calls(fake_clock):
    """``steady`` runs twice for 1 s; ``spiky`` once for 0.1 s and once for 2.9 s."""
    for seconds in (1.0, 1.0):
        with hierarchical_timer("steady"):
            fake_clock.advance(seconds)
    for seconds in (0.1, 2.9):
        with hierarchical_timer("spiky"):
            fake_clock.advance(seconds)


def test_json_gives_each_blocks_shortest_and_longest_call(uneven_calls):
    figures = {block["name"]: (block["min"], block["max"]) for block in blocks(profiler.dumps(format="json"))}
    assert figures == {"steady": (1.0, 1.0), "spiky": (pytest.approx(0.1), pytest.approx(2.9))}


@pytest.mark.parametrize(
    ("sort_by", "ascending", "order"),
    [
        ("max", False, ["spiky", "steady"]),
        ("max", True, ["steady", "spiky"]),
        ("min", False, ["steady", "spiky"]),
        ("min", True, ["spiky", "steady"]),
    ],
)
def test_every_per_call_extreme_sorts_both_ways(uneven_calls, sort_by, ascending, order):
    listed = blocks(profiler.dumps(format="json", sort_by=sort_by, ascending=ascending))
    assert [block["name"] for block in listed] == order


def test_the_table_shows_min_and_max_per_call(uneven_calls):
    header, *rows = profiler.dumps(sort_by="max").splitlines()[1:3]
    assert "min/call" in header and "max/call" in header
    assert rows[0].split()[-1] == "spiky" and "2.90 s" in rows[0]


def test_csv_has_a_row_per_block(two_blocks):
    rows = list(csv.DictReader(io.StringIO(profiler.dumps(format="csv"))))
    assert [(row["block"], row["count"]) for row in rows] == [("step", "1"), ("poll", "4")]


def test_an_unknown_sort_key_is_refused_naming_the_keys_accepted(two_blocks):
    with pytest.raises(ValueError, match="'median'.*total, avg, min, max, count"):
        profiler.dumps(sort_by="median")


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="unknown format"):
        profiler.dumps(format="xml")


def test_reset_starts_the_summary_again_after_reading_it(two_blocks):
    assert len(blocks(profiler.dumps(format="json", reset=True))) == 2
    assert blocks(profiler.dumps(format="json")) == []


def test_reset_leaves_the_timers_whole_for_dump_as_mxnet_resets_only_its_table(two_blocks):
    profiler.dumps(reset=True)
    tree = profiler.get_timer_tree()
    assert {child["name"]: child["count"] for child in tree["children"]} == {"step": 1, "poll": 4}


def test_after_a_reset_the_summary_counts_only_the_runs_since(two_blocks, fake_clock):
    profiler.dumps(reset=True)
    fake_clock.advance(1.0)
    with hierarchical_timer("poll"):
        fake_clock.advance(0.25)
    document = json.loads(profiler.dumps(format="json"))
    (poll,) = document["blocks"]
    assert (poll["name"], poll["count"], poll["total"], document["wall_time"]) == ("poll", 1, 0.25, 1.25)
    assert profiler.dumps().startswith("rlprof stats since the last reset:")


def test_without_reset_the_timers_keep_running(two_blocks):
    profiler.dumps()
    assert len(blocks(profiler.dumps(format="json"))) == 2
