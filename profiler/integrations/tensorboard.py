"""rlprof's figures in TensorBoard, logged during training so regressions show up as they happen.

    from torch.utils.tensorboard import SummaryWriter     # or: from tensorboardX import SummaryWriter
    from profiler.integrations.tensorboard import log_timers

    writer = SummaryWriter("runs/ppo")
    for update in range(updates):
        ...
        if update % 100 == 0:
            log_timers(writer, step=global_step)

Each figure of :func:`profiler.scalars` becomes one scalar tag (``rlprof/block_mean_seconds/...``,
``rlprof/env_steps_per_second``...). Any writer with ``add_scalar(tag, value, global_step)`` works:
torch's and tensorboardX's have it. ``pip install 'rlprof[tensorboard]'`` brings tensorboardX, the
light one, for users without torch; this module imports neither.
"""

from __future__ import annotations

from typing import Any

from profiler.integrations.scalar_figures import DEFAULT_MAX_BLOCKS, DEFAULT_PREFIX, scalars, scalars_of_tree
from profiler.timing.timers import TimerStack

__all__ = ["log_timers"]


def log_timers(
    writer: Any,
    step: int,
    *,
    timer_stack: TimerStack | None = None,
    tree: dict[str, Any] | None = None,
    prefix: str = DEFAULT_PREFIX,
    max_blocks: int | None = DEFAULT_MAX_BLOCKS,
) -> dict[str, float]:
    """Write the run's figures to ``writer`` at ``step`` and return them.

    The figures are those of the live timers (the calling thread's, or ``timer_stack``'s), or of
    ``tree`` — a dumped run from :func:`profiler.load_timing_tree` — when given. ``prefix`` and
    ``max_blocks`` are :func:`profiler.scalars`'.
    """
    add_scalar = getattr(writer, "add_scalar", None)
    if not callable(add_scalar):
        raise TypeError(
            f"log_timers needs a TensorBoard SummaryWriter (anything with add_scalar), "
            f"got {type(writer).__name__}"
        )
    if tree is None:
        figures = scalars(timer_stack, prefix=prefix, max_blocks=max_blocks)
    else:
        figures = scalars_of_tree(tree, prefix=prefix, max_blocks=max_blocks)
    for tag, value in figures.items():
        add_scalar(tag, value, step)
    return figures
