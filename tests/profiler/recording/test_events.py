"""Specification of timeline recording: spans, instants, counters, bounds, payloads, the dump."""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator

import pytest

from profiler import get_timer_stack_for_thread, get_timer_tree, hierarchical_timer, load_timing_tree, set_gauge, write_timing_tree
from profiler.recording import events
from profiler.multiprocess.clock_offset import ClockOffset
from profiler.multiprocess.merge import TimerMerger
from profiler.multiprocess.payload import snapshot_and_flush
from profiler.timing.timers import TimerNode, TimerStack, all_timer_stacks


@pytest.fixture
def recording(fake_clock) -> Iterator[None]:
    events.clear_recording()
    events.start_recording(capacity=1000)
    try:
        yield
    finally:
        events.stop_recording()
        events.clear_recording()


def trainer_thread(tree: dict) -> dict:
    trainer = tree["timeline"]["processes"][0]
    return next(thread for thread in trainer["threads"] if thread["name"] == threading.current_thread().name)


def test_nothing_is_recorded_while_recording_is_off(fake_clock):
    events.clear_recording()
    with hierarchical_timer("env.step"):
        fake_clock.advance(1.0)
    assert "timeline" not in get_timer_tree()


def test_recording_off_leaves_the_plain_exit_in_place():
    assert TimerNode.__exit__ is not TimerNode._exit_and_record


def test_each_block_records_its_span(recording, fake_clock):
    with hierarchical_timer("env.step"):
        fake_clock.advance(0.25)
    assert trainer_thread(get_timer_tree())["spans"] == [["env.step", 1000.0, 1000.25]]


def test_spans_of_nested_blocks_nest(recording, fake_clock):
    with hierarchical_timer("outer"):
        fake_clock.advance(1.0)
        with hierarchical_timer("inner"):
            fake_clock.advance(1.0)
        fake_clock.advance(1.0)
    spans = {name: (start, end) for name, start, end in trainer_thread(get_timer_tree())["spans"]}
    assert spans["outer"][0] <= spans["inner"][0] <= spans["inner"][1] <= spans["outer"][1]


def test_markers_are_instant_events(recording, fake_clock):
    fake_clock.advance(2.0)
    events.mark("restart worker 2")
    assert trainer_thread(get_timer_tree())["instants"] == [["restart worker 2", 1002.0]]


def test_gauges_and_counters_become_counter_samples(recording, fake_clock):
    set_gauge("reward", 3.0)
    fake_clock.advance(1.0)
    events.record_counter("cpu_percent", 85.0)
    trainer = get_timer_tree()["timeline"]["processes"][0]
    assert trainer["counters"] == [["reward", 1000.0, 3.0], ["cpu_percent", 1001.0, 85.0]]


def five_steps_in_a_ring_of_three(fake_clock) -> dict:
    """The timeline of five 1-second steps recorded with room for three."""
    events.clear_recording()
    events.start_recording(capacity=3)
    try:
        for _ in range(5):
            with hierarchical_timer("env.step"):
                fake_clock.advance(1.0)
        return get_timer_tree()["timeline"]
    finally:
        events.stop_recording()
        events.clear_recording()


def test_the_buffers_are_bounded_and_count_what_they_drop(fake_clock):
    timeline = five_steps_in_a_ring_of_three(fake_clock)
    assert [start for _, start, _ in trainer_thread({"timeline": timeline})["spans"]] == [1002.0, 1003.0, 1004.0]
    assert timeline["dropped"] == 2


def test_a_thread_whose_ring_dropped_spans_says_from_when_on_it_holds_them_all(fake_clock):
    thread = trainer_thread({"timeline": five_steps_in_a_ring_of_three(fake_clock)})
    assert thread["spans_complete_after"] == 1003.0  # the end of the oldest span it kept
    assert min(end for _, _, end in thread["spans"]) == 1003.0


def test_a_thread_that_dropped_nothing_says_nothing_of_when_its_spans_are_complete(recording, fake_clock):
    with hierarchical_timer("env.step"):
        fake_clock.advance(1.0)
    assert "spans_complete_after" not in trainer_thread(get_timer_tree())


def test_stopping_keeps_what_was_recorded_and_records_no_more(recording, fake_clock):
    with hierarchical_timer("before"):
        pass
    events.stop_recording()
    with hierarchical_timer("after"):
        pass
    events.mark("ignored")
    thread = trainer_thread(get_timer_tree())
    assert [span[0] for span in thread["spans"]] == ["before"]
    assert thread["instants"] == []


def test_each_thread_has_its_own_track(recording):
    def work():
        with hierarchical_timer("background"):
            pass

    worker = threading.Thread(target=work, name="loader")
    worker.start()
    worker.join()
    threads = get_timer_tree()["timeline"]["processes"][0]["threads"]
    get_timer_stack_for_thread(worker).reset()  # keep its block out of later tests' trees
    loader = next(thread for thread in threads if thread["name"] == "loader")
    assert [span[0] for span in loader["spans"]] == ["background"]
    assert len({thread["tid"] for thread in threads}) == len(threads)


