"""Specification of advice that fits the run: verdicts read the run's real settings from the dump's
metadata (see profiler.analysis.run_settings) and name the knob the user has."""

from __future__ import annotations

import pytest
from run_files import write_vector_run

from profiler import load_timing_tree
from profiler.analysis.verdicts import CPU_OVERSUBSCRIPTION, TRANSPORT_BOUND, judge_run


@pytest.fixture
def pipe_bound(tmp_path, fake_clock):
    """``pipe_bound(**metadata)``: the verdicts on a run whose pipe costs more than its envs
    (see test_verdicts.py), with ``metadata`` added to the dump's."""
    def judged(**metadata):
        tree = load_timing_tree(write_vector_run(
            tmp_path / "run.json", fake_clock, measured=True, worker_step_seconds=(0.0005, 0.0005),
            latency_seconds=0.002, cores=2, busy_processes=3))
        tree["metadata"].update({key: str(value) for key, value in metadata.items()})
        return judge_run(tree)
    return judged


def suggestion(verdicts, kind=TRANSPORT_BOUND):
    (verdict,) = verdicts.of_kind(kind)
    return verdict.suggestion


def test_a_run_with_shared_memory_on_is_not_told_to_turn_it_on(pipe_bound):
    advice = suggestion(pipe_bound(env_manager_class="SubprocessEnvManager", shared_memory=True))
    assert "shared_memory" not in advice
    assert "smaller observations" in advice


def test_a_run_under_vector_env_is_told_where_its_shared_memory_argument_is(pipe_bound):
    advice = suggestion(pipe_bound(env_manager_class="SubprocessEnvManager", shared_memory=False,
                                   vector_env_substituted_for="AsyncVectorEnv"))
    assert "shared_memory=True in the program's AsyncVectorEnv(...) call" in advice


def test_a_run_with_shared_memory_off_is_told_to_turn_it_on(pipe_bound):
    advice = suggestion(pipe_bound(env_manager_class="SubprocessEnvManager", shared_memory=False))
    assert "shared_memory=True (array observations then skip the pipe)" in advice
    assert "if it is off" not in advice


def test_a_run_whose_observations_are_a_few_bytes_is_not_told_to_shrink_them_or_share_them(pipe_bound):
    verdicts = pipe_bound(env_manager_class="SubprocessEnvManager", shared_memory=False, observation_bytes=16)
    advice = suggestion(verdicts)
    assert "smaller observations" not in advice and "shared_memory" not in advice
    assert advice.startswith("Cut round trips: ")
    assert "envs_per_worker=2" in advice  # the round trips are what it can cut
    (verdict,) = verdicts.of_kind(TRANSPORT_BOUND)
    assert verdict.evidence["observation_bytes_per_step"] == 16 * verdict.evidence["envs"]


def test_a_run_whose_observations_are_large_is_told_to_shrink_them(pipe_bound):
    advice = suggestion(pipe_bound(env_manager_class="SubprocessEnvManager", shared_memory=True,
                                   observation_bytes=12288))
    assert "smaller observations" in advice


def test_a_file_that_does_not_say_keeps_the_general_advice(pipe_bound):
    assert "shared_memory=True if it is off" in suggestion(pipe_bound())


def test_an_rlprof_run_user_is_given_the_command_line_option(pipe_bound):
    advice = suggestion(pipe_bound(env_manager_class="SubprocessEnvManager", rlprof_run="train.py",
                                   vector_env_substituted_for="AsyncVectorEnv"))
    assert "--envs-per-worker 2" in advice
    assert "envs_per_worker=" not in advice


def test_a_script_building_its_own_manager_under_rlprof_run_is_given_the_argument(pipe_bound):
    advice = suggestion(pipe_bound(env_manager_class="SubprocessEnvManager", rlprof_run="train.py"))
    assert "envs_per_worker=2" in advice and "--envs-per-worker" not in advice


def test_a_user_of_another_vector_env_class_is_spoken_to_in_its_name(pipe_bound):
    advice = suggestion(pipe_bound(env_manager_class="AsyncVectorEnv"))
    assert "AsyncVectorEnv runs one process per env" in advice


def test_the_cpu_verdict_names_the_command_line_option_too(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(
        tmp_path / "run.json", fake_clock, measured=True, worker_step_seconds=(0.004,) * 4,
        cores=2, busy_processes=5))
    tree["metadata"].update(env_manager_class="SubprocessEnvManager", rlprof_run="train.py",
                            vector_env_substituted_for="AsyncVectorEnv")
    assert "--envs-per-worker auto (2 workers for 4 envs" in suggestion(judge_run(tree), CPU_OVERSUBSCRIPTION)


def test_a_run_stepping_its_envs_in_one_process_gets_no_lines_about_workers_it_does_not_have():
    # A vector step timed in the trainer (gymnasium's SyncVectorEnv) with nothing merged under it.
    step = {"name": "vector.step", "total": 2.0, "count": 100, "self": 2.0, "children": []}
    tree = {"name": "root", "total": 10.0, "count": 1, "self": 0.5, "gauges": {},
            "metadata": {"cores_available": "2"},
            "children": [{"name": "train", "total": 9.5, "count": 1, "self": 7.5, "children": [step]}]}
    assert judge_run(tree).cannot_tell == ()


def test_the_straggler_advice_names_the_command_line_option_too(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, measured=True))
    tree["metadata"].update(env_manager_class="SubprocessEnvManager", rlprof_run="train.py",
                            vector_env_substituted_for="AsyncVectorEnv")
    assert "(--envs-per-worker k)" in suggestion(judge_run(tree), "straggler")


def test_an_observation_size_that_is_no_number_keeps_the_general_advice_and_is_said(pipe_bound):
    verdicts = pipe_bound(env_manager_class="SubprocessEnvManager", shared_memory=False, observation_bytes="large")
    assert "smaller observations" in suggestion(verdicts)
    assert "metadata observation_bytes='large' is not a whole number >= 0; ignored" in verdicts.cannot_tell
