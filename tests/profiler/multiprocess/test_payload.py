"""Specification of the worker side: snapshots into plain-data payloads, flushing, WorkerTimers."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import struct

import numpy as np
import pytest

from profiler import get_timer_tree, hierarchical_timer, set_gauge
from profiler.multiprocess.payload import (
    PAYLOAD_TAG,
    PAYLOAD_VERSION,
    PayloadError,
    WorkerTimers,
    row_ids,
    snapshot_and_flush,
    validate_payload,
)
from profiler.timing.timers import FOLDED_BLOCK_NAME, MAX_DEPTH
from hand_payloads import blocks_of, pack_rows, rows_of, tree_payload, with_rows


def only_plain_data(value) -> bool:
    if isinstance(value, (tuple, list)):
        return all(only_plain_data(item) for item in value)
    return value is None or type(value) in (str, int, float, bytes)


def test_a_payload_holds_the_tree_since_the_last_flush(fake_clock):
    with hierarchical_timer("env.step"):
        fake_clock.advance(2.0)
        with hierarchical_timer("physics"):
            fake_clock.advance(1.0)
    payload = snapshot_and_flush()
    assert blocks_of(payload) == {"env.step": (3.0, 1, 0), "env.step/physics": (1.0, 1, 0)}


def test_a_payload_is_plain_data_that_pickles(fake_clock):
    with hierarchical_timer("env.step"):
        set_gauge("reward", 1.5)
    payload = snapshot_and_flush()
    assert only_plain_data(payload)
    assert pickle.loads(pickle.dumps(payload)) == payload


def test_a_payload_is_tagged_versioned_and_names_its_process(fake_clock):
    payload = snapshot_and_flush()
    assert payload[:3] == (PAYLOAD_TAG, PAYLOAD_VERSION, os.getpid())


def test_a_payload_made_in_a_forked_child_names_the_child(fake_clock):
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)

    def flush_in_child() -> None:
        with hierarchical_timer("env.step"):
            pass
        sender.send((os.getpid(), snapshot_and_flush()[2]))

    child = context.Process(target=flush_in_child)
    child.start()
    assert receiver.poll(60), "the forked child sent nothing"
    child_pid, payload_pid = receiver.recv()
    child.join(60)
    assert payload_pid == child_pid == child.pid != os.getpid()


def test_a_payload_covers_the_window_since_the_previous_flush(fake_clock):
    fake_clock.advance(5.0)
    first = snapshot_and_flush()
    fake_clock.advance(3.0)
    second = snapshot_and_flush()
    assert first[5:7] == (1000.0, 1005.0)
    assert second[5:7] == (1005.0, 1008.0)


def test_sequence_numbers_count_flushes_of_one_stream(fake_clock):
    first, second = snapshot_and_flush(), snapshot_and_flush()
    assert first[3] == second[3]
    assert second[4] == first[4] + 1


def test_flushing_resets_the_timers(fake_clock):
    with hierarchical_timer("env.step"):
        fake_clock.advance(1.0)
    snapshot_and_flush()
    with hierarchical_timer("env.step"):
        fake_clock.advance(0.5)
    assert blocks_of(snapshot_and_flush()) == {"env.step": (0.5, 1, 0)}


def test_blocks_unused_since_the_last_flush_are_left_out(fake_clock):
    with hierarchical_timer("env.reset"):
        fake_clock.advance(1.0)
    snapshot_and_flush()
    with hierarchical_timer("env.step"):
        fake_clock.advance(1.0)
    assert list(blocks_of(snapshot_and_flush())) == ["env.step"]


def test_errors_travel_in_the_payload(fake_clock):
    with pytest.raises(RuntimeError):
        with hierarchical_timer("env.step"):
            raise RuntimeError("boom")
    assert blocks_of(snapshot_and_flush())["env.step"] == (0.0, 1, 1)


def test_gauges_travel_once_then_reset(fake_clock):
    set_gauge("reward", 1.0)
    set_gauge("reward", 3.0)
    first = snapshot_and_flush()
    second = snapshot_and_flush()
    assert first[11] == (("reward", 3.0, 1.0, 3.0, 2),)
    assert second[11] == ()


def test_an_open_block_is_split_at_the_flush_and_counted_once_when_it_closes(fake_clock):
    with hierarchical_timer("worker.loop"):
        fake_clock.advance(2.0)
        during = snapshot_and_flush()
        fake_clock.advance(3.0)
    after = snapshot_and_flush()
    assert blocks_of(during)["worker.loop"] == (2.0, 0, 0)
    assert blocks_of(after)["worker.loop"] == (3.0, 1, 0)


def test_closed_children_of_an_open_block_are_flushed_under_it(fake_clock):
    with hierarchical_timer("worker.loop"):
        with hierarchical_timer("env.step"):
            fake_clock.advance(1.0)
        payload = snapshot_and_flush()
    assert blocks_of(payload) == {"worker.loop": (1.0, 0, 0), "worker.loop/env.step": (1.0, 1, 0)}


def test_a_block_open_across_several_flushes_adds_up_to_its_real_time(fake_clock):
    payloads = []
    with hierarchical_timer("worker.loop"):
        for _ in range(3):
            fake_clock.advance(1.0)
            payloads.append(snapshot_and_flush())
        fake_clock.advance(1.0)
    payloads.append(snapshot_and_flush())
    totals = [blocks_of(payload)["worker.loop"] for payload in payloads]
    assert sum(total for total, _, _ in totals) == 4.0
    assert sum(count for _, count, _ in totals) == 1


def extremes_of(payload) -> dict:
    """The payload's per-call extremes as {path: (min, max)}."""
    return {path: row[3:] for path, row in rows_of(payload).items()}