def test_recorded_events_travel_in_the_payload_and_are_drained(recording, fake_clock):
    worker = TimerStack("worker main")
    with hierarchical_timer("env.step", worker):
        fake_clock.advance(1.0)
    events.mark("reset", worker)
    first = snapshot_and_flush(worker)
    second = snapshot_and_flush(worker)
    host, _, thread_name, spans, instants, counters, dropped, packed = first[12]
    assert (host, thread_name) == (events.HOST, "worker main")
    assert spans == (("env.step", 1000.0, 1001.0),)
    assert instants == (("reset", 1001.0),)
    assert packed == ()
    assert second[12][3:6] == ((), (), ())


def test_a_payload_carries_no_timeline_when_nothing_was_recorded(fake_clock):
    events.clear_recording()
    assert snapshot_and_flush(TimerStack("worker"))[12] is None


def test_worker_events_land_on_the_workers_own_track(recording, fake_clock):
    worker = TimerStack("worker main")
    with hierarchical_timer("env.step", worker):
        fake_clock.advance(1.0)
    TimerMerger().merge_payload(3, snapshot_and_flush(worker))
    processes = get_timer_tree()["timeline"]["processes"]
    assert [process["name"] for process in processes] == ["trainer", "worker 3"]
    worker_process = processes[1]
    assert worker_process["clock_offset"] == 0.0
    assert worker_process["threads"] == [
        {"tid": 1, "name": "worker main", "spans": [["env.step", 1000.0, 1001.0]], "instants": []}
    ]


def test_events_from_another_machine_are_shifted_onto_the_trainers_clock(recording, fake_clock):
    remote_origin = events.clock_origin() + 50.0  # its clock reads 50 s less than ours
    payload = snapshot_and_flush(TimerStack("remote"))
    timeline = ("other-host", remote_origin, "main", (("env.step", 1.0, 2.0),), (), (), 0, ())
    TimerMerger().merge_payload(0, payload[:12] + (timeline,) + payload[13:])
    remote = get_timer_tree()["timeline"]["processes"][1]
    assert remote["clock_offset"] == pytest.approx(50.0, abs=0.01)  # wall clock moves meanwhile
    assert remote["threads"][0]["spans"] == [["env.step", pytest.approx(51.0, abs=0.01), pytest.approx(52.0, abs=0.01)]]


def remote_payload(spans: tuple, host: str = "other-host", packed: tuple = ()) -> tuple:
    """A payload from a process on ``host`` whose timeline holds ``spans`` and ``packed`` spans
    (its own clock)."""
    payload = snapshot_and_flush(TimerStack("remote"))
    return payload[:12] + ((host, events.clock_origin() + 50.0, "main", spans, (), (), 0, packed),) + payload[13:]


def test_a_workers_packed_spans_land_on_its_track_shifted_among_its_spans(recording, fake_clock):
    clock = ClockOffset()
    clock.update([(10.0, 7.0, 10.0)])
    merger = TimerMerger(timeline_capacity=2)
    merger.set_clock(0, clock)
    packed = (("env.step", struct.pack("<6d", 0.5, 0.75, 1.0, 1.5, 2.5, 3.0)),)
    merger.merge_payload(0, remote_payload((("physics", 1.25, 1.5),), packed=packed))
    timeline = get_timer_tree()["timeline"]
    assert timeline["processes"][1]["threads"][0]["spans"] == [
        ["physics", 4.25, 4.5], ["env.step", 4.0, 4.5], ["env.step", 5.5, 6.0]  # a parent after its children
    ]
    assert timeline["dropped"] == 1  # the oldest env step, beyond the worker thread's capacity of 2


def test_a_round_trip_clock_estimate_replaces_the_wall_clock_guess(recording, fake_clock):
    clock = ClockOffset()
    clock.update([(10.0, 7.0, 10.002)])  # its clock read 7.0 between our 10.0 and 10.002
    merger = TimerMerger()
    merger.set_clock(0, clock)
    merger.merge_payload(0, remote_payload((("env.step", 1.0, 2.0),)))
    remote = get_timer_tree()["timeline"]["processes"][1]
    assert remote["clock_offset"] == pytest.approx(3.001)
    assert remote["clock_uncertainty"] == pytest.approx(0.001)
    assert remote["threads"][0]["spans"] == [["env.step", pytest.approx(4.001), pytest.approx(5.001)]]


def test_each_payload_is_shifted_by_the_estimate_current_when_it_arrives(recording, fake_clock):
    clock = ClockOffset()
    merger = TimerMerger()
    merger.set_clock(0, clock)
    clock.update([(10.0, 7.0, 10.0)])
    merger.merge_payload(0, remote_payload((("first", 1.0, 2.0),)))
    clock.update([(20.0, 16.5, 20.0)])  # the clocks drifted half a second apart meanwhile
    merger.merge_payload(0, remote_payload((("second", 11.0, 12.0),)))
    remote = get_timer_tree()["timeline"]["processes"][1]
    assert remote["threads"][0]["spans"] == [["first", 4.0, 5.0], ["second", 14.5, 15.5]]
    assert remote["clock_offset"] == 3.5  # the latest shift


