"""Specifications of FigureTable: figures added in bulk, written into their nodes when read."""

from __future__ import annotations

import math

import numpy
import pytest

from profiler.multiprocess.figure_table import FigureTable
from profiler.timing.timers import TimerNode


def nodes(count: int) -> list[TimerNode]:
    return [TimerNode(f"block{index}", None) for index in range(count)]


def figures(*values):
    """Arrays for FigureTable.add: totals, counts, shortest, longest, peak means."""
    totals, counts, shortest, longest, peaks = zip(*values)
    return (
        numpy.array(totals, dtype=float),
        numpy.array(counts, dtype=numpy.int64),
        numpy.array(shortest, dtype=float),
        numpy.array(longest, dtype=float),
        numpy.array(peaks, dtype=float),
    )


def test_figures_added_reach_the_nodes_only_when_written_back():
    table = FigureTable()
    first, second = nodes(2)
    table.add(table.slots([first, second]), *figures((1.5, 3, 0.25, 1.0, 0.5), (0.5, 1, 0.5, 0.5, 0.5)))
    assert first.total == 0.0 and first.count == 0
    table.write_back()
    assert (first.total, first.count, first.min, first.max, first.peak_mean) == (1.5, 3, 0.25, 1.0, 0.5)
    assert (second.total, second.count, second.min, second.max) == (0.5, 1, 0.5, 0.5)


def test_figures_add_to_what_a_node_holds_already():
    table = FigureTable()
    (node,) = nodes(1)
    node.add_runs(0.125, 1, 0, 0.125, 0.125)
    node.peak_mean = 0.75
    table.add(table.slots([node]), *figures((0.5, 2, 0.25, 0.25, 0.25)))
    table.write_back()
    assert (node.total, node.count, node.min, node.max, node.peak_mean) == (0.625, 3, 0.125, 0.25, 0.75)


def test_a_slot_given_twice_gets_both_figures():
    table = FigureTable()
    (node,) = nodes(1)
    slots = table.slots([node, node])
    assert slots.tolist() == [0, 0]
    table.add(slots, *figures((0.5, 1, 0.5, 0.5, 0.5), (0.25, 2, 0.125, 0.125, 0.125)))
    table.write_back()
    assert (node.total, node.count, node.min, node.max, node.peak_mean) == (0.75, 3, 0.125, 0.5, 0.5)


def test_distinct_slots_give_the_figures_that_repeated_slots_would():
    by_index, by_repeat = FigureTable(), FigureTable()
    indexed, repeated = nodes(3), nodes(3)
    rows = [figures((0.5, 1, 0.5, 0.5, 0.5), (0.0, 0, math.inf, -math.inf, -math.inf), (2.0, 4, 0.25, 1.0, 0.5))]
    rows.append(figures((0.25, 1, 0.25, 0.25, 0.25), (1.0, 2, 0.5, 0.5, 0.5), (0.5, 1, 0.5, 0.5, 0.5)))
    for added in rows:
        by_index.add(by_index.slots(indexed), *added, distinct=True)
        by_repeat.add(by_repeat.slots(repeated), *added)
    by_index.write_back()
    by_repeat.write_back()
    for one, other in zip(indexed, repeated):
        assert (one.total, one.count, one.min, one.max, one.peak_mean) == (
            other.total,
            other.count,
            other.min,
            other.max,
            other.peak_mean,
        )


def test_a_slot_with_no_closed_call_keeps_its_nodes_extremes():
    table = FigureTable()
    (node,) = nodes(1)
    table.add(table.slots([node]), *figures((0.5, 0, math.inf, -math.inf, -math.inf)))
    table.write_back()
    assert (node.total, node.count, node.min, node.max, node.peak_mean) == (0.5, 0, math.inf, 0.0, 0.0)


def test_without_peak_means_the_nodes_peak_mean_is_left_alone():
    table = FigureTable()
    (node,) = nodes(1)
    totals, counts, shortest, longest, _ = figures((1.0, 1, 1.0, 1.0, 1.0))
    table.add(table.slots([node]), totals, counts, shortest, longest)
    table.write_back()
    assert (node.total, node.peak_mean) == (1.0, 0.0)


def test_counts_past_64_bits_are_written_back_exactly_before_they_overflow():
    table = FigureTable()
    (node,) = nodes(1)
    slots = table.slots([node])
    big = 2**61 + 1
    for _ in range(8):  # 8 * (2**61 + 1) = 2**64 + 8: past what an int64 holds
        table.add(slots, *figures((1.0, big, 0.5, 0.5, 0.5)))
    table.write_back()
    assert node.count == 8 * big


def test_a_table_grows_past_its_first_capacity_keeping_what_it_holds():
    table = FigureTable()
    first = nodes(1)
    table.add(table.slots(first), *figures((0.5, 1, 0.5, 0.5, 0.5)))
    many = nodes(1000)
    table.add(table.slots(many), *figures(*[(0.25, 1, 0.25, 0.25, 0.25)] * 1000))
    table.write_back()
    assert first[0].total == 0.5
    assert all(node.total == 0.25 and node.count == 1 for node in many)


def test_writing_back_twice_adds_once():
    table = FigureTable()
    (node,) = nodes(1)
    table.add(table.slots([node]), *figures((0.5, 1, 0.5, 0.5, 0.5)))
    table.write_back()
    table.write_back()
    assert (node.total, node.count) == (0.5, 1)


def test_a_cleared_table_forgets_its_slots_and_figures():
    table = FigureTable()
    (node,) = nodes(1)
    table.add(table.slots([node]), *figures((0.5, 1, 0.5, 0.5, 0.5)))
    table.clear()
    table.write_back()
    assert node.total == 0.0
    (other,) = nodes(1)
    assert table.slots([other]).tolist() == [0]


@pytest.mark.parametrize("distinct", [False, True])
def test_figures_of_many_adds_are_the_sum_and_extremes_of_them_all(distinct):
    rng = numpy.random.default_rng(5)
    table = FigureTable()
    targets = nodes(20)
    slots = table.slots(targets)
    expected_total = numpy.zeros(20)
    expected_count = numpy.zeros(20, dtype=numpy.int64)
    expected_min = numpy.full(20, math.inf)
    expected_max = numpy.full(20, -math.inf)
    for _ in range(50):
        # Multiples of 1/8: every sum is exact, whatever the order numpy adds in.
        totals = rng.integers(0, 64, 20) / 8
        counts = rng.integers(0, 4, 20)
        shortest = numpy.where(counts > 0, rng.integers(1, 8, 20) / 8, math.inf)
        longest = numpy.where(counts > 0, shortest + 1, -math.inf)
        table.add(slots, totals, counts, shortest, longest, longest, distinct=distinct)
        expected_total += totals
        expected_count += counts
        expected_min = numpy.minimum(expected_min, shortest)
        expected_max = numpy.maximum(expected_max, longest)
    table.write_back()
    assert [node.total for node in targets] == expected_total.tolist()
    assert [node.count for node in targets] == expected_count.tolist()
    assert [node.min for node in targets] == expected_min.tolist()
    assert [node.max for node in targets] == numpy.maximum(expected_max, 0.0).tolist()