def test_the_shortest_and_longest_call_travel_in_the_payload(fake_clock):
    for seconds in (0.5, 2.0, 1.0):
        with hierarchical_timer("env.step"):
            fake_clock.advance(seconds)
    assert extremes_of(snapshot_and_flush()) == {"env.step": (0.5, 2.0)}


def test_each_payload_has_the_extremes_of_its_own_window(fake_clock):
    for seconds in (5.0, 1.0):
        with hierarchical_timer("env.step"):
            fake_clock.advance(seconds)
    snapshot_and_flush()
    for seconds in (0.25, 0.5):
        with hierarchical_timer("env.step"):
            fake_clock.advance(seconds)
    assert extremes_of(snapshot_and_flush()) == {"env.step": (0.25, 0.5)}


def test_a_run_split_by_a_flush_counts_whole_in_the_window_where_it_closes(fake_clock):
    with hierarchical_timer("worker.loop"):
        fake_clock.advance(2.0)
        during = snapshot_and_flush()
        fake_clock.advance(3.0)
    after = snapshot_and_flush()
    assert extremes_of(during) == {"worker.loop": (0.0, 0.0)}  # no call closed yet
    assert extremes_of(after) == {"worker.loop": (5.0, 5.0)}  # the whole 5 s run, not the 3 s


def run_50_blocks(fake_clock) -> None:
    for group in range(5):
        with hierarchical_timer(f"env.block{group:02d}"):
            for child in range(9):
                with hierarchical_timer(f"env.child{child:02d}"):
                    fake_clock.advance(0.001)


def test_a_50_node_payload_after_the_first_pickles_under_2_kb(fake_clock):
    run_50_blocks(fake_clock)
    snapshot_and_flush()
    run_50_blocks(fake_clock)
    payload = snapshot_and_flush()
    assert len(blocks_of(payload)) == 50
    assert len(pickle.dumps(payload)) < 2048


