"""Specification: a thread's outermost spans are those no other span holds, in time order; a
timeline in the order its spans ended (as the recorder keeps it) is read in one pass, to the same
spans as sorting it gives."""

from __future__ import annotations

import random

import pytest

from profiler import get_timer_tree, hierarchical_timer
from profiler.analysis import outermost
from profiler.analysis.outermost import outermost_spans


def recorded_spans(fake_clock, seed: int, *, empty_share: float) -> list[list]:
    """The spans the recorder keeps for a random program of nested blocks, many of them starting
    or ending at the same moment as their parent or their neighbours (the clock often does not
    move between two blocks); about ``empty_share`` of the blocks without children take no time."""
    chooser = random.Random(seed)

    def blocks(depth: int) -> None:
        for index in range(chooser.randint(0, 4 if depth < 3 else 0)):
            fake_clock.advance(chooser.choice([0.0, 0.0, 0.5, 1.0]))
            with hierarchical_timer(f"block {depth}.{index}"):
                start = fake_clock()
                blocks(depth + 1)
                fake_clock.advance(chooser.choice([0.0, 0.0, 0.25]))
                if fake_clock() == start and chooser.random() >= empty_share:
                    fake_clock.advance(0.25)

    for _ in range(30):
        blocks(0)
    return get_timer_tree()["timeline"]["processes"][0]["threads"][0]["spans"]


def test_the_outermost_spans_are_those_no_other_holds_the_first_recorded_of_a_tie_kept():
    spans = [["inner", 1.0, 2.0], ["outer", 0.5, 3.0], ["twin a", 4.0, 5.0], ["twin b", 4.0, 5.0],
             ["after", 5.0, 6.0], ["inside after", 5.0, 5.5]]
    assert outermost_spans(spans) == [("outer", 0.5, 3.0), ("twin a", 4.0, 5.0), ("after", 5.0, 6.0)]


def test_spans_in_the_order_they_ended_give_the_same_outermost_spans_in_one_pass():
    spans = [["inner", 1.0, 2.0], ["outer", 0.5, 3.0], ["twin a", 4.0, 5.0], ["twin b", 4.0, 5.0],
             ["inside after", 5.0, 5.5], ["after", 5.0, 6.0]]
    expected = [("outer", 0.5, 3.0), ("twin a", 4.0, 5.0), ("after", 5.0, 6.0)]
    assert outermost._outermost_of_spans_in_end_order(spans) == expected
    assert outermost_spans(spans) == expected


@pytest.mark.parametrize("seed", range(20))
def test_a_recorded_timeline_is_read_in_one_pass_to_the_spans_the_sort_gives(fake_clock, recording, seed):
    spans = recorded_spans(fake_clock, seed, empty_share=0.0)
    one_pass = outermost._outermost_of_spans_in_end_order(spans)
    assert one_pass is not None
    assert one_pass == outermost._outermost_by_start(spans)


@pytest.mark.parametrize("seed", range(20))
def test_a_recorded_timeline_with_empty_spans_gets_the_spans_the_sort_gives(fake_clock, recording, seed):
    spans = recorded_spans(fake_clock, seed, empty_share=0.01)
    one_pass = outermost._outermost_of_spans_in_end_order(spans)
    assert one_pass is None or one_pass == outermost._outermost_by_start(spans)


@pytest.mark.parametrize("spans", [
    [["empty", 1.0, 1.0], ["outer", 1.0, 2.0]],
    [["inner", 1.0, 2.0], ["empty", 2.0, 2.0], ["outer", 1.0, 2.0]],
], ids=["at its start", "at its end"])
def test_an_empty_span_on_an_outer_spans_edge_is_sorted_as_the_sort_places_it(spans):
    assert outermost._outermost_of_spans_in_end_order(spans) is None
    assert outermost_spans(spans) == outermost._outermost_by_start(spans)


def test_spans_out_of_the_order_they_ended_are_sorted_instead():
    spans = [["later", 3.0, 4.0], ["earlier", 1.0, 2.0]]
    assert outermost._outermost_of_spans_in_end_order(spans) is None
    assert outermost_spans(spans) == [("earlier", 1.0, 2.0), ("later", 3.0, 4.0)]


def test_spans_that_overlap_without_nesting_are_sorted_instead():
    spans = [["first", 1.0, 3.0], ["second", 2.0, 4.0]]
    assert outermost._outermost_of_spans_in_end_order(spans) is None
    assert outermost_spans(spans) == [("first", 1.0, 3.0)]


def test_each_call_gives_a_list_of_its_own():
    spans = [["a", 1.0, 2.0]]
    outermost_spans(spans).clear()
    assert outermost_spans(spans) == [("a", 1.0, 2.0)]


def test_a_list_grown_since_the_last_call_is_read_afresh():
    spans = [["a", 1.0, 2.0]]
    assert outermost_spans(spans) == [("a", 1.0, 2.0)]
    spans.append(["b", 3.0, 4.0])
    assert outermost_spans(spans) == [("a", 1.0, 2.0), ("b", 3.0, 4.0)]
