"""Specification of the trainer's record of a vector env whose envs run in worker processes:
steps matched with the workers' finish stamps (critical path), shipments merged or refused."""

from __future__ import annotations

import threading
from array import array

import pytest

from profiler.multiprocess.payload import snapshot_and_flush
from profiler.timing import timers
from profiler.timing.timers import TimerStack

from envmanager.instrumentation.vector_env_record import (
    COMPLETE,
    CUT_SHORT,
    LEFT_RUNNING,
    MATCH_EVERY_STEPS,
    NEVER_CONNECTED,
    STEP_PHASES,
    VectorEnvRecord,
)


@pytest.fixture
def record() -> VectorEnvRecord:
    timers.reset_timers()
    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    return VectorEnvRecord("AsyncVectorEnv", "AsyncVectorEnv", 2, True, stack)


def shipment(stamps: list[float], steps: int = 0, waits: tuple | None = None, untimed: dict | None = None) -> tuple:
    """What a worker ships: a real payload of its own stack, CPU figures, finish stamps, the
    kernel's count of its waits for a core, its stack sampler's section."""
    stack = TimerStack()
    for _ in range(steps):
        with timers.hierarchical_timer("env.step", stack):
            pass
    return (snapshot_and_flush(stack), 0.0, 0.0, 0, array("d", stamps).tobytes(), waits, untimed)


def untimed_section(samples: int) -> dict:
    """A stack sampler's section with one place, as a worker's sampler writes it."""
    return {"thread": "MainThread", "interval_seconds": 0.02, "samples": samples + 1, "in_blocks": 1,
            "unnamed": {"samples": 0, "seconds": 0.0}, "other_places": {"samples": 0, "seconds": 0.0},
            "places": [{"function": "render", "file": "/home/user/train.py", "line": 12, "calls": "",
                        "samples": samples, "seconds": samples * 0.02}]}


def step(record: VectorEnvRecord, sent: float, waiting: float, end: float) -> None:
    record.sent_at = sent
    record.step_done(waiting, end)


def test_each_worker_replies_to_a_step_with_its_last_env_call_inside_the_steps_window(record):
    for window in ((0.0, 1.0, 2.0), (3.0, 4.0, 5.0), (6.0, 7.0, 8.0)):
        step(record, *window)
    record.add_timers(0, shipment([1.5, 4.2, 7.9]))
    record.add_timers(1, shipment([1.8, 4.1, 7.0]))
    record.match_steps()
    first, second = record.critical_path.section(0), record.critical_path.section(1)
    assert (first["vector_steps"], second["vector_steps"]) == (3, 3)
    assert (first["last_to_reply"], second["last_to_reply"]) == (2, 1)
    # Each wait after the second-to-last reply (or after the trainer began waiting, if later).
    assert first["wait_as_last_seconds"] == pytest.approx((4.2 - 4.1) + (7.9 - 7.0))
    assert second["wait_as_last_seconds"] == pytest.approx(1.8 - 1.5)


def test_a_call_outside_every_step_is_no_reply_and_a_step_without_one_is_partial(record):
    step(record, 0.0, 1.0, 2.0)
    step(record, 3.0, 4.0, 5.0)
    record.add_timers(0, shipment([1.5, 2.5, 4.5]))  # 2.5: a reset between the steps
    record.add_timers(1, shipment([1.6]))  # no reply to the second step
    record.match_steps()
    assert record.critical_path.section(0)["vector_steps"] == 2
    assert record.critical_path.section(1)["vector_steps"] == 1
    # Worker 1 replied last to the first step; worker 0, alone, to the second.
    assert [record.critical_path.section(worker)["last_to_reply"] for worker in (0, 1)] == [1, 1]


def test_steps_are_matched_only_up_to_where_every_worker_has_shipped(record):
    step(record, 0.0, 1.0, 2.0)
    step(record, 3.0, 4.0, 5.0)
    record.add_timers(0, shipment([1.5]))
    record.add_timers(1, shipment([1.6]))
    record.match_steps(up_to=2.0)
    assert record.critical_path.section(0)["vector_steps"] == 1
    record.add_timers(0, shipment([4.5]))
    record.add_timers(1, shipment([4.4]))
    record.match_steps()
    assert record.critical_path.section(1)["vector_steps"] == 2