def test_the_names_travel_in_the_first_payload_only(fake_clock):
    run_50_blocks(fake_clock)
    first = snapshot_and_flush()
    run_50_blocks(fake_clock)
    second = snapshot_and_flush()
    assert len(first[7][1]) == 50
    assert second[7] == (50, ())


def test_a_payload_can_declare_every_name_again(fake_clock):
    run_50_blocks(fake_clock)
    snapshot_and_flush()
    run_50_blocks(fake_clock)
    assert snapshot_and_flush(declare_all=True)[7][0] == 0


# --- WorkerTimers -----------------------------------------------------------------------------


def test_worker_timers_flush_every_n_steps(fake_clock):
    reporter = WorkerTimers(flush_every=3)
    due = [reporter.step_done() is not None for _ in range(7)]
    assert due == [False, False, True, False, False, True, False]


def test_worker_timers_flush_after_an_interval(fake_clock):
    reporter = WorkerTimers(flush_interval=1.0)
    due = []
    for _ in range(5):
        fake_clock.advance(0.5)
        due.append(reporter.step_done() is not None)
    assert due == [False, True, False, True, False]


def test_worker_timers_flush_on_whichever_comes_first(fake_clock):
    reporter = WorkerTimers(flush_every=100, flush_interval=1.0)
    fake_clock.advance(1.0)
    assert reporter.step_done() is not None


def test_worker_timers_default_to_a_one_second_interval(fake_clock):
    reporter = WorkerTimers()
    assert reporter.step_done() is None
    fake_clock.advance(1.0)
    assert reporter.step_done() is not None


def test_worker_timers_given_the_time_flush_on_the_same_interval(fake_clock):
    reporter = WorkerTimers(flush_interval=1.0)
    fake_clock.advance(0.5)
    assert reporter.step_done(now=fake_clock()) is None
    fake_clock.advance(0.5)
    assert reporter.step_done(now=fake_clock()) is not None


def test_worker_timers_are_quiet_until_the_interval_is_over(fake_clock):
    reporter = WorkerTimers(flush_interval=1.0)
    assert reporter.quiet_until == fake_clock() + 1.0
    fake_clock.advance(1.0)
    reporter.step_done()
    assert reporter.quiet_until == fake_clock() + 1.0


def test_worker_timers_counting_steps_are_never_quiet(fake_clock):
    assert WorkerTimers(flush_every=3, flush_interval=1.0).quiet_until == float("-inf")


def test_the_final_payload_holds_what_no_step_flushed(fake_clock):
    reporter = WorkerTimers(flush_every=1000)
    for _ in range(5):
        with hierarchical_timer("env.step"):
            fake_clock.advance(0.1)
        assert reporter.step_done() is None
    assert blocks_of(reporter.final_payload())["env.step"][1] == 5


@pytest.mark.parametrize("options", [{"flush_every": 0}, {"flush_every": 1.5}, {"flush_interval": 0}])
def test_worker_timers_refuse_meaningless_options(options):
    with pytest.raises(ValueError):
        WorkerTimers(**options)


# --- validation -------------------------------------------------------------------------------


def good_payload():
    return tree_payload(
        ("env.step", 0.5, 2, 0, (0.2, 0.3), (("physics", 0.25, 2, 0, (0.1, 0.15), ()),)),
        sequence=1, stream=7, pid=1234, window=(10.0, 11.0), gauges=(("reward", 1.0, 0.0, 2.0, 3),),
    )


def replace(payload, index, value):
    return payload[:index] + (value,) + payload[index + 1:]


def test_a_well_formed_payload_validates():
    validate_payload(good_payload())


ROW = (0, 2, 0.5, 0.2, 0.3)  # env.step's row in good_payload


def with_step_row(**changes):
    fields = ("id", "count", "total", "minimum", "maximum")
    row = tuple(changes.get(field, value) for field, value in zip(fields, ROW))
    return with_rows(good_payload(), [row, (1, 2, 0.25, 0.1, 0.15)])


