"""The TensorBoard example logs rlprof's figures beside the training scalars, every 50 steps."""

from __future__ import annotations

import pytest
from example_runner import run_example

pytest.importorskip("tensorboardX", reason="pip install 'rlprof[tensorboard]'")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def test_the_tensorboard_example_logs_the_figures_at_the_training_steps(tmp_path):
    completed = run_example("tensorboard_timers.py", str(tmp_path))
    assert "rlprof figures per log" in completed.stdout
    events = event_accumulator.EventAccumulator(str(tmp_path))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "charts/mean_reward" in tags
    assert [event.step for event in events.Scalars("rlprof/env_steps_per_second")] == [
        200, 400, 600, 800, 1000, 1200]
    assert [event.step for event in events.Scalars("rlprof/worker_step_seconds/worker_3")][-1] == 1200
