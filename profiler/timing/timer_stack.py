"""A timer stack: the timer tree of one thread, its open block, gauges and metadata."""

from __future__ import annotations

import platform
import random
import sys
import threading
import time
import weakref
from typing import Any, Callable

from profiler.timing.accelerator import extension as _accelerator
from profiler.timing.gauges import GaugeNode, gauge_value
from profiler.timing.timer_node import TIMER_FORMAT_VERSION, TimerNode, accelerated, now

__all__ = ["TimerStack", "keyed_by_name", "set_timeline_factory"]

_new_thread_timeline: Callable[[], Any] | None = None
"""Set by ``profiler.recording.events`` while recording: makes the timeline buffers of a new stack."""


def set_timeline_factory(make_timeline: Callable[[], Any] | None) -> None:
    """Have every stack made or reset from now on start with ``make_timeline()`` as its timeline
    buffers (None: with no timeline)."""
    global _new_thread_timeline
    _new_thread_timeline = make_timeline


class TimerStack:
    """The timer tree of one thread: its root, the block open now, gauges and metadata.

    A stack also carries what flushing and merging need: the start of the interval not yet
    flushed into a payload, a random ``stream_id`` and a ``flushes`` counter (together they let a
    merger recognise a payload it has already merged, even after a worker restarts), the mergers
    whose worker trees it dumps, and its timeline buffers while recording.
    """

    __slots__ = (
        "root",
        "current",
        "gauges",
        "metadata",
        "start_time",
        "start_wall_time",
        "thread_name",
        "flushed_at",
        "stream_id",
        "flushes",
        "mergers",
        "generation",
        "timeline",
        "holds_ended_threads",
        "ended_threads",
        "shape_changed",
        "block_ids",
        "deferred",
        "folded_into",
    )

    def __init__(self, thread_name: str | None = None) -> None:
        self.thread_name = thread_name or threading.current_thread().name
        # Set on the stacks that hold the folded trees of ended threads (see _StackRegistry),
        # which count the threads they stand for in ended_threads. Such a stack records no
        # timeline of its own.
        self.holds_ended_threads = False
        # Drawn from os.urandom: a forked child must not repeat its parent's stream.
        self.stream_id = random.SystemRandom().getrandbits(62)
        self.flushes = 0
        self.generation = 0
        # What payloads need to name blocks by number (see profiler.multiprocess.block_ids): the ids given
        # so far, and whether a block or a block's labels appeared since the last flush.
        self.block_ids: Any = None
        # Recorders that keep figures for this stack's nodes raw and fold them in later, in bulk
        # (the runs of a PhasedBlock, the payload rows of a TimerMerger): settle() has them
        # fold() before anything reads the tree, reset() has them discard(stack) what they hold
        # for it. Weak: a recorder's owner may go at any time (a merger holding rows cannot: its
        # stack's mergers hold it, and detach() folds).
        self.deferred: weakref.WeakSet[Any] = weakref.WeakSet()
        # The stack of the ended threads this stack's tree was added into, once its thread ended
        # (see StackRegistry): a merger that anchors payloads on one of this tree's nodes adds
        # them under the group's node of the same path from then on.
        self.folded_into: TimerStack | None = None
        self.reset()

    def reset(self) -> None:
        """Forget every block, gauge, metadata entry, attached merger and timeline event, and
        restart the run clock. Mergers re-attach (with emptied worker trees) on their next merge.
        Runs that deferred recorders hold for this stack go with the tree.
        """
        for recorder in self._deferred_recorders():
            recorder.discard(self)
        self.root = TimerNode("root", None, self)
        self.current = self.root
        self.gauges: dict[str, GaugeNode] = {}
        self.metadata: dict[str, str] = {}
        self.start_time = now()
        self.start_wall_time = time.time()
        self.flushed_at = self.start_time
        self.mergers: list[Any] = []
        self.generation += 1
        self.shape_changed = True
        self.ended_threads = 0
        self.timeline = _new_thread_timeline() if _new_thread_timeline is not None else None

    def settle(self) -> None:
        """Fold into the tree what deferred recorders still hold: the runs of a
        :class:`PhasedBlock`, the payload rows of a merger (:mod:`profiler.multiprocess.merge`). Every reader
        of the tree's figures calls this first."""
        if self.deferred:  # iterating even an empty WeakSet costs a microsecond: once per flush
            for recorder in self._deferred_recorders():
                recorder.fold()

    def _deferred_recorders(self) -> list[Any]:
        """The deferred recorders, copied. Another thread may add one while this one copies (a
        PhasedBlock attaching to this stack as a live view settles it), and a set that changes
        size under its iterator fails the copy: such adds are rare, so copy again."""
        while True:
            try:
                return list(self.deferred)
            except RuntimeError:
                continue

    def open_blocks(self) -> list[TimerNode]:
        """The blocks open right now, outermost first (the root excluded)."""
        blocks = []
        node: TimerNode | None = self.current
        while node is not None and node is not self.root:
            blocks.append(node)
            node = node.parent
        blocks.reverse()
        return blocks

    def close_open_blocks(self) -> None:
        """Close the blocks open now, innermost first, each as if its run ended now.

        For a dump taken as the process ends in the middle of them (an ``os._exit`` under ``rlprof
        run``), which would otherwise count nothing of their runs so far. Call it from the stack's
        own thread, or where the process ends next: a thread still timing into the stack could
        close the same block meanwhile."""
        for node in reversed(self.open_blocks()):
            node.__exit__(None, None, None)

    @property
    def stack(self) -> list[TimerNode]:
        """The root, then the blocks open right now, outermost first (ML-Agents' ``stack``).

        A new list each time: the stack itself is the ``current`` pointer, walked through
        ``parent``, so push and pop with :meth:`push` and :meth:`pop`, not on this list.
        """
        return [self.root, *self.open_blocks()]

    def push(self, name: str) -> TimerNode:
        """Make the child ``name`` of the open block the open block, and return it.

        ML-Agents' low-level API: it moves the stack but times nothing. Pair it with :meth:`pop`
        and :meth:`TimerNode.add_time`; ``with hierarchical_timer(name)`` does all three.
        """
        node = self.current.get_child(name)
        self.current = node
        return node

    def pop(self) -> None:
        """Close the open block (without timing it): its parent becomes the open block again."""
        node = self.current
        if node is self.root or node.parent is None:
            raise RuntimeError(f"pop() on the timer stack of {self.thread_name!r}: no block is open")
        self.current = node.parent

    def get_root(self) -> TimerNode:
        """The root, its ``total`` set to the time since the stack started and ``count`` to 1.

        This is what ML-Agents' workers send to the trainer: merged with
        ``merge(root, root_name="worker_root")``, the root's total is the worker's own run time.
        """
        self.settle()
        root = self.root
        root.total = self.elapsed()
        root.count = 1
        root.min = root.max = root.total  # its one run is the whole run
        return root

    def get_timing_tree(self, node: TimerNode | None = None) -> dict[str, Any]:
        """The tree (or the subtree at ``node``) in ML-Agents' layout, as ML-Agents' method does.

        Children are keyed by name and left out when there are none; the root alone carries its
        ``name``, the ``gauges`` (when any) and the ``metadata``. ``self`` is rlprof's: blocks
        that ran in parallel are not taken out of their parent's self time. rlprof's own layout,
        with merged workers and the timeline, is :func:`profiler.get_timer_tree`.
        """
        if node is not None:
            self.settle()
            return keyed_by_name(node.to_dict())
        tree: dict[str, Any] = {"name": "root"}
        if self.gauges:
            tree["gauges"] = {name: gauge.as_dict() for name, gauge in list(self.gauges.items())}
        tree["metadata"] = {**self.default_metadata(time.time()), **self.metadata}
        tree.update(keyed_by_name(self.get_root().to_dict()))
        return tree

    def default_metadata(self, end_wall_time: float) -> dict[str, str]:
        """The metadata every dump carries, as ML-Agents writes it: the timer format version,
        start and end (wall clock, whole seconds), the Python version and the command line; and
        rlprof's ``timer_core``, the core that timed the blocks: ``"c"`` (the accelerator) or
        ``"python"``."""
        return {
            "timer_format_version": TIMER_FORMAT_VERSION,
            "start_time_seconds": str(int(self.start_wall_time)),
            "end_time_seconds": str(int(end_wall_time)),
            "python_version": platform.python_version(),
            "command_line_arguments": " ".join(sys.argv),
            "timer_core": "c" if accelerated() else "python",
        }

    def add_metadata(self, key: str, value: Any) -> None:
        """Attach ``value`` (kept as a string) to the run's metadata under ``key``."""
        self.metadata[key] = str(value)

    def set_gauge(self, name: str, value: Any, details: tuple[tuple[str, Any], ...] | None = None) -> None:
        """Record a reading (any real number type; see :func:`gauge_value`); ``details`` go
        with the counter sample it makes on a recorded timeline (e.g. ``(("cat", "rl"),)``)."""
        value = gauge_value(name, value)
        gauge = self.gauges.get(name)
        if gauge is None:
            self.gauges[name] = GaugeNode(value)
        else:
            gauge.update(value)
        timeline = self.timeline
        if timeline is not None and timeline.recording:
            timeline.add_counter(name, now(), value, details)

    def elapsed(self) -> float:
        """Seconds since this stack was created or last reset."""
        return now() - self.start_time

    def __repr__(self) -> str:
        return f"TimerStack(thread={self.thread_name!r}, blocks={sum(1 for _ in self.root.walk()) - 1})"


if _accelerator is not None:
    # The C accelerator moves a block's stack's ``current`` straight in its slot (see _timer_core.c).
    _accelerator.use_stack_type(TimerStack)


def keyed_by_name(node: dict[str, Any]) -> dict[str, Any]:
    """A node of rlprof's JSON layout in ML-Agents': children keyed by name, without ``name``."""
    converted = {key: value for key, value in node.items() if key not in ("name", "children")}
    if node["children"]:
        converted["children"] = {child["name"]: keyed_by_name(child) for child in node["children"]}
    return converted