@pytest.mark.parametrize(
    "bad, message",
    [
        ("not a payload", "not an rlprof timer payload"),
        (("someone.else", 1), "not an rlprof timer payload"),
        (replace(good_payload(), 1, 99), "version 99"),
        (replace(good_payload(), 1, 3), "version 3"),
        (good_payload()[:14], "has 14 fields"),
        (replace(good_payload(), 4, 0), "sequence"),
        (replace(good_payload(), 6, 9.0), "ends before it starts"),
        (replace(good_payload(), 7, (0, ((-1, ""),))), "name"),
        (replace(good_payload(), 7, (0, ((-1, "a"), (5, "b")))), "parent id 5"),
        (replace(good_payload(), 7, (0, ((-1, "a", "extra"),))), "parent_id, name"),
        (replace(good_payload(), 7, (-1, ())), "first_id"),
        (replace(good_payload(), 7, "names"), "names"),
        (replace(good_payload(), 8, b"\x00" * 47), "truncated"),
        (replace(good_payload(), 8, ((0, 1),)), "must be bytes"),
        (with_step_row(total=-1.0), "block 0 has a number out of bounds"),
        (with_step_row(total=float("nan")), "block 0 has a number out of bounds"),
        (with_step_row(maximum=float("inf")), "block 0 has a number out of bounds"),
        (with_step_row(total=1e300), "block 0 has a number out of bounds"),
        (with_step_row(count=2**63 - 1), "block 0 has a number out of bounds"),
        (with_step_row(count=-1), "block 0 has a number out of bounds"),
        (with_step_row(id=2**31), "block id 2147483648 was never declared"),
        (replace(good_payload(), 9, ((0, -3),)), "errors of block 0"),
        (replace(good_payload(), 9, ((5, 1),)), "errors: block id 5 was never declared"),
        (replace(good_payload(), 9, ((1, 1), (0, 1))), "out of order"),
        (replace(good_payload(), 9, ((0,),)), "errors: must be"),
        (with_step_row(minimum=0.75), "shortest call longer"),
        (with_step_row(id=2), "block id 2 was never declared"),
        (with_step_row(id=1), "ascend"),
        (replace(good_payload(), 10, ((0, "rl", "task"),)), "labels"),
        (replace(good_payload(), 10, ((0, "rl", 3, ()),)), "object_type"),
        (replace(good_payload(), 10, ((7, "rl", "task", ()),)), "block id 7 was never declared"),
        (replace(good_payload(), 11, (("reward", 1.0),)), r"gauges\[0\]"),
        (replace(good_payload(), 12, ("h", 0.0, "t", (("a", 1.0, 2.0, (("cat",),)),), (), (), 0, ())), "a detail is a"),
        (replace(good_payload(), 12, ("h", 0.0, "t", (), (("m", 1.0, (("cat", None),)),), (), 0, ())), r"details.cat"),
        (replace(good_payload(), 12, ("host",)), "timeline"),
    ],
)
def test_a_malformed_payload_is_refused_with_a_clear_reason(bad, message):
    with pytest.raises(PayloadError, match=message):
        validate_payload(bad)


def spans_payload(*spans, packed=()):
    return replace(good_payload(), 12, ("h", 0.0, "t", spans, (), (), 0, packed))


def pairs(*values: float) -> bytes:
    """Packed spans' ``(start, end)`` pairs, as a payload carries them."""
    return struct.pack(f"<{len(values)}d", *values)


def test_packed_spans_are_accepted():
    validate_payload(spans_payload(packed=(("env.step", pairs(0.5, 0.75, 1.0, 1.0)), ("env.reset", b""))))


