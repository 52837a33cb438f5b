"""Whom each vector step waited for last, and what that worker alone cost the step."""

from __future__ import annotations

import multiprocessing
import threading
import time

import numpy as np
import pytest
from envmanager_testenvs import CountingEnv, JitteryEnv, SuicidalEnv

import profiler
from envmanager import SubprocessEnvManager
from envmanager.measurement.critical_path import WAIT_BOUNDS_SECONDS, CriticalPath, stamps_within
from profiler import get_timer_tree
from profiler.recording import events
from profiler.timing import timers

STEPS = 40


def new_path(workers: int) -> CriticalPath:
    return CriticalPath(workers, timers.get_timer_stack_for_thread(threading.current_thread()))


def moments(clock, *gaps: float) -> list[float]:
    """Readings of ``clock``, each taken after advancing it by the next gap."""
    readings = []
    for gap in gaps:
        clock.advance(gap)
        readings.append(clock())
    return readings


# --- the bookkeeping, on a fake clock -----------------------------------------------------------


def test_the_last_reply_is_charged_the_wait_after_the_second_to_last(fake_clock):
    path = new_path(3)
    waiting_since, first, second, last = moments(fake_clock, 0.0, 0.001, 0.002, 0.005)
    path.record_step([second, last, first], waiting_since)
    assert path.vector_steps == [1, 1, 1]
    assert path.last_to_reply == [0, 1, 0]
    assert path.wait_as_last[1] == pytest.approx(0.005)
    assert path.wait_as_last[0] == path.wait_as_last[2] == 0.0


def test_replies_ready_before_the_trainer_waited_cost_only_the_wait_after_it_began(fake_clock):
    path = new_path(2)
    early, waiting_since, last = moments(fake_clock, 0.0, 0.003, 0.002)
    path.record_step([early, last], waiting_since)
    assert path.wait_as_last[1] == pytest.approx(0.002)


def test_a_step_whose_replies_were_all_ready_before_the_wait_costs_nothing_but_still_has_a_last(fake_clock):
    path = new_path(2)
    first, last, waiting_since = moments(fake_clock, 0.0, 0.001, 0.010)
    path.record_step([last, first], waiting_since)
    assert path.last_to_reply == [1, 0]
    assert path.wait_as_last == [0.0, 0.0]
    assert path.histograms[0][0] == 1


def test_a_single_worker_is_last_every_step_and_costs_the_whole_wait(fake_clock):
    path = new_path(1)
    waiting_since, reply = moments(fake_clock, 0.0, 0.004)
    path.record_step([reply], waiting_since)
    assert path.last_to_reply == [1]
    assert path.wait_as_last[0] == pytest.approx(0.004)


def test_a_worker_without_a_reply_is_not_counted_in_the_step(fake_clock):
    path = new_path(3)
    waiting_since, first, last = moments(fake_clock, 0.0, 0.001, 0.002)
    path.record_step([first, None, last], waiting_since)
    assert path.vector_steps == [1, 0, 1]
    assert path.last_to_reply == [0, 0, 1]
    assert path.wait_as_last[2] == pytest.approx(0.002)


def test_a_step_without_any_reply_counts_nothing():
    path = new_path(2)
    path.record_step([None, None], 0.0)
    assert path.vector_steps == [0, 0]
    assert path.last_to_reply == [0, 0]


@pytest.mark.parametrize(
    "wait, bucket",
    [(0.0, 0), (9e-6, 0), (1e-5, 1), (5e-4, 4), (0.0999, 8), (0.1, 9), (3.0, 12), (60.0, 12)],
)
def test_the_extra_wait_lands_in_the_histogram_bucket_whose_bounds_hold_it(wait, bucket):
    path = new_path(2)
    path.record_step([-1.0, wait], 0.0)
    assert path.histograms[1][bucket] == 1
    assert sum(path.histograms[1]) == 1
    assert len(path.histograms[1]) == len(WAIT_BOUNDS_SECONDS) + 1


