"""Specification of PhasedBlock: a block and its consecutive phases timed from the caller's clock
stamps leave exactly the tree the nested ``with`` blocks would, its runs held as stamps and
folded in bulk before anything reads the tree."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import profiler
from profiler import get_timer_tree, hierarchical_timer
from profiler.recording import events
from profiler.timing import block_hooks, timers
from profiler.multiprocess.payload import snapshot_and_flush
from profiler.timing import accelerator
from profiler.timing.phased_block import FOLD_AT_RUNS, PhasedBlock, runs_table, runs_table_in_python
from hand_payloads import blocks_of
from tree_paths import child_names, find

needs_accelerator = pytest.mark.skipif(
    accelerator.extension is None, reason=f"C accelerator not loaded: {accelerator.unavailable_reason}"
)

PHASES = ("send", "wait", "receive")
DURATIONS = (0.25, 1.5, 0.5)


def run_with_blocks(clock, durations=DURATIONS, failing_phase: int | None = None) -> None:
    """One run of the block as nested ``with`` blocks, each phase lasting its duration."""
    with pytest.raises(RuntimeError) if failing_phase is not None else _nothing():
        with hierarchical_timer("step"):
            for index, (name, seconds) in enumerate(zip(PHASES, durations)):
                with hierarchical_timer(name):
                    clock.advance(seconds)
                    if index == failing_phase:
                        raise RuntimeError("failed in a phase")


def run_phased(block: PhasedBlock, clock, durations=DURATIONS, failing_phase: int | None = None) -> None:
    """The same run timed by ``block`` from stamps, as a hot path does."""
    stamp = block.open()
    assert stamp is not None
    ends: list[float | None] = [None, None]
    for index, seconds in enumerate(durations):
        clock.advance(seconds)
        if index == failing_phase:
            block.fail(*ends)
            return
        if index < 2:
            ends[index] = stamp()
    block.close(*ends)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        return None


def tree_after(run) -> dict:
    timers.reset_timers()
    run()
    tree = get_timer_tree()
    tree.pop("metadata", None)
    return tree


def spans_in_time_order(tree: dict) -> dict:
    """``tree`` with each thread's spans in the order every reader puts them (by start, the
    enclosing span first), timed from the first: a phased block adds its runs' spans as they
    fold, after the spans of blocks that closed meanwhile, where ``with`` blocks add each as it
    closes; the fake clock runs on from one run of a test to the next."""
    threads = [thread for process in tree["timeline"]["processes"] for thread in process["threads"]]
    origin = min(span[1] for thread in threads for span in thread["spans"])
    for thread in threads:
        thread["spans"] = sorted(([name, start - origin, end - origin] for name, start, end in thread["spans"]),
                                 key=lambda span: (span[1], -span[2]))
    return tree


def test_phased_runs_leave_the_tree_of_nested_with_blocks(fake_clock):
    block = PhasedBlock("step", PHASES)

    def with_blocks() -> None:
        for factor in (1.0, 3.0, 0.5):
            run_with_blocks(fake_clock, [seconds * factor for seconds in DURATIONS])

    def phased() -> None:
        for factor in (1.0, 3.0, 0.5):
            run_phased(block, fake_clock, [seconds * factor for seconds in DURATIONS])

    expected = tree_after(with_blocks)
    assert tree_after(phased) == expected
    step = find(expected, "step")
    assert child_names(step) == list(PHASES)
    assert step["count"] == 3 and step["min"] == pytest.approx(1.125) and step["max"] == pytest.approx(6.75)


@pytest.mark.parametrize("timeline", [False, True], ids=["plain", "timeline"])
@pytest.mark.parametrize("failing_phase", [0, 1, 2])
def test_a_failed_run_counts_as_an_exception_leaving_that_phase_would(fake_clock, failing_phase, timeline, request):
    # After a run that succeeded: a phased block makes the nodes of all its phases on its first run.
    if timeline:
        request.getfixturevalue("recording")  # and records the spans the `with` blocks record
    block = PhasedBlock("step", PHASES)

    def with_blocks() -> None:
        run_with_blocks(fake_clock)
        run_with_blocks(fake_clock, failing_phase=failing_phase)

    def phased() -> None:
        run_phased(block, fake_clock)
        run_phased(block, fake_clock, failing_phase=failing_phase)

    in_order = spans_in_time_order if timeline else (lambda tree: tree)
    expected = in_order(tree_after(with_blocks))
    assert in_order(tree_after(phased)) == expected
    assert find(expected, "step", PHASES[failing_phase])["errors"] == 1
    if timeline:
        assert len(expected["timeline"]["processes"][0]["threads"][0]["spans"]) == 4 + failing_phase + 2


def test_blocks_opened_while_it_is_open_nest_under_it(fake_clock):
    block = PhasedBlock("step", PHASES)
    stamp = block.open()
    with hierarchical_timer("inside"):
        fake_clock.advance(1.0)
    sent = stamp()
    block.close(sent, sent)
    tree = get_timer_tree()
    assert find(tree, "step", "inside")["total"] == 1.0
    assert timers.get_timer_root().name == "root"
    with hierarchical_timer("after"):
        pass
    assert child_names(get_timer_tree()) == ["step", "after"]  # the block closed: siblings again


def test_its_nodes_hang_under_whichever_block_is_open_at_each_run(fake_clock):
    block = PhasedBlock("step", PHASES)
    for outer, seconds in (("train", 1.0), ("evaluate", 2.0), ("train", 4.0)):
        with hierarchical_timer(outer):
            run_phased(block, fake_clock, (seconds, 0.0, 0.0))
    tree = get_timer_tree()
    assert find(tree, "train", "step", "send")["total"] == 5.0
    assert find(tree, "evaluate", "step", "send")["total"] == 2.0
    assert block.node is timers.get_timer_root().children["train"].children["step"]


def test_it_is_not_opened_while_timing_is_off():
    block = PhasedBlock("step", PHASES)
    profiler.disable()
    assert block.open() is None
    profiler.enable()
    assert block.open() is not None


def test_it_is_not_opened_while_a_companion_other_than_the_timeline_watches_blocks(recording):
    block = PhasedBlock("step", PHASES)
    block_hooks.observe_blocks(lambda node: None, None, companion="test")
    try:
        assert not timers.plain_blocks and not timers.span_blocks
        assert block.open() is None
    finally:
        block_hooks.observe_blocks(None, None, companion="test")
    assert block.open() is not None


# --- the timeline: the spans of the nested `with` blocks -------------------------------------------


def test_phased_runs_record_the_spans_of_nested_with_blocks(fake_clock, recording):
    block = PhasedBlock("step", PHASES)

    def with_blocks() -> None:
        with hierarchical_timer("rollout"):
            for factor in (1.0, 3.0, 0.5):
                run_with_blocks(fake_clock, [seconds * factor for seconds in DURATIONS])

    def phased() -> None:
        with hierarchical_timer("rollout"):
            for factor in (1.0, 3.0, 0.5):
                run_phased(block, fake_clock, [seconds * factor for seconds in DURATIONS])

    assert timers.span_blocks
    expected = spans_in_time_order(tree_after(with_blocks))
    assert spans_in_time_order(tree_after(phased)) == expected
    spans = expected["timeline"]["processes"][0]["threads"][0]["spans"]
    assert [span[0] for span in spans[:5]] == ["rollout", "step", *PHASES]
    assert len(spans) == 3 * 4 + 1


def recorded_spans() -> list:
    timeline = timers.current_thread_stack().timeline
    return [] if timeline is None else timeline.span_rows()


def test_runs_held_as_recording_stops_keep_their_spans(fake_clock):
    block = PhasedBlock("step", PHASES)
    events.start_recording()
    run_phased(block, fake_clock)
    events.stop_recording()
    run_phased(block, fake_clock)  # not recorded, as a `with` block's run would not be
    assert [span[0] for span in recorded_spans()] == [*PHASES, "step"]
    events.clear_recording()


def test_runs_held_as_recording_starts_record_no_span(fake_clock):
    block = PhasedBlock("step", PHASES)
    run_phased(block, fake_clock)
    events.start_recording()
    try:
        run_phased(block, fake_clock)
        get_timer_tree()
        assert [span[0] for span in recorded_spans()] == [*PHASES, "step"]
        assert find(get_timer_tree(), "step")["count"] == 2
    finally:
        events.stop_recording()
        events.clear_recording()


def test_clearing_the_recording_forgets_the_spans_of_runs_held(fake_clock, recording):
    block = PhasedBlock("step", PHASES)
    run_phased(block, fake_clock)
    events.clear_recording()
    get_timer_tree()
    assert recorded_spans() == []
    assert find(get_timer_tree(), "step")["count"] == 1


def test_the_spans_of_runs_another_thread_holds_are_in_the_dump(fake_clock, recording):
    block = PhasedBlock("step", PHASES)
    opened = threading.Event()
    leave = threading.Event()

    def run_and_stay() -> None:
        run_phased(block, fake_clock)
        opened.set()
        leave.wait()

    other = threading.Thread(target=run_and_stay, name="other")
    other.start()
    try:
        opened.wait()
        threads = get_timer_tree()["timeline"]["processes"][0]["threads"]
        spans = next(thread["spans"] for thread in threads if thread["name"] == "other")
        assert [span[0] for span in spans] == [*PHASES, "step"]
    finally:
        leave.set()
        other.join()


# --- runs held as stamps, folded in bulk ---------------------------------------------------------


def test_closed_runs_are_held_as_stamps_until_something_reads_the_tree(fake_clock):
    block = PhasedBlock("step", PHASES)
    for _ in range(5):
        run_phased(block, fake_clock)
    assert len(block.runs) == 5
    assert block.node.count == 0  # not folded yet: read through the stack, as readers do
    assert find(get_timer_tree(), "step")["count"] == 5
    assert block.runs == []


def test_every_reader_of_the_stack_folds_the_held_runs_first(fake_clock):
    block = PhasedBlock("step", PHASES)
    run_phased(block, fake_clock)
    assert timers.get_timer_root().children["step"].count == 1
    run_phased(block, fake_clock)
    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    assert stack.get_timing_tree()["children"]["step"]["count"] == 2
    run_phased(block, fake_clock)
    assert stack.get_timing_tree(block.node)["count"] == 3
    run_phased(block, fake_clock)
    assert blocks_of(snapshot_and_flush())["step"][1] == 4  # the worker side: its payloads
    assert block.runs == []


def test_it_never_holds_more_than_a_fold_of_runs(fake_clock):
    block = PhasedBlock("step", PHASES)
    for _ in range(FOLD_AT_RUNS + 3):
        run_phased(block, fake_clock)
    assert len(block.runs) == 3
    assert block.node.count == FOLD_AT_RUNS


def test_runs_held_when_the_timers_are_reset_are_forgotten_with_the_tree(fake_clock):
    block = PhasedBlock("step", PHASES)
    run_phased(block, fake_clock)
    timers.reset_timers()
    assert block.runs == []
    run_phased(block, fake_clock)
    assert find(get_timer_tree(), "step")["count"] == 1


def test_a_fold_from_another_thread_while_runs_close_loses_none(fake_clock):
    block = PhasedBlock("step", PHASES)
    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    done = threading.Event()
    errors: list[BaseException] = []

    def read_the_tree_again_and_again() -> None:
        try:
            while not done.is_set():
                stack.settle()
        except BaseException as error:  # the reader's failure must fail this test, not a warning
            errors.append(error)

    reader = threading.Thread(target=read_the_tree_again_and_again)
    reader.start()
    try:
        for _ in range(5000):
            run_phased(block, fake_clock)
    finally:
        done.set()
        reader.join()
    assert errors == []
    assert find(get_timer_tree(), "step")["count"] == 5000
    assert find(get_timer_tree(), "step", "wait")["total"] == pytest.approx(5000 * DURATIONS[1])


def test_a_run_in_another_thread_goes_into_that_threads_tree(fake_clock):
    block = PhasedBlock("step", PHASES)
    run_phased(block, fake_clock)
    worker = threading.Thread(target=run_phased, args=(block, fake_clock), name="other")
    worker.start()
    worker.join()
    tree = get_timer_tree(include_threads=True)
    assert find(tree, "step")["count"] == 1
    assert find(tree, "thread:ended:other", "step")["count"] == 1


def test_the_runs_go_to_on_fold_as_a_table_their_stamps_then_their_extra_columns(fake_clock):
    tables = []
    block = PhasedBlock("step", PHASES, on_fold=tables.append)
    runs = []
    for extra in ((1.0, 2.0), (3.0, 4.0)):
        clock = block.open()
        ends = (clock(), clock())
        block.stack.current = block.parent
        runs.append([block.node._start, *ends, clock(), *extra])
        block.runs.append(tuple(runs[-1]))
    block.fold()
    (table,) = tables
    assert table.dtype == np.float64
    assert table.tolist() == runs
    assert block.node.count == 2


def test_runs_without_extra_columns_go_to_on_fold_too(fake_clock):
    tables = []
    block = PhasedBlock("step", PHASES, on_fold=tables.append)
    block.open()
    fake_clock.advance(0.75)
    block.close(1000.25, 1000.5)
    block.fold()
    assert [table.tolist() for table in tables] == [[[1000.0, 1000.25, 1000.5, 1000.75]]]


def test_a_none_among_the_extra_columns_gives_on_fold_an_object_table(fake_clock):
    tables = []
    block = PhasedBlock("step", PHASES, on_fold=tables.append)
    clock = block.open()
    block.stack.current = block.parent
    block.runs.append((block.node._start, clock(), clock(), clock(), None, 2.0))
    block.fold()
    assert tables[0].dtype == object
    assert tables[0][:, 4:].tolist() == [[None, 2.0]]
    assert find(get_timer_tree(), "step")["count"] == 1


def test_closing_with_the_wrong_number_of_phase_ends_is_refused(fake_clock):
    block = PhasedBlock("step", PHASES)
    block.open()
    with pytest.raises(TypeError, match="takes 2 phase ends, got 1"):
        block.close(1.0)


def test_resetting_another_threads_timers_keeps_the_runs_held_for_this_one(fake_clock):
    block = PhasedBlock("step", PHASES)
    other = threading.Thread(target=run_phased, args=(block, fake_clock), name="other")
    other.start()
    other.join()
    run_phased(block, fake_clock)  # now held for this thread's stack
    timers.reset_timers(timers.get_timer_stack_for_thread(other))
    assert find(get_timer_tree(), "step")["count"] == 1


# -- the table a fold adds up: the C accelerator's runs_table against its Python reference ------

numbers = st.one_of(
    st.floats(allow_nan=False),
    st.none(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.fractions(max_denominator=1000),
    st.booleans(),
)


def same_table(runs: list, columns: int) -> None:
    reference = runs_table_in_python(runs, columns)
    table = runs_table(runs, columns)
    assert table.dtype == reference.dtype and table.shape == reference.shape
    np.testing.assert_array_equal(table, reference)  # NaN where the other has NaN


@needs_accelerator
@settings(max_examples=200, deadline=None)
@given(columns=st.integers(0, 8), data=st.data())
def test_the_compiled_table_of_runs_is_the_python_reference_for_any_runs(columns, data):
    runs = data.draw(st.lists(st.tuples(*[numbers] * columns), max_size=40))
    same_table(runs, columns)


@needs_accelerator
@pytest.mark.parametrize(
    "runs",
    [
        [(1.0, 2.0), (3.0,)],  # a run of another width: the reference's table, misaligned or not
        [(1.0, 2.0), [3.0, 4.0]],  # a run that is not a tuple
        [(1.0, 2.0), (3.0, 10**400)],  # a number no float holds: the reference raises
        [(1.0, "2.0")],  # not a number: the reference raises
    ],
)
def test_what_the_compiled_table_does_not_take_the_python_reference_decides(runs):
    assert accelerator.extension.runs_table(runs, 2) is None
    try:
        reference = runs_table_in_python(runs, 2)
    except Exception as error:
        with pytest.raises(type(error)):
            runs_table(runs, 2)
    else:
        np.testing.assert_array_equal(runs_table(runs, 2), reference)