@pytest.mark.parametrize(
    "packed, message",
    [
        ((("env.step", pairs(0.75, 0.5)),), r"timeline.packed_spans\[0\]: a span ends before it starts"),
        ((("env.step", pairs(0.5, float("nan"))),), r"timeline.packed_spans\[0\]: a time is not finite"),
        ((("env.step", pairs(0.5, 2.0**50)),), r"timeline.packed_spans\[0\]: a time is not finite, or more than"),
        ((("env.step", pairs(0.5, 0.75)[:-1]),), r"timeline.packed_spans\[0\]: the pairs must be bytes"),
        ((("env.step", pairs(0.5, 0.75, 1.0)),), r"timeline.packed_spans\[0\]: the pairs must be bytes"),
        ((("env.step", [0.5, 0.75]),), r"timeline.packed_spans\[0\]: the pairs must be bytes"),
        ((("", pairs(0.5, 0.75)),), r"timeline.packed_spans\[0\]: the name must be a non-empty str"),
        ((("env.step",),), r"timeline.packed_spans\[0\]: must be \(name, pairs\)"),
        (None, r"timeline.packed_spans: must be a sequence"),
    ],
)
def test_bad_packed_spans_are_refused_naming_their_place(packed, message):
    with pytest.raises(PayloadError, match=message):
        validate_payload(spans_payload(packed=packed))


def test_plain_spans_and_spans_of_whole_seconds_are_accepted():
    validate_payload(spans_payload(("env.step", 0.5, 0.75), ("env.step", -2.0, -1.0), ("env.reset", 1, 2)))


@pytest.mark.parametrize(
    "span, message",
    [
        (("env.step", 0.75, 0.5), r"timeline.spans\[1\]: a span ends before it starts"),
        (("env.step", float("nan"), 0.5), r"timeline.spans\[1\]: must be a finite number"),
        (("env.step", 0.5, float("inf")), r"timeline.spans\[1\]: must be a finite number"),
        (("", 0.5, 0.75), r"timeline.spans\[1\]: a name must be a non-empty string"),
        (("env.step", 0.5), r"timeline.spans\[1\]: must have 3 fields"),
        (("env.step", "0.5", 0.75), r"timeline.spans\[1\]: must be a number"),
    ],
)
def test_a_bad_span_among_plain_spans_is_refused_naming_its_place(span, message):
    with pytest.raises(PayloadError, match=message):
        validate_payload(spans_payload(("env.step", 0.25, 0.5), span))


def test_a_time_just_below_the_bound_is_accepted_and_the_bound_refused():
    from profiler.multiprocess.payload import MAX_SECONDS

    below = with_rows(good_payload(), [(0, 1, MAX_SECONDS * 0.99, 0.5, 0.5)])
    validate_payload(below)
    with pytest.raises(PayloadError, match="out of bounds"):
        validate_payload(with_rows(good_payload(), [(0, 1, MAX_SECONDS, 0.5, 0.5)]))


def test_rows_with_the_ids_known_to_ascend_are_still_checked_against_the_declared_ids():
    rows = [(0, 1, 0.5, 0.5, 0.5), (1, 1, 0.25, 0.25, 0.25)]
    blocks = pack_rows(rows)
    assert row_ids(blocks, 2, ascending_ids=(0, 1)) == (0, 1)
    with pytest.raises(PayloadError, match="block id 1 was never declared"):
        row_ids(blocks, 1, ascending_ids=(0, 1))


def test_rows_with_other_ids_than_the_known_ones_are_checked_in_full():
    with pytest.raises(PayloadError, match="ascend"):
        row_ids(pack_rows([(1, 1, 0.5, 0.5, 0.5), (0, 1, 0.25, 0.25, 0.25)]), 2, ascending_ids=(0, 1))


def test_payload_error_is_a_value_error():
    assert issubclass(PayloadError, ValueError)


def test_a_block_flushed_mid_run_shows_no_closed_time_until_it_closes(fake_clock):
    with hierarchical_timer("worker.loop"):
        fake_clock.advance(2.0)
        snapshot_and_flush()
        assert get_timer_tree()["children"][0]["total"] == 0.0


# --- what set_gauge accepts, a payload carries ----------------------------------------------------


