"""Specification: a vector step whose envs ran in the trainer's process (a SyncVectorEnv or SB3's
DummyVecEnv as ``rlprof run`` times them) is env compute in the trainer and other work, not a
wait or a transport it never had; one that ran in another thread of it (a collector thread) is
said to have run there, beside the main thread; one inside an evaluation is the evaluation's."""

from __future__ import annotations

import json
import threading

import pytest

from profiler import hierarchical_timer, load_timing_tree
from profiler.analysis.analyze import analyze_run, render_analysis
from profiler.analysis.step_time import ENV_COMPUTE, ENV_COMPUTE_IN_TRAINER, step_breakdowns, steps_in_threads
from profiler.tree.timer_json import write_timing_tree
from profiler.tree.timer_tree import get_timer_tree


def test_envs_stepped_in_the_trainer_are_its_env_compute_and_the_rest_other_work(fake_clock):
    for _ in range(10):
        with hierarchical_timer("vector.step"):
            for _ in range(4):
                with hierarchical_timer("env.step"):
                    fake_clock.advance(0.001)
            fake_clock.advance(0.002)  # stacking observations, autoreset bookkeeping
    (step,) = step_breakdowns(get_timer_tree())
    parts = {part.label: part.seconds for part in step.parts}
    assert parts == pytest.approx({ENV_COMPUTE_IN_TRAINER: 0.040, "other trainer work in the step": 0.020})
    assert ENV_COMPUTE not in parts  # no worker's compute: no worker verdicts
    assert "ran in the trainer's process" in step.notes[0]


def test_a_natively_vectorized_step_is_env_compute_in_the_trainer_in_one_call(fake_clock):
    for _ in range(10):
        with hierarchical_timer("vector.step"):
            with hierarchical_timer("env.step (vectorized)"):
                fake_clock.advance(0.003)
            fake_clock.advance(0.001)
    (step,) = step_breakdowns(get_timer_tree())
    parts = {part.label: part.seconds for part in step.parts}
    assert parts == pytest.approx({ENV_COMPUTE_IN_TRAINER: 0.030, "other trainer work in the step": 0.010})
    assert "all in one call (a natively vectorized env)" in step.notes[0]
    assert "one after another" not in step.notes[0]


def test_the_vector_steps_of_an_evaluation_are_left_out_of_the_training_loops_breakdown(fake_clock):
    for _ in range(2):
        with hierarchical_timer("collect_rollouts"):
            for _ in range(10):
                with hierarchical_timer("vector.step"):
                    with hierarchical_timer("env.step"):
                        fake_clock.advance(0.001)
            with hierarchical_timer("evaluate_policy"):  # SB3's EvalCallback, inside the rollout
                for _ in range(300):
                    with hierarchical_timer("vector.step"):
                        with hierarchical_timer("env.step"):
                            fake_clock.advance(0.001)
    (step,) = step_breakdowns(get_timer_tree())
    assert (step.calls, step.total) == (20, pytest.approx(0.020))
    assert "the evaluation's 600 vector.step calls (inside evaluate_policy) are left out" in step.notes[0]


def collector_thread_run(fake_clock, folder) -> dict:
    """A trainer that learns in its main thread while a collector thread runs the policy and steps
    the envs: 10 policy calls of 2 ms and 10 vector steps of 10 ms in the thread, one 0.5 s update
    in the main thread."""
    def collect() -> None:
        for _ in range(10):
            with hierarchical_timer("Agent.forward (no grad)"):
                fake_clock.advance(0.002)
            with hierarchical_timer("vector.step"):
                fake_clock.advance(0.010)

    collector = threading.Thread(target=collect, name="collector")
    collector.start()
    collector.join()
    with hierarchical_timer("update"):
        fake_clock.advance(0.5)
    return load_timing_tree(write_timing_tree(folder / "run.json"))


def test_vector_steps_of_a_collector_thread_are_found_beside_the_main_thread(fake_clock, tmp_path):
    (steps,) = steps_in_threads(collector_thread_run(fake_clock, tmp_path))
    assert (steps.thread, steps.block, steps.calls) == ("thread:ended:collector", "vector.step", 10)
    assert steps.seconds == pytest.approx(0.100)


def test_a_run_that_steps_its_envs_only_in_a_thread_is_told_where_they_ran(fake_clock, tmp_path):
    text = render_analysis(analyze_run(collector_thread_run(fake_clock, tmp_path)))
    assert "not a vectorized-env run" not in text
    assert "the vector steps ran in other threads of the trainer's process" in " ".join(text.split())
    assert "environments 0 s 0.0% none in this thread; beside it: vector.step in thread:ended:collector, 10 calls" \
        in " ".join(text.split())


def test_the_json_lists_the_steps_that_ran_in_other_threads(fake_clock, tmp_path):
    document = json.loads(render_analysis(analyze_run(collector_thread_run(fake_clock, tmp_path)), "json"))
    assert document["step_breakdowns"] == []
    assert document["steps_in_threads"] == [
        {"thread": "thread:ended:collector", "block": "vector.step", "calls": 10, "seconds": pytest.approx(0.100)}]
