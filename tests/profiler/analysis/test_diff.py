"""Specification of ``diff_runs``: per-call judgement, impact order, new and gone blocks."""

from __future__ import annotations

import csv
import io
import json

import pytest

from profiler.analysis.diff import UNTIMED_ROW, diff_runs, render_diff


def run(wall, **blocks):
    """A normalized tree with one top-level block per keyword: name=(total, count)."""
    children = [{"name": name, "total": total, "count": count, "self": total, "children": []}
                for name, (total, count) in blocks.items()]
    return {"name": "root", "total": wall, "count": 1, "self": 0.0, "children": children}


BASE = run(10.0, policy=(4.0, 100), env=(5.0, 100), log=(0.1, 10), old=(0.5, 5))
NEW = run(12.0, policy=(4.1, 100), env=(7.0, 100), log=(0.05, 10), fresh=(0.3, 3))


def statuses(diff):
    return {change.block: change.status for change in diff.changes}


def test_a_block_slower_per_call_beyond_the_threshold_is_slower():
    assert statuses(diff_runs(BASE, NEW))["env"] == "slower"


def test_a_change_within_the_threshold_is_the_same():
    assert statuses(diff_runs(BASE, NEW))["policy"] == "same"


def test_a_block_faster_per_call_beyond_the_threshold_is_faster():
    assert statuses(diff_runs(BASE, NEW))["log"] == "faster"


def test_blocks_in_one_run_only_are_new_or_gone():
    assert (statuses(diff_runs(BASE, NEW))["fresh"], statuses(diff_runs(BASE, NEW))["old"]) == (
        "new", "gone")


def test_blocks_are_ordered_by_the_absolute_change_of_their_total():
    assert [change.block for change in diff_runs(BASE, NEW).changes] == [
        "env", "old", "fresh", "policy", "log"]


def test_the_per_call_change_is_relative_to_the_base():
    env = diff_runs(BASE, NEW).changes[0]
    assert env.per_call_change_share == pytest.approx(0.4)
    assert env.total_change == pytest.approx(2.0)


def test_judging_per_call_ignores_a_longer_run():
    longer = run(20.0, policy=(8.0, 200), env=(10.0, 200), log=(0.2, 20), old=(1.0, 10))
    assert diff_runs(BASE, longer).regressions == []


def test_a_higher_threshold_forgives_more():
    assert diff_runs(BASE, NEW, threshold_percent=50).regressions == []


def test_regressions_are_the_slower_blocks():
    assert [change.block for change in diff_runs(BASE, NEW).regressions] == ["env"]


def test_blocks_under_the_noise_floor_in_both_runs_are_ignored():
    assert "log" not in statuses(diff_runs(BASE, NEW, min_time=0.2))


def test_blocks_are_matched_by_path_not_by_name():
    nested = {"name": "root", "total": 1.0, "count": 1, "self": 0.0, "children": [
        {"name": "eval", "total": 1.0, "count": 1, "self": 0.0, "children": [
            {"name": "env", "total": 1.0, "count": 1, "self": 1.0, "children": []}]}]}
    assert statuses(diff_runs(BASE, nested))["eval/env"] == "new"


def test_the_table_lists_changed_blocks_and_hides_unchanged_ones():
    text = render_diff(diff_runs(BASE, NEW))
    assert "wall time 10.00 s -> 12.00 s (+20.0%)" in text
    assert "1 slower, 1 faster; 1 new, 1 gone" in text
    assert text.splitlines()[3].endswith("  env")
    assert not any(line.endswith("  policy") for line in text.splitlines())
    assert "1 more blocks not shown" in text


def test_the_table_says_so_when_nothing_changed():
    assert "no block changed beyond the threshold" in render_diff(diff_runs(BASE, BASE))


def test_json_lists_every_block_and_the_regressions():
    document = json.loads(render_diff(diff_runs(BASE, NEW), "json"))
    assert document["regressions"] == ["env"]
    assert [block["block"] for block in document["blocks"]][0] == "env"
    assert document["blocks"][0]["base"] == {"total": 5.0, "count": 100, "avg": 0.05}


def test_csv_leaves_the_missing_side_empty():
    text = render_diff(diff_runs(BASE, NEW), "csv")
    rows = {row["block"]: row for row in csv.DictReader(io.StringIO(text))}
    assert rows["fresh"]["base_total_s"] == ""
    assert float(rows["fresh"]["new_total_s"]) == pytest.approx(0.3)


def test_the_time_outside_any_block_is_a_row_of_its_own():
    base = {**run(10.0, env=(5.0, 100)), "self": 5.0}
    new = {**run(27.0, env=(5.0, 100)), "self": 22.0}
    untimed = diff_runs(base, new).changes[0]
    assert untimed.block == UNTIMED_ROW
    assert untimed.total_change == pytest.approx(17.0)
    assert untimed.status == "slower"
    assert render_diff(diff_runs(base, new)).splitlines()[3].endswith(f"  {UNTIMED_ROW}")


def test_runs_timed_throughout_get_no_untimed_row():
    assert UNTIMED_ROW not in statuses(diff_runs(BASE, NEW))
