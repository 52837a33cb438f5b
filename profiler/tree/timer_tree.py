"""The dump of one process's timers: the tree, gauges, metadata, merged workers and timeline.

This layer sits above :mod:`profiler.timing.timers` and :mod:`profiler.recording.events` so that neither imports
the other to build a dump: ``timers`` imports nothing of rlprof, ``events`` builds on ``timers``,
and this module brings both together into the dict that ``write_timing_tree`` writes.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from profiler.version import __version__
from profiler.timing import timers
from profiler.recording.cpu_cores import cores_available
from profiler.recording.events import timeline_section
from profiler.gpu.block_device_memory import block_memory_section
from profiler.gpu.device_time import device_time_section
from profiler.recording.memory import memory_section
from profiler.automatic.stack_sampler import untimed_samples_section
from profiler.recording import machine_load, scheduling
from profiler.tree.mlagents_layout import check_layout, to_mlagents_layout
from profiler.timing.timers import TimerNode, TimerStack, all_timer_stacks

__all__ = ["get_timer_tree"]


def _base_metadata(stack: TimerStack, end_wall_time: float) -> dict[str, str]:
    return {
        **stack.default_metadata(end_wall_time),
        "rlprof_version": __version__,
        "pid": str(os.getpid()),
        # What the run's busy processes competed for: tells CPU oversubscription from slow code.
        "cores_available": str(cores_available()),
        **stack.metadata,
    }


def _other_thread_nodes(stack: TimerStack) -> list[dict[str, Any]]:
    """Each other thread's blocks, as an ``is_parallel`` node named ``thread:<name>``.

    Threads that have ended are folded by name pattern into nodes ``thread:ended:<pattern>``
    (``thread:ended:Thread-N (fetch)``) whose ``count`` is the number of threads they hold.
    """
    nodes = []
    for other in all_timer_stacks():
        if other is stack or not other.root.children:
            continue
        other.settle()
        thread_node = TimerNode(f"thread:{other.thread_name}", None, other)
        thread_node.add(other.root, parallel=True)
        thread_node.count = other.ended_threads or 1
        thread_node.total = sum(child.total for child in other.root.children.values())
        # One run per thread: its outermost blocks back to back. A group of ended threads keeps
        # the shortest and longest of its threads' runs on its root (see profiler.timing.thread_registry.StackRegistry).
        if other.holds_ended_threads:
            thread_node.min, thread_node.max = other.root.min, other.root.max
        else:
            thread_node.min = thread_node.max = thread_node.total
        nodes.append(thread_node.to_dict(1))
    return nodes


def get_timer_tree(
    timer_stack: TimerStack | None = None,
    *,
    include_threads: bool = False,
    layout: str = "rlprof",
    mergers: Sequence[Any] | None = None,
    timeline: bool = True,
) -> dict[str, Any]:
    """The whole tree as a JSON-ready dict: the format written by ``write_timing_tree``.

    The root's ``total`` is the wall time since the stack started. With ``include_threads``, the
    trees of every other thread that timed anything are appended to the root's children, each
    under a node ``thread:<thread name>`` marked ``is_parallel`` (their time ran beside this one).
    ``layout="mlagents"`` keys children by name, as ML-Agents' ``get_timer_tree`` does (see
    :mod:`profiler.tree.mlagents_layout`). ``mergers`` are those whose workers the ``workers`` and
    ``timeline`` and ``memory`` sections show (default: every merger attached to the stack); an env
    manager passes its own, so its dump lists its own workers only. ``timeline=False`` leaves the
    timeline out: the live view reads the tree every second, and the timeline grows with the run.
    """
    check_layout(layout)
    stack = timers._resolve(timer_stack)
    stack.settle()
    end_wall_time = time.time()
    root = stack.root
    tree = root.to_dict()
    tree["total"] = stack.elapsed()
    tree["count"] = 1
    tree["self"] = root.self_time_within(tree["total"])
    # The root's single run is the whole run so far.
    tree["min"] = tree["max"] = tree["total"]
    if include_threads:
        tree["children"].extend(_other_thread_nodes(stack))
    # list() because a merger may add worker gauges from its receiver thread meanwhile.
    tree["gauges"] = {name: gauge.to_dict() for name, gauge in list(stack.gauges.items())}
    tree["metadata"] = _base_metadata(stack, end_wall_time)
    mergers = list(stack.mergers if mergers is None else mergers)
    workers = [entry for merger in mergers for entry in merger.worker_entries()]
    if workers:
        tree["workers"] = workers
    timeline_rows = timeline_section(stack, mergers) if timeline else None
    if timeline_rows is not None:
        # The kernels PyTorch's profiler saw, one track per device, in the trainer's process.
        timeline_rows["processes"][0]["threads"].extend(
            dict(track, tid=len(timeline_rows["processes"][0]["threads"]) + index)
            for index, track in enumerate(_gpu_tracks(stack), start=1))
        tree["timeline"] = timeline_rows
    device_time = (device_time_section(stack) or []) + [
        entry for merger in mergers for entry in merger.device_time_entries()]
    if device_time:
        tree["device_time"] = device_time
    device_memory = block_memory_section(stack)
    if device_memory is not None:
        tree["device_memory"] = device_memory
    operators = _operators_section(stack, [figures for merger in mergers for figures in merger.operator_figures()])
    if operators is not None:
        tree["operators"] = operators
    memory = memory_section(stack, mergers)
    if memory is not None:
        tree["memory"] = memory
    untimed_samples = untimed_samples_section(stack)
    if untimed_samples is not None:
        tree["untimed_samples"] = untimed_samples
    # This process's waits for a core and the machine's load, from where the run started: the
    # kernel's clocks, so not under a fake timer clock (a simulated run has no such figures).
    if timers.current_clock() is time.perf_counter:
        for key, section in (("scheduling", scheduling.scheduling_section(stack)),
                             ("machine_load", machine_load.machine_load_section(stack))):
            if section is not None:
                tree[key] = section
        scheduling.follow_stack(stack)
        machine_load.follow_stack(stack)
    return to_mlagents_layout(tree) if layout == "mlagents" else tree


# Only :mod:`profiler.gpu.torch_ops` records PyTorch's operators and kernels: in a process that
# never imported it the trainer recorded none, and the dump need not import it (with the execution
# traces behind it) to say so. Workers' operator figures come through the mergers.


def _gpu_tracks(stack: TimerStack) -> list[dict[str, Any]]:
    torch_ops = sys.modules.get("profiler.gpu.torch_ops")
    return [] if torch_ops is None else torch_ops.gpu_tracks(stack)


def _operators_section(stack: TimerStack, workers: list[Any]) -> dict[str, Any] | None:
    if "profiler.gpu.torch_ops" not in sys.modules and not any(worker.figures for worker in workers):
        return None
    from profiler.gpu.torch_ops import operators_section

    return operators_section(stack, workers)