def test_the_section_is_the_documented_json_shape():
    path = new_path(2)
    path.record_step([0.0, 0.002], 0.0)
    assert path.section(1) == {
        "vector_steps": 1,
        "last_to_reply": 1,
        "wait_as_last_seconds": 0.002,
        "wait_as_last_histogram": {
            "bounds_seconds": list(WAIT_BOUNDS_SECONDS),
            "counts": [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0],
        },
    }
    assert path.section(0)["last_to_reply"] == 0
    assert path.section(2) is None


def test_clear_forgets_every_step():
    path = new_path(2)
    path.record_step([0.0, 0.002], 0.0)
    path.clear()
    assert path.section(1)["vector_steps"] == 0
    assert path.section(1)["wait_as_last_seconds"] == 0.0
    assert sum(path.section(1)["wait_as_last_histogram"]["counts"]) == 0


def test_while_recording_each_step_leaves_an_instant_naming_the_last_worker_and_its_wait(fake_clock):
    events.start_recording()
    try:
        timers.reset_timers()
        path = new_path(2)
        path.record_step([1000.001, 1000.004], 1000.0)
    finally:
        events.stop_recording()
    timeline = path.timer_stack.timeline
    assert list(timeline.instants) == [("env_manager.last_to_reply: worker 1", 1000.004)]
    assert list(timeline.counters) == [("env_manager.wait_as_last", 1000.004, pytest.approx(0.003))]


def test_without_recording_a_step_leaves_no_event():
    path = new_path(2)
    path.record_step([0.001, 0.004], 0.0)
    timeline = path.timer_stack.timeline
    assert timeline is None or not timeline.instants


def test_stamps_within_a_round_trip_prove_a_shared_clock():
    assert stamps_within([1.0, None, 2.0], 1.0, 2.0)
    assert not stamps_within([1.0, 2.5], 1.0, 2.0)
    assert not stamps_within([0.5], 1.0, 2.0)


# --- the clock the stamps rely on --------------------------------------------------------------


def _send_perf_counter(connection) -> None:
    connection.send(time.perf_counter())
    connection.close()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_child_process_reads_the_same_perf_counter_clock_as_its_parent(method):
    context = multiprocessing.get_context(method)
    parent_end, child_end = context.Pipe()
    before = time.perf_counter()
    child = context.Process(target=_send_perf_counter, args=(child_end,))
    child.start()
    child_end.close()
    assert parent_end.poll(60), "the child never answered"
    stamp = parent_end.recv()
    after = time.perf_counter()
    child.join(60)
    assert before <= stamp <= after


# --- real managers -----------------------------------------------------------------------------


def run_steps(envs: SubprocessEnvManager, steps: int, directory) -> list[dict]:
    """Reset, step ``steps`` times, and return the ``workers`` section of a dump made now."""
    envs.reset(seed=0)
    actions = np.zeros(envs.num_envs, dtype=np.int64)
    for _ in range(steps):
        envs.step(actions)
    return profiler.load_timing_tree(envs.dump_timers(directory)).get("workers", [])


def planted_slow_worker_envs(**options) -> SubprocessEnvManager:
    """Four workers; the env of worker 2 sleeps 6x longer per step than the others (10 ms more:
    a margin no wake-up latency of a loaded machine reaches often)."""
    fast, slow = (lambda: CountingEnv(episode_length=1000, delay=0.002)), (
        lambda: CountingEnv(episode_length=1000, delay=0.012)
    )
    return SubprocessEnvManager([fast, fast, slow, fast], context="fork", **options)


def test_a_planted_slow_worker_is_last_in_nearly_every_step_and_owns_most_of_the_extra_wait(tmp_path):
    with planted_slow_worker_envs() as envs:
        workers = run_steps(envs, STEPS, tmp_path)
    paths = [worker["critical_path"] for worker in workers]
    assert [path["vector_steps"] for path in paths] == [STEPS] * 4
    assert sum(path["last_to_reply"] for path in paths) == STEPS
    assert paths[2]["last_to_reply"] >= 0.9 * STEPS
    total_wait = sum(path["wait_as_last_seconds"] for path in paths)
    assert paths[2]["wait_as_last_seconds"] >= 0.8 * total_wait
    # It alone held each step for about the 10 ms it sleeps longer than the others.
    assert paths[2]["wait_as_last_seconds"] >= STEPS * 0.9 * 0.005