def test_shipments_merge_into_the_workers_entries_and_goodbye_completes_the_channel(record):
    record.connected(0, 1234)
    record.add_timers(0, shipment([], steps=3))
    record.said_goodbye(0)
    entries = {entry["worker_id"]: entry for entry in record.merger.worker_entries()}
    assert entries[0]["children"][0]["count"] == 3
    assert entries[0]["channel"] == COMPLETE
    assert entries[1]["channel"] == NEVER_CONNECTED


def test_a_malformed_shipment_is_refused_and_the_dump_says_what_was_lost(record):
    record.built = True
    record.connected(0, 1233)
    record.connected(1, 1234)
    with pytest.warns(RuntimeWarning, match="dropped the timers of AsyncVectorEnv worker 1"):
        record.add_timers(1, (("not a payload",), 0.0, 0.0, 0, b"", None, None))
    record.add_timers(0, shipment([], steps=1))
    record.said_goodbye(0)
    assert record.channel[1].startswith("a shipment was refused")
    assert record.lost() == [f"AsyncVectorEnv worker 1: {record.channel[1]}"]


def test_a_goodbye_after_a_refused_shipment_leaves_the_refusal_in_the_dump(record):
    record.connected(0, 1234)
    with pytest.warns(RuntimeWarning):
        record.add_timers(0, (("not a payload",), 0.0, 0.0, 0, b"", None, None))
    record.said_goodbye(0)
    assert record.channel[0].startswith("a shipment was refused")


def test_a_worker_that_opens_an_env_again_after_its_goodbye_owes_timers_until_the_next(record):
    record.connected(0, 1234)
    record.said_goodbye(0)
    record.resumed(0)  # a pool's worker, its next task
    assert record.channel[0] == CUT_SHORT
    record.add_timers(0, shipment([], steps=2))
    record.said_goodbye(0)
    assert record.channel[0] == COMPLETE


def test_a_daemon_left_running_is_named_so_unless_it_said_goodbye():
    timers.reset_timers()
    record = VectorEnvRecord.of_own_processes(timers.get_timer_stack_for_thread(threading.current_thread()))
    record.built = True
    running, finished = record.add_worker(1234), record.add_worker(1235)
    record.add_timers(running, shipment([0.5], steps=1))
    record.said_goodbye(finished)
    record.left_running(running)
    record.left_running(finished)
    assert record.lost() == [f"Process worker {running}: {LEFT_RUNNING} (1 env call arrived)"]


def test_finish_stamps_that_are_not_ascending_are_refused(record):
    with pytest.warns(RuntimeWarning):
        record.add_timers(0, shipment([2.0, 1.0]))
    assert record.refused == 1


def test_the_steps_held_stay_bounded_when_a_worker_never_ships(record):
    record.add_timers(0, shipment([float(step) + 0.5 for step in range(MATCH_EVERY_STEPS)]))
    for step_number in range(MATCH_EVERY_STEPS):
        step(record, float(step_number), float(step_number), float(step_number) + 0.9)
    # Matched as they came, up to worker 0's latest stamp: only the last step is still held.
    assert record.held_steps == 1
    assert record.critical_path.section(0)["vector_steps"] == MATCH_EVERY_STEPS - 1
    assert record.critical_path.section(1)["vector_steps"] == 0  # worker 1 replied to none


def test_each_workers_waits_for_a_core_add_up_in_its_scheduling_entry(record):
    record.add_timers(0, shipment([], waits=(0.25, 1.0, 2.0, 7)))
    record.add_timers(0, shipment([], waits=(0.5, 1.5, 2.0, 3)))
    entries = {entry["worker_id"]: entry for entry in record.merger.worker_entries()}
    assert entries[0]["scheduling"] == {"run_queue_seconds": 0.75, "cpu_seconds": 2.5, "wall_seconds": 4.0,
                                        "involuntary_switches": 10}
    assert "scheduling" not in entries[1]  # it sent no figures (schedstat missing, or nothing shipped)


