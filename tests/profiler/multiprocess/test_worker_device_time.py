"""Specification of device time from env workers: a worker's device blocks travel in its payloads
(``device_time``, payload version 5) and the trainer's dump lists them, labelled with the worker,
beside their host time. The GPU is a fake event backend standing in for CUDA."""

from __future__ import annotations

from typing import Iterator

import pytest
from fake_device import FakeDevice, fake_gpu
from hand_payloads import tree_payload

from profiler import TimerMerger, get_timer_tree, hierarchical_timer
from profiler.multiprocess.payload import PayloadError, WorkerTimers, snapshot_and_flush, validate_payload
from profiler.timing.timers import TimerStack


@pytest.fixture
def gpu() -> Iterator[FakeDevice]:
    with fake_gpu() as fake:
        yield fake


def test_a_payload_carries_the_device_time_of_the_blocks_since_the_last_flush(gpu):
    stack = TimerStack("worker")
    with hierarchical_timer("env.step", stack, device="cuda"):
        gpu.run_for(0.25)
    gpu.finish_all()
    payload = snapshot_and_flush(stack)
    assert payload[14] == ((("env.step",), "cuda", "events", 0.25, 1, 0.25, 0.25),)


def test_device_time_travels_once(gpu):
    stack = TimerStack("worker")
    with hierarchical_timer("env.step", stack, device="cuda"):
        gpu.run_for(0.25)
    gpu.finish_all()
    snapshot_and_flush(stack)
    assert snapshot_and_flush(stack)[14] is None


def test_a_pair_the_gpu_has_not_finished_travels_in_a_later_payload(gpu):
    stack = TimerStack("worker")
    with hierarchical_timer("env.step", stack, device="cuda"):
        gpu.run_for(0.25)
    first = snapshot_and_flush(stack)
    gpu.finish_all()
    assert (first[14], snapshot_and_flush(stack)[14][0][4]) == (None, 1)


def test_the_final_payload_waits_for_the_pairs_the_gpu_has_not_finished(gpu):
    stack = TimerStack("worker")
    with hierarchical_timer("env.step", stack, device="cuda"):
        gpu.run_for(0.25)
    payload = WorkerTimers(flush_every=1000, timer_stack=stack).final_payload()
    assert payload[14][0][3] == 0.25


def test_the_trainer_lists_a_worker_s_device_blocks_beside_their_host_time():
    merger = TimerMerger()
    try:
        merger.merge_payload(3, tree_payload(("env.step", 0.1, 4, 0, None, ()),
                                             device_time=((("env.step",), "cuda", "events", 0.8, 4, 0.1, 0.3),)))
        merger.merge_payload(3, tree_payload(("env.step", 0.1, 4, 0, None, ()), sequence=2,
                                             device_time=((("env.step",), "cuda", "events", 0.2, 4, 0.05, 0.05),)))
        entries = [entry for entry in get_timer_tree()["device_time"] if entry["process"] == "worker 3"]
    finally:
        merger.detach()
    assert entries == [{"path": ["env.step"], "process": "worker 3", "device": "cuda", "mode": "events",
                        "total": pytest.approx(1.0), "count": 8, "min": 0.05, "max": 0.3,
                        "host_total": pytest.approx(0.2)}]


@pytest.mark.parametrize("device_time, message", [
    ((((), "cuda", "events", 0.1, 1, 0.1, 0.1),), "must name a block"),
    (((("a",), "cuda", "later", 0.1, 1, 0.1, 0.1),), "mode"),
    (((("a",), "cuda", "events", -0.1, 1, 0.1, 0.1),), "total"),
    (((("a",), "cuda", "events", 0.1, 0, 0.1, 0.1),), "count"),
    ("not a list", "device_time"),
])
def test_a_malformed_device_time_field_is_refused_naming_it(device_time, message):
    with pytest.raises(PayloadError, match=message):
        validate_payload(tree_payload(("a", 0.1, 1, 0, None, ()), device_time=device_time))
