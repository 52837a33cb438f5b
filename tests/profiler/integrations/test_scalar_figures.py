"""Specification of ``profiler.scalars()``: a run's figures as one flat dict, for dashboards."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from run_files import POLICY_SECONDS, STEPS, WORKER_STEP_SECONDS, write_plain_run, write_vector_run

import profiler
from profiler import get_timer_tree, hierarchical_timer, load_timing_tree
from profiler.analysis.verdicts import judge_run
from profiler.integrations.scalar_figures import scalars_of_tree
from profiler.tree.timer_json import normalize_timing_tree


@pytest.fixture
def vector_figures(tmp_path, fake_clock):
    return scalars_of_tree(load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock)))


def test_each_block_has_its_mean_per_call_and_its_share_of_the_wall(tmp_path, fake_clock):
    tree = load_timing_tree(write_plain_run(tmp_path / "run.json", fake_clock))
    figures = scalars_of_tree(tree)
    assert figures["rlprof/wall_seconds"] == 5.25
    assert figures["rlprof/block_mean_seconds/backward"] == 1.0
    assert figures["rlprof/block_wall_share/backward"] == pytest.approx(3.0 / 5.25)
    assert figures["rlprof/block_mean_seconds/eval/forward"] == 0.75


def test_each_worker_has_its_mean_step_time(vector_figures):
    assert {name: value for name, value in vector_figures.items()
            if name.startswith("rlprof/worker_step_seconds/")} == pytest.approx({
        f"rlprof/worker_step_seconds/worker_{index}": seconds
        for index, seconds in enumerate(WORKER_STEP_SECONDS)})


def test_vector_and_env_steps_per_second_count_every_worker(vector_figures):
    wall = vector_figures["rlprof/wall_seconds"]
    assert vector_figures["rlprof/vector_steps_per_second"] == pytest.approx(STEPS / wall)
    assert vector_figures["rlprof/env_steps_per_second"] == pytest.approx(
        STEPS * len(WORKER_STEP_SECONDS) / wall)
    assert vector_figures["rlprof/block_mean_seconds/train/policy.act"] == pytest.approx(POLICY_SECONDS)


def test_a_single_process_run_has_no_worker_or_throughput_figures(tmp_path, fake_clock):
    figures = scalars_of_tree(load_timing_tree(write_plain_run(tmp_path / "run.json", fake_clock)))
    assert not [name for name in figures
                if name.startswith("rlprof/worker_step_seconds/") or name.endswith("_per_second")]


def test_only_the_largest_blocks_are_kept(fake_clock):
    for name, seconds in (("small", 1.0), ("large", 3.0), ("medium", 2.0)):
        with hierarchical_timer(name):
            fake_clock.advance(seconds)
    tree = normalize_timing_tree(get_timer_tree())  # this thread's blocks only
    figures = scalars_of_tree(tree, max_blocks=2)
    assert sorted(name for name in figures if "block_mean" in name) == [
        "rlprof/block_mean_seconds/large", "rlprof/block_mean_seconds/medium"]
    assert len([name for name in scalars_of_tree(tree, max_blocks=None) if "block_mean" in name]) == 3


def test_the_prefix_is_the_callers(tmp_path, fake_clock):
    tree = load_timing_tree(write_plain_run(tmp_path / "run.json", fake_clock))
    assert all(name.startswith("timing.") for name in scalars_of_tree(tree, prefix="timing."))


def test_the_live_timers_give_the_same_figures(fake_clock):
    for _ in range(4):
        with hierarchical_timer("update"):
            fake_clock.advance(0.5)
    fake_clock.advance(2.0)
    figures = profiler.scalars()
    assert figures["rlprof/wall_seconds"] == 4.0
    assert figures["rlprof/block_mean_seconds/update"] == 0.5
    assert figures["rlprof/block_wall_share/update"] == 0.5


def test_every_figure_is_a_finite_number_a_json_logger_accepts(vector_figures):
    assert all(isinstance(value, float) and math.isfinite(value) for value in vector_figures.values())
    json.dumps(vector_figures, allow_nan=False)


def test_a_run_of_zero_wall_time_has_no_shares(fake_clock):
    with hierarchical_timer("instant"):
        pass
    figures = profiler.scalars()
    assert "rlprof/block_wall_share/instant" not in figures
    assert figures["rlprof/block_mean_seconds/instant"] == 0.0


def test_each_verdict_has_its_cost_and_share_of_the_wall(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock))
    verdicts = judge_run(tree).verdicts
    assert verdicts, "the planted slow worker gives at least one verdict"
    figures = scalars_of_tree(tree)
    for verdict in verdicts:
        assert figures[f"rlprof/verdict_cost_seconds/{verdict.kind}"] == pytest.approx(verdict.cost_seconds)
        assert figures[f"rlprof/verdict_wall_share/{verdict.kind}"] == pytest.approx(verdict.share)
    assert len([name for name in figures if "/verdict_cost_seconds/" in name]) == len(
        {verdict.kind for verdict in verdicts})


# --- the window's figures on a real run: env steps as the workers' payloads report them ------------


@pytest.fixture
def straggler_envs():
    """The planted straggler's four envs over real workers that ship their timers only when asked
    (a reset), so that the test knows which window their payloads land in."""
    from straggler_training import straggler_env_fns

    from envmanager.subprocess_env_manager import SubprocessEnvManager

    envs = SubprocessEnvManager(straggler_env_fns(), flush_interval=3600)
    envs.reset(seed=0)
    yield envs
    envs.close()


def step(envs, times):
    for _ in range(times):
        envs.step(np.zeros(envs.num_envs, dtype=np.int64))


def test_a_window_no_worker_payload_reached_leaves_its_env_steps_out_rather_than_zero(straggler_envs):
    profiler.scalars()
    step(straggler_envs, 6)
    figures = profiler.scalars()
    assert "rlprof/window/env_steps_per_second" not in figures
    assert not [name for name in figures if name.startswith("rlprof/window/worker_steps_per_second/")]
    # How often each worker came last is the trainer's own count: there in every window.
    last = {worker: figures[f"rlprof/window/worker_last_share/worker_{worker}"] for worker in range(4)}
    assert max(last, key=last.get) == 3


def test_the_window_a_payload_reaches_counts_each_workers_steps_since_its_previous_payload(straggler_envs):
    profiler.scalars()
    step(straggler_envs, 6)
    profiler.scalars()
    step(straggler_envs, 6)
    straggler_envs.reset(seed=0)  # the workers ship their timers
    figures = profiler.scalars()
    seconds = figures["rlprof/window/seconds"]
    for worker in range(4):
        assert figures[f"rlprof/window/worker_steps_per_second/worker_{worker}"] * seconds == pytest.approx(12)
    assert figures["rlprof/window/env_steps_per_second"] * seconds == pytest.approx(48)