def test_the_slow_worker_is_found_from_the_trainers_view_when_worker_clocks_cannot_be_trusted(tmp_path):
    with planted_slow_worker_envs() as envs:
        envs._pool.worker_clock_shared = False
        workers = run_steps(envs, STEPS, tmp_path)
    paths = [worker["critical_path"] for worker in workers]
    assert sum(path["last_to_reply"] for path in paths) == STEPS
    assert paths[2]["last_to_reply"] >= 0.9 * STEPS


def test_identical_envs_take_turns_at_being_last(tmp_path):
    with SubprocessEnvManager([lambda: JitteryEnv(0.004)] * 4, context="fork") as envs:
        workers = run_steps(envs, 60, tmp_path)
    last = [worker["critical_path"]["last_to_reply"] for worker in workers]
    assert sum(last) == 60
    assert all(count > 0 for count in last), last


def test_the_workers_of_a_manager_share_one_clock_with_the_trainer():
    with SubprocessEnvManager([lambda: CountingEnv()] * 2, context="spawn") as envs:
        assert envs._pool.worker_clock_shared


def test_the_critical_path_is_in_the_dumped_workers_section(tmp_path):
    with planted_slow_worker_envs(summaries_dir=tmp_path, run_id="run") as envs:
        run_steps(envs, 5, tmp_path)
    tree = profiler.load_timing_tree(tmp_path / "run_timers.json")
    assert [worker["critical_path"]["vector_steps"] for worker in tree["workers"]] == [5] * 4


def test_resetting_the_timers_forgets_the_steps_counted_before(tmp_path):
    with planted_slow_worker_envs() as envs:
        run_steps(envs, 5, tmp_path)
        profiler.reset_timers()
        workers = run_steps(envs, 3, tmp_path)
    assert [worker["critical_path"]["vector_steps"] for worker in workers] == [3] * 4


def test_with_profiling_off_nothing_is_counted(tmp_path):
    with SubprocessEnvManager([lambda: CountingEnv()] * 2, context="fork", profiling=False) as envs:
        run_steps(envs, 3, tmp_path)
    assert "workers" not in get_timer_tree()


def test_while_recording_the_dumped_timeline_names_the_last_worker_of_each_step(tmp_path):
    events.start_recording()
    try:
        timers.reset_timers()
        with planted_slow_worker_envs() as envs:
            run_steps(envs, 10, tmp_path)
            tree = get_timer_tree()
    finally:
        events.stop_recording()
        events.clear_recording()
    trainer = tree["timeline"]["processes"][0]
    instants = [name for thread in trainer["threads"] for name, _ in thread["instants"]]
    last_names = [name for name in instants if name.startswith("env_manager.last_to_reply")]
    assert len(last_names) == 10
    # The timeline names, step by step, the same last workers the counters add up (who was last
    # is the machine's business; that both records agree is the timeline's).
    for worker in tree["workers"]:
        named = last_names.count(f"env_manager.last_to_reply: worker {worker['worker_id']}")
        assert named == worker["critical_path"]["last_to_reply"]
    waits = [counter for counter in trainer["counters"] if counter[0] == "env_manager.wait_as_last"]
    assert len(waits) == 10


def test_a_step_in_which_a_worker_died_and_was_restarted_still_has_one_last_reply(tmp_path):
    steps = 8
    with SubprocessEnvManager(
        [lambda: SuicidalEnv(episode_length=1000)] * 3, context="fork", restart_on_failure=True
    ) as envs:
        envs.reset(seed=0)
        with pytest.warns(RuntimeWarning, match="restarting"):
            for step in range(steps):
                envs.step(np.array([0, 2 if step == 4 else 0, 0]))
        workers = profiler.load_timing_tree(envs.dump_timers(tmp_path))["workers"]
    paths = [worker["critical_path"] for worker in workers]
    assert sum(path["last_to_reply"] for path in paths) == steps
    assert [path["vector_steps"] for path in paths] == [steps] * 3


# --- steps counted in bulk ------------------------------------------------------------------------


