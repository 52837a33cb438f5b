"""Specification: a ``transport_bound`` verdict names whose pipe it blames. On a run whose
SyncVectorEnv ``--vector-env`` replaced, the substitution's; on a program's own vector env timed in
place, that class's, with advice in its terms (no options it does not have)."""

from __future__ import annotations

import pytest
from run_files import write_vector_run

from profiler import load_timing_tree
from profiler.analysis.verdicts import TRANSPORT_BOUND, judge_run


def transport_verdict(tmp_path, fake_clock, substituted: str | None, in_place: str | None = None,
                      shared_memory: str | None = None):
    tree = load_timing_tree(write_vector_run(
        tmp_path / "run.json", fake_clock, measured=True, worker_step_seconds=(0.0005, 0.0005),
        latency_seconds=0.002, cores=2, busy_processes=3))
    if substituted is not None:
        tree["metadata"]["vector_env_substitution"] = substituted
    if in_place is not None:
        tree["metadata"]["vector_envs_in_place"] = in_place
    if shared_memory is not None:
        tree["metadata"]["shared_memory"] = shared_memory
    (verdict,) = judge_run(tree).of_kind(TRANSPORT_BOUND)
    return verdict


@pytest.mark.parametrize("substituted", ["SyncVectorEnv", "AsyncVectorEnv, SyncVectorEnv"])
def test_a_replaced_sync_vector_envs_pipe_is_said_to_be_the_substitutions(tmp_path, fake_clock, substituted):
    verdict = transport_verdict(tmp_path, fake_clock, substituted)
    assert verdict.title.startswith("this pipe is rlprof's substitution's, not your program's")
    assert verdict.evidence["transport"] == "rlprof's substitution (--vector-env replaced SyncVectorEnv)"


@pytest.mark.parametrize("substituted", [None, "AsyncVectorEnv"])
def test_a_pipe_the_program_had_is_not_said_to_be_rlprofs(tmp_path, fake_clock, substituted):
    verdict = transport_verdict(tmp_path, fake_clock, substituted)
    assert "substitution" not in verdict.title


def test_an_sb3_subproc_vec_envs_pipe_is_advised_in_its_own_terms(tmp_path, fake_clock):
    verdict = transport_verdict(tmp_path, fake_clock, None, in_place="SubprocVecEnv")
    assert "the pipe is SubprocVecEnv's own" in verdict.suggestion
    assert "DummyVecEnv" in verdict.suggestion
    assert "shared_memory" not in verdict.suggestion and "envs_per_worker=2" not in verdict.suggestion


def test_an_async_vector_envs_pipe_keeps_its_shared_memory_advice(tmp_path, fake_clock):
    verdict = transport_verdict(tmp_path, fake_clock, None, in_place="AsyncVectorEnv")
    assert "the pipe is AsyncVectorEnv's own" in verdict.suggestion
    assert "shared_memory=True" in verdict.suggestion


def test_an_async_vector_env_with_shared_memory_on_is_not_told_to_turn_it_on(tmp_path, fake_clock):
    verdict = transport_verdict(tmp_path, fake_clock, None, in_place="AsyncVectorEnv", shared_memory="True")
    assert "the pipe is AsyncVectorEnv's own" in verdict.suggestion
    assert "shared_memory" not in verdict.suggestion


def test_an_async_vector_env_with_shared_memory_off_is_told_to_turn_it_on(tmp_path, fake_clock):
    verdict = transport_verdict(tmp_path, fake_clock, None, in_place="AsyncVectorEnv", shared_memory="False")
    assert "shared_memory=True (array observations then skip the pipe)" in verdict.suggestion
