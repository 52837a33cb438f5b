"""The trainer side of the manager's profiling: its timer blocks, the merged worker timers.

The manager's ``step`` is one block with the parts a user needs to tell apart::

    env_manager.step
      send_actions        splitting, packing and writing the actions to the pipes
      wait_for_workers    blocked until the slowest worker has answered (straggler wait)
      receive_results     reading and decoding the replies, building obs and infos
      env.step ...        the workers' own blocks, merged (is_parallel: they ran beside)

``env_manager.reset`` is the same with ``send_resets``.  Worker payloads are merged under
the block of the latest step (or, before the first step, the latest reset), whatever call
they happen to arrive with, so that a worker's stepping time always sits under the step
block, where it belongs.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from profiler import events, timers
from profiler.merge import PayloadError, TimerMerger
from profiler.timer_json import timers_json_path, write_timing_tree
from profiler.timers import TimerNode

from envmanager.resources import ResourceGauges

__all__ = ["ManagerProfiling"]

_NO_BLOCK = contextlib.nullcontext()


class ManagerProfiling:
    """Timer blocks, payload merging, resource gauges and dumps for one manager.

    Disabled (``enabled=False``, or profiling switched off globally when the manager was
    built), every method is a no-op and :meth:`block` returns a shared null context.
    """

    __slots__ = (
        "enabled",
        "timer_stack",
        "merger",
        "step_anchor",
        "reset_anchor",
        "resources",
        "bad_payloads",
    )

    def __init__(self, enabled: bool, resource_interval: float | None) -> None:
        self.enabled = enabled and timers.is_enabled()
        # The constructing thread's stack: the trainer loop's, in every program we know of.
        self.timer_stack = timers.get_timer_stack_for_thread(threading.current_thread())
        self.merger = TimerMerger(self.timer_stack) if self.enabled else None
        self.step_anchor: TimerNode | None = None
        self.reset_anchor: TimerNode | None = None
        self.resources = (
            ResourceGauges(resource_interval, self.timer_stack)
            if self.enabled and resource_interval
            else None
        )
        self.bad_payloads = 0

    def block(self, name: str) -> Any:
        """``with profiling.block(name) as node:`` times a block (``node`` is None if disabled)."""
        return timers.hierarchical_timer(name) if self.enabled else _NO_BLOCK

    def merge(self, worker_index: int, payload: Any) -> None:
        """Fold one worker payload into the trainer's tree (the pool's ``timers_sink``)."""
        if self.merger is None:
            return
        anchor = self.step_anchor if self.step_anchor is not None else self.reset_anchor
        try:
            self.merger.merge_payload(worker_index, payload, anchor)
        except PayloadError as exc:
            # Timing data must never break training: count it, say it once, go on.
            self.bad_payloads += 1
            if self.bad_payloads == 1:
                warnings.warn(
                    f"rlprof: dropped a malformed timer payload from worker {worker_index}: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )

    def record_restart(self, worker_index: int, restarts: int) -> None:
        if self.enabled:
            timers.set_gauge("env_manager.restarts", restarts, self.timer_stack)
            events.mark(f"env_manager.restart worker {worker_index}", self.timer_stack)

    def sample_resources(self, workers: list[Any]) -> None:
        if self.resources is not None:
            self.resources.maybe_sample((h.index, h.process.pid if h.alive else None) for h in workers)

    def dump(self, summaries_dir: str | os.PathLike[str], run_id: str) -> Path:
        """Write the trainer's tree, merged worker blocks included, as ``{run_id}_timers.json``."""
        path = timers_json_path(summaries_dir, run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_timing_tree(path, self.timer_stack)
