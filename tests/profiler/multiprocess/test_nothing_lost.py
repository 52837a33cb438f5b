"""The invariant, with real processes and pipes: every block a worker ran is merged exactly once.

Workers run a plain loop (no env manager): time some blocks, let a WorkerTimers decide when to
flush, send payloads over a multiprocessing Pipe, and send a final payload before exiting.
"""

from __future__ import annotations

import math
import multiprocessing
from multiprocessing.connection import Connection, wait

import numpy as np
import pytest

from profiler import get_timer_tree, hierarchical_timer, load_timing_tree, set_gauge, write_timing_tree
from profiler.multiprocess.merge import TimerMerger
from profiler.multiprocess.payload import WorkerTimers
from profiler.timing.timers import FOLDED_BLOCK_NAME, MAX_DEPTH
from tree_paths import find

RECEIVE_TIMEOUT = 60.0


def steps_of(worker_id: int) -> int:
    """Workers run different numbers of steps, so a count from the wrong worker would show."""
    return 20 + 3 * worker_id


def resets_in(steps: int) -> int:
    return len(range(0, steps, 3))


def run_worker(connection: Connection, worker_id: int, flush_every: int, stop_after: int | None) -> None:
    """A worker loop. With ``stop_after``, it reports ``"stuck"`` after that many steps and hangs,
    waiting to be killed with whatever it has not flushed."""
    reporter = WorkerTimers(flush_every=flush_every)
    steps = steps_of(worker_id) if stop_after is None else stop_after
    for step in range(steps):
        with hierarchical_timer("env.step"):
            with hierarchical_timer("env.physics"):
                pass
        if step % 3 == 0:
            with hierarchical_timer("env.reset"):
                pass
        payload = reporter.step_done()
        if payload is not None:
            connection.send(("payload", payload))
    if stop_after is not None:
        connection.send(("stuck", None))
        connection.recv()  # never answered
    connection.send(("final", reporter.final_payload()))
    connection.close()


def start_workers(method: str, workers: int, flush_every: int, stop_after: int | None = None):
    context = multiprocessing.get_context(method)
    processes, connections = [], {}
    for worker_id in range(workers):
        trainer_end, worker_end = context.Pipe()
        process = context.Process(
            target=run_worker, args=(worker_end, worker_id, flush_every, stop_after), daemon=True
        )
        process.start()
        worker_end.close()
        processes.append(process)
        connections[trainer_end] = worker_id
    return processes, connections


def receive_all(connections: dict, on_message) -> None:
    """Hand every message to ``on_message(worker_id, kind, payload)`` until each worker is done."""
    pending = dict(connections)
    while pending:
        ready = wait(list(pending), timeout=RECEIVE_TIMEOUT)
        assert ready, "a worker went silent"
        for connection in ready:
            kind, payload = connection.recv()
            on_message(pending[connection], kind, payload)
            if kind in ("final", "stuck"):
                del pending[connection]


def run_and_merge(method: str, workers: int, flush_every: int) -> dict:
    merger = TimerMerger()
    processes, connections = start_workers(method, workers, flush_every)
    with hierarchical_timer("collect"):
        receive_all(connections, lambda worker_id, _, payload: merger.merge_payload(worker_id, payload))
    for process in processes:
        process.join(timeout=RECEIVE_TIMEOUT)
    return get_timer_tree()


CASES = [
    *[("fork", workers, flush_every) for workers in (1, 4, 16) for flush_every in (1, 7, 1000)],
    ("spawn", 1, 1000),
    ("spawn", 4, 7),
]


@pytest.mark.parametrize("method, workers, flush_every", CASES)
def test_merged_counts_equal_what_the_workers_ran(method, workers, flush_every):
    tree = run_and_merge(method, workers, flush_every)
    steps = [steps_of(worker_id) for worker_id in range(workers)]
    collect = find(tree, "collect")
    assert find(collect, "env.step")["count"] == sum(steps)
    assert find(collect, "env.step", "env.physics")["count"] == sum(steps)
    assert find(collect, "env.reset")["count"] == sum(resets_in(count) for count in steps)


@pytest.mark.parametrize("method, workers, flush_every", [("fork", 16, 7)])
def test_per_worker_counts_sum_to_the_merged_count(method, workers, flush_every):
    tree = run_and_merge(method, workers, flush_every)
    per_worker = {entry["worker_id"]: find(entry, "env.step")["count"] for entry in tree["workers"]}
    assert per_worker == {worker_id: steps_of(worker_id) for worker_id in range(workers)}
    assert sum(per_worker.values()) == find(tree, "collect", "env.step")["count"]
    assert all(entry["missed_payloads"] == 0 for entry in tree["workers"])


def test_a_payload_received_twice_is_merged_once():
    merger = TimerMerger()
    processes, connections = start_workers("fork", 2, 5)

    def merge_twice(worker_id, _, payload):
        merger.merge_payload(worker_id, payload)
        merger.merge_payload(worker_id, payload)

    receive_all(connections, merge_twice)
    for process in processes:
        process.join(timeout=RECEIVE_TIMEOUT)
    tree = get_timer_tree()
    assert find(tree, "env.step")["count"] == steps_of(0) + steps_of(1)
    assert [entry["duplicates"] for entry in tree["workers"]] == [entry["payloads"] for entry in tree["workers"]]


