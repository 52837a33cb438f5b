"""Specification of memory sampling: when samples are taken, what they hold, allocations per block,
how they travel in payloads and land in the dump."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest

from profiler import (
    TimerMerger,
    TimerNode,
    TimerStack,
    get_timer_tree,
    hierarchical_timer,
    load_timing_tree,
    snapshot_and_flush,
    write_timing_tree,
)
from profiler.recording import events, memory
from profiler.timing.timer_node import PLAIN_ENTER, PLAIN_EXIT
from profiler.multiprocess.payload import PayloadError, validate_payload

MEGABYTE = 1024 * 1024


def trainer_samples():
    return get_timer_tree()["memory"]["processes"][0]["samples"]


def run_blocks(count, clock=None):
    for _ in range(count):
        with hierarchical_timer("step"):
            if clock is not None:
                clock.advance(1.0)


# --- the sample buffer ---------------------------------------------------------------------------


def test_a_full_buffer_keeps_every_other_sample_and_then_every_other_new_one():
    buffer = memory.SampleBuffer(capacity=4)
    for moment in range(10):
        buffer.add((float(moment), moment, None))
    kept = [sample[0] for sample in buffer.take()]
    assert kept == [0.0, 4.0, 8.0]
    assert buffer.stride == 4


def test_a_buffer_that_never_fills_keeps_every_sample():
    buffer = memory.SampleBuffer(capacity=100)
    buffer.extend((float(moment), 1, None) for moment in range(50))
    assert len(buffer.since(0.0)) == 50 and buffer.stride == 1


# --- when samples are taken ----------------------------------------------------------------------


def test_sampling_off_leaves_the_plain_block_methods_in_place():
    assert TimerNode.__enter__ is PLAIN_ENTER
    assert TimerNode.__exit__ is PLAIN_EXIT


def test_sample_rate_samples_every_n_blocks(fake_clock):
    memory.start_sampling(every_blocks=2)
    run_blocks(6, fake_clock)
    # One sample at the start, then after blocks 2, 4 and 6.
    assert [sample[0] for sample in trainer_samples()] == [1000.0, 1002.0, 1004.0, 1006.0]


def test_a_sample_is_resident_bytes_and_no_unique_set_unless_asked(fake_clock):
    memory.start_sampling(every_blocks=1)
    _, rss, uss = trainer_samples()[0]
    assert rss > MEGABYTE and uss is None


def test_uss_is_read_when_asked(fake_clock):
    memory.start_sampling(every_blocks=1, uss=True)
    _, rss, uss = trainer_samples()[0]
    assert 0 < uss <= rss


def test_an_interval_samples_on_a_thread_without_any_block():
    memory.start_sampling(interval=0.01)
    deadline = time.monotonic() + 30
    while len(memory._sampler.buffer.since(float("-inf"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(memory._sampler.buffer.since(float("-inf"))) >= 4
    assert any(thread.name == "rlprof memory sampler" for thread in threading.enumerate())


def test_stopping_takes_the_observers_out_and_ends_the_thread(fake_clock):
    memory.start_sampling(every_blocks=1, interval=0.01)
    memory.stop_sampling()
    assert TimerNode.__exit__ is PLAIN_EXIT
    assert not any(thread.name == "rlprof memory sampler" for thread in threading.enumerate())
    kept = len(trainer_samples())
    run_blocks(3, fake_clock)
    assert len(trainer_samples()) == kept


def test_sampling_and_span_recording_work_together(fake_clock):
    events.start_recording()
    try:
        memory.start_sampling(every_blocks=1)
        run_blocks(2, fake_clock)
        events.stop_recording()
        run_blocks(1, fake_clock)
    finally:
        events.stop_recording()
    tree = get_timer_tree()
    assert len(tree["timeline"]["processes"][0]["threads"][0]["spans"]) == 2
    assert len(tree["memory"]["processes"][0]["samples"]) == 4


def test_a_reset_stack_forgets_the_samples_taken_before(fake_clock):
    from profiler import reset_timers

    memory.start_sampling(every_blocks=1)
    run_blocks(3, fake_clock)
    fake_clock.advance(1.0)
    reset_timers()
    run_blocks(1, fake_clock)
    assert [sample[0] for sample in trainer_samples()] == [1005.0]


@pytest.mark.parametrize("options, message", [
    ({"every_blocks": -1}, "sample_rate"),
    ({"every_blocks": 1.5}, "sample_rate"),
    ({"interval": 0}, "interval"),
    ({"every_blocks": 1, "capacity": 1}, "capacity"),
    ({}, "nothing to measure"),
])
def test_meaningless_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        memory.start_sampling(**options)


# --- allocations per block -----------------------------------------------------------------------


def allocations_by_path():
    return {tuple(block["path"]): block for block in get_timer_tree()["memory"]["processes"][0]["blocks"]}


def test_a_block_that_keeps_what_it_allocates_shows_it_as_net():
    memory.start_sampling(track_allocations=True)
    kept = []
    for _ in range(2):
        with hierarchical_timer("grow"):
            kept.append(bytearray(MEGABYTE))
    grow = allocations_by_path()[("grow",)]
    assert grow["calls"] == 2
    assert grow["net_bytes"] >= 2 * MEGABYTE
    assert MEGABYTE <= grow["peak_bytes"] < 2 * MEGABYTE


def test_a_block_that_frees_what_it_allocates_shows_a_peak_and_no_net():
    memory.start_sampling(track_allocations=True)
    with hierarchical_timer("temporary"):
        scratch = bytearray(4 * MEGABYTE)
        del scratch
    temporary = allocations_by_path()[("temporary",)]
    assert temporary["peak_bytes"] >= 4 * MEGABYTE
    assert abs(temporary["net_bytes"]) < MEGABYTE


def test_a_parent_block_includes_its_childrens_allocations():
    memory.start_sampling(track_allocations=True)
    kept = []
    with hierarchical_timer("outer"):
        with hierarchical_timer("inner"):
            scratch = bytearray(3 * MEGABYTE)
            del scratch
            kept.append(bytearray(MEGABYTE))
    blocks = allocations_by_path()
    assert blocks[("outer",)]["peak_bytes"] >= blocks[("outer", "inner")]["peak_bytes"] >= 3 * MEGABYTE
    assert blocks[("outer",)]["net_bytes"] >= MEGABYTE


def test_another_threads_blocks_are_under_its_thread_name():
    memory.start_sampling(track_allocations=True)

    def work():
        with hierarchical_timer("load"):
            bytearray(MEGABYTE)

    thread = threading.Thread(target=work, name="loader")
    thread.start()
    thread.join()
    assert ("thread:loader", "load") in allocations_by_path()


def test_a_block_open_before_tracking_started_is_left_out():
    with hierarchical_timer("already open"):
        memory.start_sampling(track_allocations=True)
        with hierarchical_timer("inside"):
            pass
    assert list(allocations_by_path()) == [("already open", "inside")]


# --- the dump ------------------------------------------------------------------------------------


def test_the_dump_holds_the_trainers_samples_and_survives_a_write_and_load(fake_clock, tmp_path, strict_json):
    memory.start_sampling(every_blocks=1, track_allocations=True)
    run_blocks(2, fake_clock)
    path = write_timing_tree(tmp_path / "run_timers.json")
    strict_json(path.read_text())
    section = load_timing_tree(path)["memory"]
    (trainer,) = section["processes"]
    assert (section["unit"], trainer["name"], trainer["stride"]) == ("bytes", "trainer", 1)
    assert [sample[0] for sample in trainer["samples"]] == [1000.0, 1001.0, 1002.0]
    assert trainer["blocks"][0]["path"] == ["step"] and trainer["blocks"][0]["calls"] == 2


def test_a_run_that_measured_nothing_has_no_memory_section():
    run_blocks(1)
    assert "memory" not in get_timer_tree()


@pytest.mark.parametrize("section, message", [
    ({"processes": "x"}, "memory.processes"),
    ({"processes": [{"pid": 1, "name": "trainer", "samples": [[1.0, -5, None]]}]}, "rss"),
    ({"processes": [{"pid": 1, "name": "trainer", "samples": [[1.0, 5]]}]}, "a sample is"),
    ({"processes": [{"pid": 1, "name": "t", "blocks": [{"path": [], "calls": 1, "net_bytes": 0,
                                                        "peak_bytes": 0}]}]}, "path"),
    ({"processes": [{"pid": 1, "name": "t", "blocks": [{"path": ["a"], "calls": 1, "net_bytes": 0.5,
                                                        "peak_bytes": 0}]}]}, "net_bytes"),
])
def test_a_damaged_memory_section_is_refused_by_name(tmp_path, section, message):
    import json

    from profiler import TimerFileError

    path = tmp_path / "run.json"
    path.write_text(json.dumps({"name": "root", "total": 1.0, "count": 1, "children": [], "memory": section}))
    with pytest.raises(TimerFileError, match=message):
        load_timing_tree(path)


# --- payloads ------------------------------------------------------------------------------------


def test_a_payload_carries_the_samples_since_the_last_flush(fake_clock):
    stack = TimerStack("worker")
    memory.start_sampling(every_blocks=1)
    with hierarchical_timer("env.step", stack):
        fake_clock.advance(1.0)
    host, origin, samples, allocations = snapshot_and_flush(stack)[13]
    assert host == events.HOST
    assert [sample[0] for sample in samples] == [1000.0, 1001.0]
    assert allocations == ()
    assert snapshot_and_flush(stack)[13] is None  # drained


def test_merged_worker_samples_land_in_the_workers_memory_entry(fake_clock):
    stack = TimerStack("worker")
    memory.start_sampling(every_blocks=1, track_allocations=True)
    with hierarchical_timer("env.step", stack):
        fake_clock.advance(1.0)
    payload = snapshot_and_flush(stack)
    memory.stop_sampling()
    TimerMerger().merge_payload(2, payload)
    processes = get_timer_tree()["memory"]["processes"]
    worker = next(process for process in processes if process["name"] == "worker 2")
    assert worker["samples"] == [list(sample) for sample in payload[13][2]]
    assert worker["blocks"][0]["path"] == ["env.step"]


def test_samples_from_another_machine_are_shifted_onto_the_trainers_clock():
    payload = snapshot_and_flush(TimerStack("remote"))
    remote = ("other-host", events.clock_origin() + 50.0, ((1.0, MEGABYTE, None),), ())
    TimerMerger().merge_payload(0, payload[:13] + (remote,) + payload[14:])
    (worker,) = get_timer_tree()["memory"]["processes"]
    assert worker["clock_offset"] == pytest.approx(50.0, abs=0.01)
    assert worker["samples"][0][0] == pytest.approx(51.0, abs=0.01)


@pytest.mark.parametrize("field, message", [
    (("host",), "memory: must be"),
    (("host", 0.0, ((1.0, -1, None),), ()), "rss"),
    (("host", 0.0, ((1.0, 1, 2.5),), ()), "uss"),
    (("host", 0.0, (), (((), 1, 0, 0),)), "names at least one block"),
    (("host", 0.0, (), ((("a",), 1, 0.5, 0),)), "net_bytes"),
    (("host", 0.0, (), ((("a",), 1, 0, -1),)), "peak_bytes"),
])
def test_a_malformed_memory_field_is_refused(field, message):
    payload = snapshot_and_flush(TimerStack("worker"))
    with pytest.raises(PayloadError, match=message):
        validate_payload(payload[:13] + (field,) + payload[14:])


def _forked_worker(connection):
    with hierarchical_timer("env.step"):
        pass
    connection.send(snapshot_and_flush())
    connection.close()


def test_a_forked_worker_samples_on_its_own_and_ships_none_of_its_parents_samples(fake_clock):
    memory.start_sampling(every_blocks=1)
    run_blocks(3, fake_clock)
    parent_samples = len(trainer_samples())
    context = multiprocessing.get_context("fork")
    trainer_end, worker_end = context.Pipe()
    process = context.Process(target=_forked_worker, args=(worker_end,))
    process.start()
    assert trainer_end.poll(60), "the forked worker sent nothing"
    payload = trainer_end.recv()
    process.join(60)
    samples = payload[13][2]
    assert len(samples) == 1  # its own block's, none of the parent's
    assert len(trainer_samples()) == parent_samples


def test_samples_follow_the_clock_offset_its_driver_estimates():
    from profiler.multiprocess.clock_offset import ClockOffset

    clock = ClockOffset()
    clock.update([(100.0, 50.0, 100.002)])  # the worker's clock reads about 50 s less than ours
    merger = TimerMerger()
    merger.set_clock(0, clock)
    payload = snapshot_and_flush(TimerStack("remote"))
    remote = ("other-host", 0.0, ((1.0, MEGABYTE, None),), ())
    merger.merge_payload(0, payload[:13] + (remote,) + payload[14:])
    (worker,) = get_timer_tree()["memory"]["processes"]
    assert worker["samples"][0][0] == pytest.approx(51.001)


def test_a_process_that_merges_payloads_keeps_its_samples_for_its_own_dump(fake_clock):
    merger = TimerMerger()  # this process is a trainer; a worker thread of it shares its memory
    worker_thread_stack = TimerStack("worker thread")
    memory.start_sampling(every_blocks=1)
    with hierarchical_timer("env.step", worker_thread_stack):
        fake_clock.advance(1.0)
    payload = snapshot_and_flush(worker_thread_stack)
    assert payload[13] is None
    merger.merge_payload(0, payload)
    assert [process["name"] for process in get_timer_tree()["memory"]["processes"]] == ["trainer"]