def figures(path: CriticalPath) -> tuple:
    return path.vector_steps, path.last_to_reply, path.wait_as_last, path.histograms


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_steps_counted_in_bulk_give_the_figures_of_steps_counted_one_by_one(workers):
    generator = np.random.default_rng(workers)
    steps = []
    for _ in range(300):
        waiting_since = 1000.0 + generator.uniform(0.0, 0.01)
        replies = 1000.0 + generator.choice([0.0, 0.002, 0.004], size=workers) + generator.uniform(0.0, 0.01, workers)
        steps.append([waiting_since, *replies.tolist()])
    steps.append([1000.0, *[1000.001] * workers])  # a tie: the first worker counts as last
    one_by_one, in_bulk = new_path(workers), new_path(workers)
    for waiting_since, *ready_at in steps:
        one_by_one.record_step(ready_at, waiting_since)
    in_bulk.count_steps(np.array(steps, dtype=np.float64))
    expected_steps, expected_last, expected_wait, expected_histograms = figures(one_by_one)
    steps_counted, last, wait, histograms = figures(in_bulk)
    assert (steps_counted, last, histograms) == (expected_steps, expected_last, expected_histograms)
    assert wait == pytest.approx(expected_wait)


def test_steps_some_worker_did_not_reply_in_are_counted_in_bulk_as_one_by_one():
    steps = [[1000.0, 1000.002, None, 1000.001], [1000.0, 1000.001, 1000.003, 1000.002], [1000.0, None, None, None]]
    one_by_one, in_bulk = new_path(3), new_path(3)
    for waiting_since, *ready_at in steps:
        one_by_one.record_step(ready_at, waiting_since)
    in_bulk.count_steps(np.array(steps, dtype=object))
    assert figures(in_bulk)[:2] == figures(one_by_one)[:2] == ([2, 1, 2], [1, 1, 0])
    assert in_bulk.wait_as_last == pytest.approx(one_by_one.wait_as_last)


def test_steps_counted_in_bulk_leave_no_marks_on_a_timeline_recorded_since():
    path = new_path(2)
    events.start_recording()
    try:
        path.count_steps(np.array([[1000.0, 1000.001, 1000.002]]))
        path.count_steps(np.array([[1000.0, 1000.001, None]], dtype=object))
        timeline = timers.get_timer_stack_for_thread(threading.current_thread()).timeline
        assert not timeline.instants and not timeline.counters
    finally:
        events.stop_recording()
        events.clear_recording()
    assert path.last_to_reply == [1, 1]


def test_steps_counted_before_a_reset_of_the_timers_are_forgotten_by_the_next_read():
    path = new_path(2)
    path.count_steps(np.array([[1000.0, 1000.001, 1000.002]]))
    timers.reset_timers()
    assert path.section(0)["vector_steps"] == 0


@pytest.mark.parametrize("missing", [False, True], ids=["every-reply", "some-missing"])
@pytest.mark.parametrize("workers", [1, 2, 5])
def test_steps_counted_and_marked_in_bulk_leave_the_marks_of_steps_counted_one_by_one(workers, missing, recording):
    generator = np.random.default_rng(workers)
    steps = []
    for index in range(200):
        waiting_since = 1000.0 + generator.uniform(0.0, 0.01)
        replies = (1000.0 + generator.choice([0.0, 0.002], size=workers) + generator.uniform(0.0, 0.01, workers)).tolist()
        if missing and index % 7 == 0:
            replies[int(generator.integers(workers))] = None  # a worker that did not reply
        steps.append([waiting_since, *replies])
    steps.append([1000.0, *[1000.001] * workers])  # a tie: the first worker counts as last
    timeline = timers.get_timer_stack_for_thread(threading.current_thread()).timeline
    one_by_one, in_bulk = new_path(workers), new_path(workers)
    for waiting_since, *ready_at in steps:
        one_by_one.record_step(ready_at, waiting_since)
    expected = (list(timeline.instants), list(timeline.counters))
    events.clear_recording()
    timeline = timers.get_timer_stack_for_thread(threading.current_thread()).timeline
    in_bulk.count_steps_and_mark(np.array(steps, dtype=object if missing else np.float64))
    assert (list(timeline.instants), list(timeline.counters)) == expected
    assert len(expected[0]) == sum(any(at is not None for at in ready_at) for _, *ready_at in steps)
    assert figures(in_bulk)[:2] == figures(one_by_one)[:2]
