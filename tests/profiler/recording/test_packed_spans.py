"""Specification of packed spans: an env step's spans held as float64 pairs, bounded like a ring,
shipped little-endian and written as the timeline's rows."""

from __future__ import annotations

import struct
from array import array

from profiler.recording import events
from profiler.recording.packed_spans import PackedSpans, with_packed


def native(*values: float) -> bytes:
    return array("d", values).tobytes()


def test_spans_added_in_folds_are_rows_in_the_order_they_were_added():
    packed = PackedSpans(10)
    packed.add("env.step", native(1.0, 1.5, 2.0, 2.5))
    packed.add("env.step", native(3.0, 3.25))
    assert packed.rows() == [["env.step", 1.0, 1.5], ["env.step", 2.0, 2.5], ["env.step", 3.0, 3.25]]
    assert len(packed) == 3


def test_beyond_the_capacity_the_oldest_spans_go_and_are_counted():
    packed = PackedSpans(2)
    packed.add("env.step", native(1.0, 1.5, 2.0, 2.5))
    packed.add("env.step", native(3.0, 3.5, 4.0, 4.5, 5.0, 5.5))
    assert packed.rows() == [["env.step", 4.0, 4.5], ["env.step", 5.0, 5.5]]
    assert packed.dropped == 3


def test_packed_spans_that_dropped_some_hold_every_one_that_ends_after_the_last_dropped():
    packed = PackedSpans(2)
    assert packed.complete_after is None
    packed.add("env.step", native(1.0, 1.5, 2.0, 2.5, 3.0, 3.5))
    packed.add("env.reset", native(0.0, 0.25))
    assert packed.complete_after == 1.5


def test_a_drain_leaves_packed_spans_complete_again():
    packed = PackedSpans(1)
    packed.add("env.step", native(1.0, 1.5, 2.0, 2.5))
    packed.drain()
    assert packed.complete_after is None


def test_a_timeline_is_complete_after_the_later_of_its_rings_horizons():
    timeline = events.ThreadTimeline(2)
    timeline.add_spans([("physics", 0.25, 0.5), ("physics", 1.25, 1.75), ("physics", 5.0, 5.5)])
    timeline.add_packed_spans("env.step", native(0.0, 0.5, 1.0, 2.0, 3.0, 4.0))
    assert timeline.spans_complete_after() == 1.75  # the oldest physics span kept ends later than the env step dropped
    timeline.add_packed_spans("env.step", native(6.0, 7.0))
    assert timeline.spans_complete_after() == 2.0


def test_each_block_name_keeps_its_own_spans():
    packed = PackedSpans(1)
    packed.add("env.step", native(1.0, 2.0))
    packed.add("env.reset", native(0.0, 0.5))
    assert sorted(packed.rows()) == [["env.reset", 0.0, 0.5], ["env.step", 1.0, 2.0]]
    assert packed.dropped == 0


def test_a_drain_hands_over_little_endian_pairs_and_what_was_dropped_then_holds_none():
    packed = PackedSpans(1)
    packed.add("env.step", native(0.5, 1.0, 1.0, 1.5))
    assert packed.drain() == ((("env.step", struct.pack("<2d", 1.0, 1.5)),), 1)
    assert packed.rows() == [] and packed.drain() == ((), 0)


def test_a_payloads_pairs_are_shifted_onto_the_trainers_clock():
    packed = PackedSpans(10)
    packed.add_shifted("env.step", struct.pack("<4d", 1.0, 1.5, 2.0, 2.5), 50.0)
    assert packed.rows() == [["env.step", 51.0, 51.5], ["env.step", 52.0, 52.5]]


def test_rows_and_packed_spans_are_written_together_by_their_end():
    packed = PackedSpans(10)
    packed.add("env.step", native(1.0, 2.0, 3.0, 4.0))
    rows = with_packed([["physics", 1.25, 1.75], ["rollout", 0.5, 5.0]], packed)
    assert rows == [["physics", 1.25, 1.75], ["env.step", 1.0, 2.0], ["env.step", 3.0, 4.0], ["rollout", 0.5, 5.0]]


def test_without_packed_spans_the_rows_keep_their_order():
    rows = [["b", 0.0, 3.0], ["a", 1.0, 2.0]]
    assert with_packed(rows, PackedSpans(10)) == rows


def test_a_threads_timeline_writes_its_packed_spans_among_its_spans_and_counts_what_it_dropped():
    timeline = events.ThreadTimeline(2)
    timeline.add_spans([("physics", 1.25, 1.75)])
    timeline.add_packed_spans("env.step", native(0.0, 0.5, 1.0, 2.0, 3.0, 4.0))
    assert timeline.span_rows() == [["physics", 1.25, 1.75], ["env.step", 1.0, 2.0], ["env.step", 3.0, 4.0]]
    assert timeline.dropped_so_far() == 1
    assert timeline.holds_events()


def test_a_timeline_drain_hands_over_its_packed_spans_with_the_rest_and_counts_those_dropped():
    timeline = events.ThreadTimeline(1)
    timeline.add_packed_spans("env.step", native(0.0, 0.5, 1.0, 2.0))
    spans, instants, counters, dropped, packed = timeline.drain()
    assert (spans, instants, counters, dropped) == ((), (), (), 1)
    assert packed == (("env.step", struct.pack("<2d", 1.0, 2.0)),)
    assert not timeline.holds_events() and timeline.dropped_so_far() == 0
