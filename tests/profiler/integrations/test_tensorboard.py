"""Specification of the TensorBoard integration: real event files, read back with TensorBoard."""

from __future__ import annotations

import pytest
from run_files import write_vector_run

from profiler import hierarchical_timer, load_timing_tree
from profiler.integrations.tensorboard import log_timers

tensorboardX = pytest.importorskip("tensorboardX", reason="pip install 'rlprof[tensorboard]'")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def read_scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    events = event_accumulator.EventAccumulator(str(log_dir))
    events.Reload()
    return {tag: [(event.step, event.value) for event in events.Scalars(tag)]
            for tag in events.Tags()["scalars"]}


def test_every_figure_becomes_a_scalar_at_the_step_given(tmp_path, fake_clock):
    writer = tensorboardX.SummaryWriter(str(tmp_path / "tb"))
    for step in (100, 200):
        with hierarchical_timer("update"):
            fake_clock.advance(0.25)
        fake_clock.advance(0.25)
        logged = log_timers(writer, step)
    writer.close()
    scalars = read_scalars(tmp_path / "tb")
    assert set(scalars) == set(logged)
    assert scalars["rlprof/block_mean_seconds/update"] == [(100, 0.25), (200, 0.25)]
    assert scalars["rlprof/wall_seconds"] == [(100, 0.5), (200, 1.0)]


def test_a_dumped_run_with_workers_logs_their_figures(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock))
    writer = tensorboardX.SummaryWriter(str(tmp_path / "tb"))
    log_timers(writer, 7, tree=tree, prefix="perf/")
    writer.close()
    scalars = read_scalars(tmp_path / "tb")
    assert scalars["perf/worker_step_seconds/worker_3"] == [(7, pytest.approx(0.010))]
    assert "perf/env_steps_per_second" in scalars


def test_something_that_is_not_a_writer_is_refused_by_name():
    with pytest.raises(TypeError, match="needs a TensorBoard SummaryWriter .* got str"):
        log_timers("runs/tb", 0)