def test_a_workers_latest_stack_samples_are_its_untimed_samples_entry(record):
    record.add_timers(0, shipment([], untimed=untimed_section(3)))
    record.add_timers(0, shipment([], untimed=untimed_section(8)))  # cumulative: the latest has them all
    entries = {entry["worker_id"]: entry for entry in record.merger.worker_entries()}
    (place,) = entries[0]["untimed_samples"]["places"]
    assert (place["function"], place["samples"]) == ("render", 8)
    assert "untimed_samples" not in entries[1]


@pytest.mark.parametrize("waits, untimed", [((0.1, -1.0, 1.0, 0), None), (None, {"places": "nowhere"})])
def test_malformed_waits_or_stack_samples_refuse_the_shipment(record, waits, untimed):
    record.built = True
    with pytest.warns(RuntimeWarning, match="dropped the timers of AsyncVectorEnv worker 0"):
        record.add_timers(0, shipment([], waits=waits, untimed=untimed))
    assert record.channel[0].startswith("a shipment was refused")


def phased_step(record: VectorEnvRecord, clock, sent: float, waiting: float, end: float) -> None:
    """A step timed as the record's phased block: opened at ``sent``, sending ended at
    ``waiting``, closed at ``end``."""
    clock.time = sent
    block = record.step_block
    block.open()
    clock.time = end
    block.close(waiting, (waiting + end) / 2)


def test_a_phased_steps_runs_are_matched_as_the_windows_of_its_steps(fake_clock):
    timers.reset_timers()
    record = VectorEnvRecord("AsyncVectorEnv", "AsyncVectorEnv", 2, True, timers.get_timer_stack_for_thread(threading.current_thread()))
    record.time_steps_in_phases()
    for window in ((0.0, 1.0, 2.0), (3.0, 4.0, 5.0), (6.0, 7.0, 8.0)):
        phased_step(record, fake_clock, *window)
    assert record.held_steps == 3 and record.vector_steps == 0  # held in the block until it folds
    record.add_timers(0, shipment([1.5, 4.2, 7.9]))
    record.add_timers(1, shipment([1.8, 4.1, 7.0]))
    record.match_steps()
    assert record.vector_steps == 3 and record.held_steps == 0
    first, second = record.critical_path.section(0), record.critical_path.section(1)
    assert (first["vector_steps"], second["vector_steps"]) == (3, 3)
    assert (first["last_to_reply"], second["last_to_reply"]) == (2, 1)
    assert first["wait_as_last_seconds"] == pytest.approx((4.2 - 4.1) + (7.9 - 7.0))
    step_node = timers.get_timer_root().children["vector.step"]
    assert (step_node.count, step_node.total) == (3, 6.0)
    assert [step_node.children[phase].count for phase in STEP_PHASES] == [3, 3, 3]


def test_a_step_timed_with_blocks_after_phased_ones_is_held_after_them(fake_clock):
    timers.reset_timers()
    record = VectorEnvRecord("AsyncVectorEnv", "AsyncVectorEnv", 2, True, timers.get_timer_stack_for_thread(threading.current_thread()))
    record.time_steps_in_phases()
    phased_step(record, fake_clock, 0.0, 1.0, 2.0)
    step(record, 3.0, 4.0, 5.0)  # a companion came: `with` blocks from now on
    record.add_timers(0, shipment([1.5, 4.5]))
    record.add_timers(1, shipment([1.6, 4.4]))
    record.match_steps(up_to=2.0)  # the phased step first: held in order, it is matched alone
    assert record.critical_path.section(0)["vector_steps"] == 1 and record.held_steps == 1
    record.match_steps()
    assert [record.critical_path.section(worker)["last_to_reply"] for worker in (0, 1)] == [1, 1]
