"""What each core of the hot path (the C accelerator, the pure-Python reference) must do itself:
run under both by tests/profiler/timing/conftest.py."""

from __future__ import annotations

from fractions import Fraction

import pytest

import profiler
from profiler import hierarchical_timer
from profiler.recording import events
from profiler.timing import block_hooks, timer_node, timers
from profiler.timing.timer_node import TimerNode


class CountingClock:
    """A fake clock that counts its readings and moves one second per reading."""

    def __init__(self, start: float | int | Fraction) -> None:
        self.time = start
        self.readings = 0

    def __call__(self) -> float | int | Fraction:
        self.readings += 1
        self.time += 1
        return self.time


@pytest.fixture
def counting_clock():
    clock = CountingClock(100.0)
    previous = timers.set_clock(clock)
    timers.reset_timers()
    yield clock
    timers.set_clock(previous)


def test_the_dump_says_which_core_timed_the_blocks(timer_core):
    expected = {"compiled": "c", "python": "python"}[timer_core]
    assert profiler.get_timer_tree()["metadata"]["timer_core"] == expected
    assert profiler.timing.accelerated() is (timer_core == "compiled")


def test_a_block_reads_the_clock_set_with_set_clock_once_as_it_opens_and_once_as_it_closes(counting_clock):
    before = counting_clock.readings
    with hierarchical_timer("block") as node:
        pass
    assert counting_clock.readings - before == 2
    assert (node.total, node.count, node.min, node.max) == (1.0, 1, 1.0, 1.0)


@pytest.mark.parametrize("start", [100, Fraction(100)], ids=["int", "Fraction"])
def test_a_clock_giving_other_numbers_than_floats_gives_the_figures_python_arithmetic_gives(start):
    clock = CountingClock(start)
    previous = timers.set_clock(clock)
    try:
        with hierarchical_timer("block") as node:
            pass
    finally:
        timers.set_clock(previous)
    # 0.0 + elapsed is a float; the extremes are the elapsed time itself, of the clock's type.
    assert type(node.total) is float and node.total == 1.0
    assert type(node.max) is type(start) and type(node.min) is type(start)


def test_a_companion_wraps_the_cores_methods_and_leaving_puts_them_back(fake_clock, timer_core):
    seen = []
    block_hooks.observe_blocks(lambda node: seen.append(("open", node.name)),
                               lambda node: seen.append(("close", node.name)), companion="test")
    try:
        assert TimerNode.__enter__ is not timer_node.PLAIN_ENTER
        assert not timers.plain_blocks
        with hierarchical_timer("block") as node:
            fake_clock.advance(2.0)
    finally:
        block_hooks.observe_blocks(None, None, companion="test")
    assert seen == [("open", "block"), ("close", "block")]
    assert (node.total, node.count) == (2.0, 1)
    assert TimerNode.__enter__ is timer_node.PLAIN_ENTER and TimerNode.__exit__ is timer_node.PLAIN_EXIT
    assert timers.plain_blocks


class StandInStack:
    """Not a TimerStack: anything with a ``current`` the node can move."""

    def __init__(self) -> None:
        self.current = None
        self.shape_changed = False


def test_a_node_of_a_stack_that_is_not_a_timer_stack_moves_its_current(fake_clock):
    stack = StandInStack()
    root = TimerNode("root", None, stack)  # type: ignore[arg-type]
    stack.current = root
    with root.get_child("block") as node:
        assert stack.current is node
        fake_clock.advance(1.0)
    assert stack.current is root and node.total == 1.0


def test_a_detached_node_refuses_to_be_entered_as_python_does():
    with pytest.raises(AttributeError, match="current"):
        with TimerNode():
            pass


@pytest.fixture
def recording():
    events.clear_recording()
    events.start_recording(capacity=1000)
    try:
        yield timers.current_thread_stack().timeline
    finally:
        events.stop_recording()
        events.clear_recording()


def test_while_the_timeline_records_a_block_records_its_span_as_it_closes(fake_clock, recording):
    assert TimerNode.__exit__ is timer_node.RECORDING_EXIT and timers.span_blocks
    start = fake_clock.time
    with hierarchical_timer("outer"):
        fake_clock.advance(1.0)
        with hierarchical_timer("inner") as node:
            fake_clock.advance(0.5)
    assert list(recording.spans) == [("inner", start + 1.0, start + 1.5), ("outer", start, start + 1.5)]
    assert recording.spans_recorded == 2
    assert (node.total, node.count) == (0.5, 1)


def test_a_recorded_block_that_raises_counts_its_error_and_records_its_span(fake_clock, recording):
    start = fake_clock.time
    with pytest.raises(ValueError, match="env broke"):
        with hierarchical_timer("env.step") as node:
            fake_clock.advance(2.0)
            raise ValueError("env broke")
    assert (node.count, node.errors) == (1, 1)
    assert list(recording.spans) == [("env.step", start, start + 2.0)]


def test_a_full_timeline_drops_its_oldest_span_and_counts_every_span_recorded(fake_clock, recording):
    stack = timers.current_thread_stack()
    stack.timeline = events.ThreadTimeline(2)
    for name in ("first", "second", "third"):
        with hierarchical_timer(name):
            fake_clock.advance(1.0)
    assert [span[0] for span in stack.timeline.spans] == ["second", "third"]
    assert (stack.timeline.spans_recorded, stack.timeline.dropped_so_far()) == (3, 1)


class ListTimeline(events.ThreadTimeline):
    """A timeline of another class than ThreadTimeline, its spans in a list: reached through its
    attributes, not its slots."""

    def __init__(self) -> None:
        super().__init__(10)
        self.spans = []  # type: ignore[assignment]


def test_a_timeline_of_another_class_records_spans_as_a_thread_timeline_does(fake_clock, recording):
    stack = timers.current_thread_stack()
    stack.timeline = ListTimeline()
    start = fake_clock.time
    with hierarchical_timer("block"):
        fake_clock.advance(1.0)
    assert stack.timeline.spans == [("block", start, start + 1.0)]
    assert stack.timeline.spans_recorded == 1


def test_a_block_of_a_stack_without_a_timeline_records_nothing(fake_clock, recording):
    stack = StandInStack()
    stack.timeline = None
    root = TimerNode("root", None, stack)  # type: ignore[arg-type]
    stack.current = root
    with root.get_child("block") as node:
        fake_clock.advance(1.0)
    assert node.total == 1.0 and list(recording.spans) == []

