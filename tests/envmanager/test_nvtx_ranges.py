"""Env workers open NVTX ranges while the trainer's emit_nvtx is active, and only then."""

from __future__ import annotations

import os

import pytest
from envmanager_testenvs import CountingEnv
from nvtx_calls import RecordedCalls

from envmanager import SubprocessEnvManager
from profiler.recording import events
from profiler.gpu import emit_nvtx


def make_env() -> CountingEnv:
    return CountingEnv(episode_length=100)


def worker_pushes(calls: RecordedCalls) -> list[list]:
    return [call for call in calls.calls() if call[0] == "push" and call[4] != os.getpid()]


@pytest.fixture
def calls(tmp_path) -> RecordedCalls:
    return RecordedCalls(tmp_path / "calls.jsonl")


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_running_workers_open_ranges_from_the_next_request_while_emit_nvtx_is_active(calls, context):
    with SubprocessEnvManager([make_env] * 2, context=context, envs_per_worker=1) as envs:
        envs.reset(seed=0)
        envs.step([0, 0])
        assert worker_pushes(calls) == []
        with emit_nvtx(backend=calls):
            envs.step([0, 0])
        during = worker_pushes(calls)
        envs.step([0, 0])
        assert worker_pushes(calls) == during
    categories = {call[3] for call in during}
    worker_pids = {call[4] for call in during}
    assert len(worker_pids) == 2
    assert categories == {f"worker {index} (pid {pid})" for index, pid in _indexed(during)}
    # Every range a worker opened, it closed.
    for pid in worker_pids:
        pushes = sum(1 for call in calls.calls() if call[0] == "push" and call[-1] == pid)
        pops = sum(1 for call in calls.calls() if call[0] == "pop" and call[-1] == pid)
        assert pushes == pops > 0


def _indexed(pushes: list[list]) -> set[tuple[int, int]]:
    return {(int(call[3].split()[1]), call[4]) for call in pushes}


def test_workers_started_while_emit_nvtx_is_active_open_ranges_from_their_first_reset(calls):
    with emit_nvtx(backend=calls):
        with SubprocessEnvManager([make_env] * 2, context="spawn", envs_per_worker=1) as envs:
            envs.reset(seed=0)
    assert {call[4] for call in worker_pushes(calls)} and len({call[4] for call in worker_pushes(calls)}) == 2


def test_worker_spans_carry_the_seq_of_their_ranges(calls):
    events.start_recording()
    try:
        with SubprocessEnvManager([make_env], context="spawn") as envs:
            envs.reset(seed=0)
            with emit_nvtx(backend=calls):
                envs.step([0])
            tree_path = envs.dump_timers(os.path.dirname(calls.path), "nvtx")
    finally:
        events.stop_recording()
        events.clear_recording()
    import json

    tree = json.loads(tree_path.read_text())
    worker_process = [process for process in tree["timeline"]["processes"] if process["name"] != "trainer"][0]
    labelled = {
        span[0]: span[3]["seq"]
        for thread in worker_process["threads"]
        for span in thread["spans"]
        if len(span) > 3 and "seq" in span[3]
    }
    pushed = {(call[1], call[2]) for call in worker_pushes(calls)}
    assert labelled and set(labelled.items()) <= pushed


def test_a_profiling_free_manager_opens_no_ranges_in_workers(calls):
    with SubprocessEnvManager([make_env], context="fork", profiling=False) as envs:
        envs.reset(seed=0)
        with emit_nvtx(backend=calls):
            envs.step([0])
    assert worker_pushes(calls) == []
