"""Specification: a vector step whose envs ran in the trainer's process (a SyncVectorEnv or SB3's
DummyVecEnv as ``rlprof run`` times them) is env compute in the trainer and other work, not a
wait or a transport it never had."""

from __future__ import annotations

import pytest

from profiler import hierarchical_timer
from profiler.analysis.step_time import ENV_COMPUTE, ENV_COMPUTE_IN_TRAINER, step_breakdowns
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