def test_a_killed_worker_loses_at_most_its_unflushed_interval(tmp_path):
    flush_every, ran_before_kill = 5, 23
    merger = TimerMerger()
    processes, connections = start_workers("fork", 1, flush_every, stop_after=ran_before_kill)
    receive_all(
        connections,
        lambda worker_id, kind, payload: kind == "payload" and merger.merge_payload(worker_id, payload),
    )
    processes[0].kill()
    processes[0].join(timeout=RECEIVE_TIMEOUT)
    path = write_timing_tree(tmp_path / "run_timers.json")
    dumped = load_timing_tree(path)
    merged = find(dumped, "env.step")["count"]
    assert merged == 20  # the four flushes before the kill
    assert ran_before_kill - merged < flush_every
    assert find(dumped["workers"][0], "env.step")["count"] == merged


# --- whatever the gauge type ----------------------------------------------------------------------


def merge_one_worker(target, *arguments) -> None:
    """Fork one worker running ``target(connection, *arguments)``; merge what it sends under
    ``collect`` until it is done."""
    merger = TimerMerger()
    context = multiprocessing.get_context("fork")
    trainer_end, worker_end = context.Pipe()
    process = context.Process(target=target, args=(worker_end, *arguments), daemon=True)
    process.start()
    worker_end.close()
    with hierarchical_timer("collect"):
        receive_all({trainer_end: 0}, lambda worker_id, _, payload: merger.merge_payload(worker_id, payload))
    process.join(timeout=RECEIVE_TIMEOUT)


def run_gauge_worker(connection: Connection, reading: object, steps: int) -> None:
    """A worker whose env code sets a gauge from whatever its libraries return."""
    reporter = WorkerTimers(flush_every=3)
    for _ in range(steps):
        with hierarchical_timer("env.step"):
            set_gauge("reward", reading)
        payload = reporter.step_done()
        if payload is not None:
            connection.send(("payload", payload))
    connection.send(("final", reporter.final_payload()))
    connection.close()


@pytest.mark.parametrize(
    "reading",
    [np.float64(1.5), np.float32(1.5), np.array(1.5), np.int64(3), float("nan"), float("inf")],
    ids=["float64", "float32", "0-d array", "int64", "nan", "inf"],
)
def test_a_worker_gauge_of_any_real_type_costs_no_step_count(tmp_path, reading):
    steps = 10
    merge_one_worker(run_gauge_worker, reading, steps)
    dumped = load_timing_tree(write_timing_tree(tmp_path / "run_timers.json"))
    assert find(dumped, "collect", "env.step")["count"] == steps
    gauge = dumped["workers"][0]["gauges"]["reward"]
    assert gauge["count"] == steps
    assert gauge["value"] == float(reading) or math.isnan(gauge["value"]) and math.isnan(float(reading))


# --- blocks nested deeper than a payload may carry -------------------------------------------------


def nest(levels: int) -> None:
    with hierarchical_timer("search"):
        if levels > 1:
            nest(levels - 1)


def run_deep_worker(connection: Connection, steps: int, levels: int) -> None:
    """A worker whose env step recurses through more timed levels than a payload may nest."""
    reporter = WorkerTimers(flush_every=10)
    for _ in range(steps):
        with hierarchical_timer("env.step"):
            nest(levels)
        payload = reporter.step_done()
        if payload is not None:
            connection.send(("payload", payload))
    connection.send(("final", reporter.final_payload()))
    connection.close()


def test_a_worker_nesting_deeper_than_the_payload_limit_loses_no_step():
    steps = 100
    merge_one_worker(run_deep_worker, steps, MAX_DEPTH + 20)
    tree = get_timer_tree()
    assert find(tree, "collect", "env.step")["count"] == steps
    node = find(tree["workers"][0], "env.step")
    for _ in range(MAX_DEPTH - 2):
        (node,) = node["children"]
        assert (node["name"], node["count"]) == ("search", steps)
    (folded,) = node["children"]
    assert (folded["name"], folded["count"]) == (FOLDED_BLOCK_NAME, steps)


def run_worker_with_a_late_block(connection: Connection) -> None:
    """Steps whose ``env.render`` block is first entered after four flushes, then every step."""
    reporter = WorkerTimers(flush_every=2)
    for step in range(20):
        with hierarchical_timer("env.step"):
            if step >= 9:
                with hierarchical_timer("env.render"):
                    pass
        payload = reporter.step_done()
        if payload is not None:
            connection.send(("payload", payload))
    connection.send(("final", reporter.final_payload()))
    connection.close()


def test_a_block_first_entered_late_in_a_real_worker_is_merged_with_every_call():
    context = multiprocessing.get_context("fork")
    merger, processes, connections = TimerMerger(), [], {}
    for worker_id in range(3):
        trainer_end, worker_end = context.Pipe()
        process = context.Process(target=run_worker_with_a_late_block, args=(worker_end,), daemon=True)
        process.start()
        worker_end.close()
        processes.append(process)
        connections[trainer_end] = worker_id
    receive_all(connections, lambda worker_id, _, payload: merger.merge_payload(worker_id, payload))
    for process in processes:
        process.join(timeout=RECEIVE_TIMEOUT)
    tree = get_timer_tree()
    assert find(tree, "env.step")["count"] == 3 * 20
    assert find(tree, "env.step", "env.render")["count"] == 3 * 11
    assert [entry["payloads"] for entry in tree["workers"]] == [11, 11, 11]
