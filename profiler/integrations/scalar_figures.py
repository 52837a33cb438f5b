"""A run's figures as one flat dict of numbers, for the dashboards RL engineers already watch.

(The module is not called ``scalars`` so that ``profiler.scalars`` stays the function.)

``profiler.scalars()`` turns the live timers (or a dumped run) into ``{name: number}``: what
``wandb.log``, ``mlflow.log_metrics`` or a TensorBoard writer take as they are (see
:mod:`profiler.integrations.tensorboard`). Logged every few hundred updates, a block that gets
slower, a worker that starts straggling or env throughput that drops shows up as a curve during
training, not in a file at the end.

The names, each after ``prefix`` (``"rlprof/"`` by default):

* ``wall_seconds`` — the run's wall time so far;
* ``block_mean_seconds/<path>`` and ``block_wall_share/<path>`` — per block (its path in the
  tree, names joined by ``/``), the mean time per call and its total over the wall time (a block
  that ran in workers, summed over them, can exceed 1); the ``max_blocks`` blocks with the
  largest totals;
* ``worker_step_seconds/worker_<id>`` — each environment worker's mean ``env.step`` time;
* ``vector_steps_per_second`` and ``env_steps_per_second`` — vectorized steps and the
  environment steps inside them (each worker's step, autoresets included), per second of wall
  time;
* ``verdict_cost_seconds/<kind>`` and ``verdict_wall_share/<kind>`` — for each verdict of
  :mod:`profiler.analysis.verdicts` the run has (``straggler``, ``transport_bound``...), the wall
  time it costs and that cost's share of the wall time: what ``rlprof analyze`` would say now.

**Windowed figures.** ``profiler.scalars()`` also gives the figures of the window since its
previous call on the same timers (the first call: since the start), as the live view shows them
(:mod:`profiler.analysis.live_figures`): logged every N updates, they are each stretch's own
figures, not averages since the start, so a slowdown shows when it starts. Under
``window/``: ``seconds`` (the window's wall time), ``env_steps_per_second``,
``phase_share/<phase>`` (policy, update, envs, transport, other, untimed; they add up to 1) and,
per worker, ``worker_steps_per_second/worker_<id>``, ``worker_step_seconds/worker_<id>`` and
``worker_last_share/worker_<id>`` (the share of vector steps it replied last in).

A figure that does not exist in the run (no workers, a zero wall time) is left out, never
written as 0 or NaN. The window's env steps and worker step figures are those the workers'
payloads reported (every ``flush_interval``, a second by default): a window no payload reached
leaves them out, and the one a payload reaches counts the steps since the worker's previous one.
"""

from __future__ import annotations

import threading
from typing import Any

from profiler.analysis.block_stats import block_rows, select_blocks
from profiler.analysis.run_measurements import read_measurements
from profiler.analysis.step_time import step_breakdowns
from profiler.analysis.live_figures import LiveFigures, live_figures
from profiler.analysis.verdicts import judge_run
from profiler.analysis.window import window_tree
from profiler.analysis.worker_report import worker_report
from profiler.tree.timer_json import normalize_timing_tree
from profiler.tree.timer_tree import get_timer_tree
from profiler.timing.timers import TimerStack, current_thread_stack

__all__ = ["DEFAULT_MAX_BLOCKS", "DEFAULT_PREFIX", "scalars", "scalars_of_tree", "window_scalars"]

DEFAULT_PREFIX = "rlprof/"
DEFAULT_MAX_BLOCKS = 20
"""Enough to follow every block of a typical trainer without flooding a dashboard."""


def scalars(
    timer_stack: TimerStack | None = None,
    *,
    prefix: str = DEFAULT_PREFIX,
    max_blocks: int | None = DEFAULT_MAX_BLOCKS,
) -> dict[str, float]:
    """The figures of the run so far (the calling thread's timers by default).

    Worker timers count from their latest payload: what the workers have flushed so far.
    ``max_blocks=None`` keeps every block. The ``window/`` figures cover the time since the
    previous call on the same timers (see the module docstring).
    """
    stack = timer_stack if timer_stack is not None else current_thread_stack()
    tree = normalize_timing_tree(get_timer_tree(stack, include_threads=True, timeline=False))
    figures = scalars_of_tree(tree, prefix=prefix, max_blocks=max_blocks)
    with _previous_lock:
        previous = _previous_trees.get(id(stack))
        _previous_trees[id(stack)] = tree
    figures.update(window_scalars(live_figures(tree, window_tree(tree, previous)), prefix=prefix))
    return figures


_previous_trees: dict[int, dict[str, Any]] = {}
"""The tree each stack's previous ``scalars()`` call read, by the stack's id: its window's start."""
_previous_lock = threading.Lock()


def window_scalars(figures: LiveFigures, *, prefix: str = DEFAULT_PREFIX) -> dict[str, float]:
    """The ``window/`` figures (see the module docstring) of a window's live figures."""
    window = f"{prefix}window/"
    scalars_out: dict[str, float] = {f"{window}seconds": figures.window_seconds}
    if figures.env_steps_per_second is not None:
        scalars_out[f"{window}env_steps_per_second"] = figures.env_steps_per_second
    for phase, share in figures.phase_shares.items():
        scalars_out[f"{window}phase_share/{phase}"] = share
    for worker in figures.workers:
        name = f"worker_{worker.worker_id}"
        for figure, value in (("worker_steps_per_second", worker.steps_per_second),
                              ("worker_step_seconds", worker.step_seconds),
                              ("worker_last_share", worker.last_share)):
            if value is not None:
                scalars_out[f"{window}{figure}/{name}"] = value
    return scalars_out


def scalars_of_tree(
    tree: dict[str, Any],
    *,
    prefix: str = DEFAULT_PREFIX,
    max_blocks: int | None = DEFAULT_MAX_BLOCKS,
) -> dict[str, float]:
    """The figures of a normalized tree (:func:`profiler.load_timing_tree` gives one)."""
    wall = float(tree["total"])
    figures: dict[str, float] = {f"{prefix}wall_seconds": wall}
    for block in select_blocks(block_rows(tree), order_by="total", top=max_blocks):
        if block.count:
            figures[f"{prefix}block_mean_seconds/{block.label}"] = block.avg
        share = block.share_of(wall)
        if share is not None:
            figures[f"{prefix}block_wall_share/{block.label}"] = share
    measurements = read_measurements(tree)
    report = worker_report(tree, measurements=measurements)
    for worker in report.workers if report is not None else []:
        figures[f"{prefix}worker_step_seconds/worker_{worker.worker_id}"] = worker.mean
    breakdowns = step_breakdowns(tree, measurements)
    steps = [breakdown for breakdown in breakdowns if breakdown.is_vector_step]
    if steps and wall > 0:
        figures[f"{prefix}vector_steps_per_second"] = sum(step.calls for step in steps) / wall
        env_steps = sum(step.worker_calls for step in steps)
        if env_steps:
            figures[f"{prefix}env_steps_per_second"] = env_steps / wall
    for verdict in judge_run(tree, measurements, breakdowns).verdicts:
        cost = f"{prefix}verdict_cost_seconds/{verdict.kind}"
        figures[cost] = figures.get(cost, 0.0) + verdict.cost_seconds
        if verdict.share is not None:
            share = f"{prefix}verdict_wall_share/{verdict.kind}"
            figures[share] = figures.get(share, 0.0) + verdict.share
    return figures
