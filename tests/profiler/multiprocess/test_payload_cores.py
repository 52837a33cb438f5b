"""Both timer cores send the same payloads and merge them into the same tree: a random program
of blocks, its timers flushed while blocks are open and at its end, on the C accelerator (the
blocks, ``take_rows`` and the merger's ``check_rows`` in C) and on the pure-Python reference."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from block_programs import Block, SteppedClock, programs, run_program
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.multiprocess import merge, payload
from profiler.timing import accelerator, block_hooks, timer_node, timers
from profiler.timing.timer_stack import TimerStack

needs_accelerator = pytest.mark.skipif(
    accelerator.extension is None, reason=f"C accelerator not loaded: {accelerator.unavailable_reason}"
)


@pytest.fixture
def timer_core() -> str:
    """These tests choose their cores themselves: run once, not once per core (see conftest.py)."""
    return "both"


def trip_under(compiled: bool, program: list[Block], start: float, step: float) -> tuple[list[Any], str, str]:
    """The payloads ``program`` sends on one core, in a thread of its own (a stream of its own),
    less their stream ids drawn at random; the trainer's tree merged from them and the worker's
    entry in the merger (its own tree, peak means, payloads counted): as text that tells 1 from 1.0."""
    block_hooks.use_compiled_core(compiled)
    clock = SteppedClock(start, step)
    previous = timers.set_clock(clock)
    sent: list[tuple[Any, ...]] = []

    def worker() -> None:
        run_program(program, clock, flush=lambda: sent.append(payload.snapshot_and_flush()))
        sent.append(payload.snapshot_and_flush())

    try:
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        trainer = TimerStack("trainer")
        merger = merge.TimerMerger(trainer)
        for each in sent:
            merger.merge_payload(0, each)
        trainer.settle()
        (worker_entry,) = merger.worker_entries()
        del worker_entry["manager_id"]  # a number per merger made in the process
        return [each[:3] + each[4:] for each in sent], repr(trainer.root.to_dict()), repr(worker_entry)
    finally:
        timers.set_clock(previous)


@needs_accelerator
@settings(max_examples=100, deadline=None)
@given(
    program=programs(flushes=st.booleans()),
    clock_start_and_step=st.sampled_from([(1000.0, 0.1), (1000.0, 1e-7), (0.0, 2.5)]),
)
def test_both_cores_send_the_same_payloads_and_merge_the_same_trees_for_any_program(program, clock_start_and_step):
    start, step = clock_start_and_step
    default = timer_node.accelerated()
    try:
        assert trip_under(True, program, start, step) == trip_under(False, program, start, step)
    finally:
        block_hooks.use_compiled_core(default)


_SPAN_FIELDS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5), st.sampled_from([2.0**49, -(2.0**49), 2.0**50]),
)
_SPANS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["env.step", "", "x"]), _SPAN_FIELDS, _SPAN_FIELDS),
        st.tuples(st.just("env.step"), st.floats(0, 10), st.floats(10, 20)),  # plain spans, often
        st.lists(st.floats(0, 1), min_size=3, max_size=3),  # a list, not a tuple
        st.tuples(st.just("env.step"), st.just(1.0)),  # two fields
    ),
    max_size=6,
)


@needs_accelerator
@settings(max_examples=300, deadline=None)
@given(spans=_SPANS, as_list=st.booleans())
def test_both_cores_tell_the_same_spans_plain(spans, as_list):
    spans = spans if as_list else tuple(spans)
    compiled = accelerator.extension.plain_spans(spans, payload.MAX_SECONDS)
    assert compiled is payload._plain_spans_in_python(spans)