def test_numpy_gauge_readings_travel_as_python_floats(fake_clock):
    set_gauge("reward", np.float64(1.5))
    set_gauge("reward", np.float32(0.5))
    payload = snapshot_and_flush()
    validate_payload(payload)
    assert payload[11] == (("reward", 0.5, 0.5, 1.5, 2),)
    assert only_plain_data(payload)


def test_nan_and_infinite_gauge_readings_are_valid(fake_clock):
    set_gauge("loss", float("nan"))
    set_gauge("grad_norm", float("inf"))
    validate_payload(snapshot_and_flush())


def test_a_payload_with_a_numpy_reading_validates(fake_clock):
    validate_payload(replace(good_payload(), 11, (("reward", np.float32(1.0), np.float64(0.0), 2, 3),)))


def test_a_gauge_that_is_not_a_number_is_refused_naming_the_gauge():
    bad = replace(good_payload(), 11, (("reward", "high", 0.0, 2.0, 3),))
    with pytest.raises(PayloadError, match=r"gauges\[0\].value: gauge 'reward': expected a real number, got str"):
        validate_payload(bad)


# --- blocks nested deeper than the limit ----------------------------------------------------------


def recurse(levels: int, clock) -> None:
    with hierarchical_timer("recurse"):
        clock.advance(1.0)
        if levels > 1:
            recurse(levels - 1, clock)


def test_blocks_deeper_than_the_limit_are_folded_into_one_block(fake_clock):
    recurse(MAX_DEPTH + 50, fake_clock)
    payload = snapshot_and_flush()
    validate_payload(payload)
    blocks = blocks_of(payload)
    deepest = max(blocks, key=lambda path: path.count("/"))
    assert deepest == "recurse/" * (MAX_DEPTH - 1) + FOLDED_BLOCK_NAME
    # The fold holds the 51 levels from the limit down: their time, and the one call into them.
    assert blocks[deepest] == (51.0, 1, 0)
    assert blocks["recurse"] == (150.0, 1, 0)


def test_folded_blocks_are_flushed_too(fake_clock):
    recurse(MAX_DEPTH + 5, fake_clock)
    snapshot_and_flush()
    recurse(MAX_DEPTH + 5, fake_clock)
    blocks = blocks_of(snapshot_and_flush())
    assert blocks["recurse/" * (MAX_DEPTH - 1) + FOLDED_BLOCK_NAME] == (6.0, 1, 0)


def test_a_block_open_below_the_limit_is_split_into_the_fold(fake_clock):
    def open_deep(levels: int) -> None:
        with hierarchical_timer("recurse"):
            if levels > 1:
                open_deep(levels - 1)
            else:
                fake_clock.advance(2.0)
                payloads.append(snapshot_and_flush())
                fake_clock.advance(3.0)

    payloads: list = []
    open_deep(MAX_DEPTH + 3)
    payloads.append(snapshot_and_flush())
    fold = "recurse/" * (MAX_DEPTH - 1) + FOLDED_BLOCK_NAME
    assert [blocks_of(payload)[fold] for payload in payloads] == [(2.0, 0, 0), (3.0, 1, 0)]


def test_labels_and_event_details_travel_as_plain_data(fake_clock):
    from profiler import Domain
    from profiler.recording import events

    events.start_recording()
    try:
        rl = Domain("rl")
        with rl.new_task("env.step"):
            rl.new_marker("reset").mark()
        payload = snapshot_and_flush()
    finally:
        events.stop_recording()
        events.clear_recording()
    validate_payload(payload)
    assert only_plain_data(payload)
    assert payload[10] == ((0, "rl", "task", ()),)
    _, _, _, spans, instants, _, _, _ = payload[12]
    assert spans[0][3] == (("cat", "rl"), ("object_type", "task"))
    assert instants[0][2] == (("cat", "rl"), ("scope", "p"))