def test_a_worker_process_names_its_host_on_the_timeline(recording, fake_clock):
    TimerMerger().merge_payload(0, remote_payload((), host="env-host-7"))
    processes = get_timer_tree()["timeline"]["processes"]
    assert [process["host"] for process in processes] == [events.HOST, "env-host-7"]


def test_the_timeline_survives_a_write_and_load(recording, fake_clock, tmp_path):
    with hierarchical_timer("env.step"):
        fake_clock.advance(1.0)
    events.mark("checkpoint")
    set_gauge("reward", 1.0)
    path = write_timing_tree(tmp_path / "run_timers.json")
    timeline = load_timing_tree(path)["timeline"]
    assert timeline["clock"] == "perf_counter"
    assert timeline["processes"][0]["name"] == "trainer"
    assert trainer_thread({"timeline": timeline})["spans"] == [["env.step", 1000.0, 1001.0]]


def test_a_capacity_below_one_is_refused():
    with pytest.raises(ValueError):
        events.start_recording(capacity=0)


def test_a_span_open_across_a_flush_keeps_its_real_start_and_nests(recording, fake_clock):
    worker = TimerStack("worker main")
    with hierarchical_timer("worker.loop", worker):
        with hierarchical_timer("env.step", worker):
            fake_clock.advance(1.0)
        first = snapshot_and_flush(worker)
        fake_clock.advance(1.0)
    second = snapshot_and_flush(worker)
    assert first[12][3] == (("env.step", 1000.0, 1001.0),)
    assert second[12][3] == (("worker.loop", 1000.0, 1002.0),)


def time_in_a_thread(block: str, thread_name: str) -> None:
    """Start a thread that times one ``block``, and wait for it to end."""

    def work():
        with hierarchical_timer(block):
            pass

    thread = threading.Thread(target=work, name=thread_name)
    thread.start()
    thread.join()


def test_an_ended_threads_recorded_events_keep_their_track_after_its_tree_is_folded(recording):
    for index in range(3):
        time_in_a_thread("fetch", f"fetcher-{index}")
    tree = get_timer_tree(include_threads=True)
    tracks = [thread["name"] for thread in tree["timeline"]["processes"][0]["threads"]]
    assert sorted(name for name in tracks if name.startswith("fetcher")) == ["fetcher-0", "fetcher-1", "fetcher-2"]
    assert next(child for child in tree["children"] if child["name"] == "thread:ended:fetcher-N")["count"] == 3


def test_an_ended_thread_kept_for_its_events_is_let_go_once_they_are_cleared(recording):
    time_in_a_thread("fetch", "one-off")
    assert "one-off" in [stack.thread_name for stack in all_timer_stacks()]
    events.clear_recording()
    assert "one-off" not in [stack.thread_name for stack in all_timer_stacks()]


@pytest.mark.parametrize("held", [0, 3, 5])
def test_events_added_in_bulk_fill_the_ring_and_count_what_they_push_out_as_one_by_one(held):
    one_by_one, in_bulk = events.ThreadTimeline(5), events.ThreadTimeline(5)
    for index in range(held):
        for timeline in (one_by_one, in_bulk):
            timeline.add_instant("before", float(index))
            timeline.add_counter("before", float(index), 1.0)
    instants = [("mark", float(index)) for index in range(4)]
    samples = [("count", float(index), 2.0) for index in range(4)]
    for name, at in instants:
        one_by_one.add_instant(name, at)
    for name, at, value in samples:
        one_by_one.add_counter(name, at, value)
    in_bulk.add_instants(instants)
    in_bulk.add_counters(samples)
    assert (list(in_bulk.instants), list(in_bulk.counters)) == (list(one_by_one.instants), list(one_by_one.counters))
    assert in_bulk.dropped == one_by_one.dropped == 2 * max(0, held + 4 - 5)


@pytest.mark.parametrize("held", [0, 3, 5])
def test_spans_added_in_bulk_fill_the_ring_and_count_as_one_by_one(held):
    one_by_one, in_bulk = events.ThreadTimeline(5), events.ThreadTimeline(5)
    for index in range(held):
        for timeline in (one_by_one, in_bulk):
            timeline.spans.append(("before", float(index), float(index) + 0.5))
            timeline.spans_recorded += 1
    spans = [("step", float(index), float(index) + 0.25) for index in range(4)]
    for span in spans:
        one_by_one.spans.append(span)
        one_by_one.spans_recorded += 1
    in_bulk.add_spans(spans)
    assert list(in_bulk.spans) == list(one_by_one.spans)
    assert in_bulk.dropped_so_far() == one_by_one.dropped_so_far() == max(0, held + 4 - 5)
