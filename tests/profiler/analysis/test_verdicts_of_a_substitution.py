"""Specification: a ``transport_bound`` verdict on a run whose SyncVectorEnv ``--vector-env``
replaced says that the pipe it blames is the substitution's, not the program's."""

from __future__ import annotations

import pytest
from run_files import write_vector_run

from profiler import load_timing_tree
from profiler.analysis.verdicts import TRANSPORT_BOUND, judge_run


def transport_verdict(tmp_path, fake_clock, substituted: str | None):
    tree = load_timing_tree(write_vector_run(
        tmp_path / "run.json", fake_clock, measured=True, worker_step_seconds=(0.0005, 0.0005),
        latency_seconds=0.002, cores=2, busy_processes=3))
    if substituted is not None:
        tree["metadata"]["vector_env_substitution"] = substituted
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
