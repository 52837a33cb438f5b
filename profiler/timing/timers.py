"""Hierarchical timers: a tree of named blocks per thread, cheap enough to leave on.

The API is the whole public API of Unity ML-Agents' ``mlagents_envs.timers`` (mlagents-envs
1.1.0), names and semantics, so that code written against it ports by changing the import; the
few deliberate differences are listed in docs/from-mlagents.md. The design differs where ML-Agents
is slow or wrong:

* A block *is* its tree node. ``hierarchical_timer(name)`` finds (or, the first time, creates)
  the child of the currently open node and returns it; the node is its own context manager. After
  a block's first entry nothing is allocated per call: no generator, no dict, no list push.
* The open block is a single ``current`` pointer on the stack, walked back through ``parent`` on
  exit, instead of a list.
* Each thread times into its own :class:`TimerStack`, and a process started with ``fork`` starts
  with empty stacks instead of inheriting the parent's tree.

Optional companions hook in here without costing the hot path anything while unused: timeline
recording (``profiler.recording.events`` has :func:`record_spans` swap ``TimerNode.__exit__`` for
:meth:`TimerNode._exit_and_record`), memory sampling (``profiler.recording.memory`` has
:func:`observe_blocks` wrap ``__enter__``/``__exit__`` with its observers, as ``profiler.gpu`` does
for NVTX ranges), and worker trees merged
from other processes (``profiler.multiprocess.merge`` attaches its merger to a stack, and
:func:`profiler.tree.timer_tree.get_timer_tree` then dumps them in a ``workers`` section). This module
imports nothing of rlprof: the dump is assembled by ``profiler.tree.timer_tree``, above it.
"""

from __future__ import annotations

import functools
import math
import numbers
import os
import platform
import random
import re
import sys
import threading
import time
import weakref
from itertools import chain
from typing import Any, Callable, Iterable, Iterator, TypeVar, overload

__all__ = [
    "ENDED_THREAD_GROUPS",
    "FOLDED_BLOCK_NAME",
    "MAX_DEPTH",
    "PhasedBlock",
    "TIMER_FORMAT_VERSION",
    "GaugeNode",
    "TimerNode",
    "TimerStack",
    "add_metadata",
    "all_timer_stacks",
    "disable",
    "enable",
    "gauge_value",
    "get_timer_root",
    "get_timer_stack_for_thread",
    "hierarchical_timer",
    "is_enabled",
    "merge_gauges",
    "now",
    "current_clock",
    "plain_blocks",
    "reset_timers",
    "set_clock",
    "set_gauge",
    "timed",
]

TIMER_FORMAT_VERSION = "0.1.0"
"""Version of the timer-tree JSON layout; bumped on any change a reader must know about."""

MAX_DEPTH = 100
"""Blocks nested deeper than this are folded, in payloads and dumps, into one node per parent
named :data:`FOLDED_BLOCK_NAME`. No program needs more to find its time, and a bound keeps every
reader (the trainer's payload check, JSON parsers, recursive tools) safe from deep recursion."""

FOLDED_BLOCK_NAME = f"[folded: blocks nested deeper than {MAX_DEPTH} levels]"
"""The node that stands for every block below :data:`MAX_DEPTH`: its total, count and errors are
those of the blocks at the limit, whose time includes everything deeper."""

_clock = time.perf_counter
FunctionType = TypeVar("FunctionType", bound=Callable[..., Any])


class TimerNode:
    """One named block of the tree: its accumulated time, call count and children.

    A node is also the context manager that times its block, so that entering a block that ran
    before costs one dict lookup and two clock reads. A node belongs to exactly one stack and is
    never open twice at once (re-entering a name nests a *new* child), so it can hold the start
    time of its current run itself.
    """

    __slots__ = (
        "name",
        "parent",
        "children",
        "total",
        "count",
        "errors",
        "min",
        "max",
        "is_parallel",
        "peak_mean",
        "domain",
        "object_type",
        "scopes",
        "_stack",
        "_start",
    )

    def __init__(
        self, name: str = "root", parent: TimerNode | None = None, stack: TimerStack | None = None
    ) -> None:
        # With no arguments (as ML-Agents' ``TimerNode()``) the node is detached: a tree to merge
        # into or read, never entered as a block.
        self.name = name
        self.parent = parent
        self.children: dict[str, TimerNode] = {}
        self.total = 0.0
        self.count = 0
        self.errors = 0
        # The shortest and longest single call since the last reset or flush. ``min`` starts at
        # infinity so the first call sets it without a test for "first"; nothing reads it while
        # ``count`` is 0 (see to_dict).
        self.min = math.inf
        self.max = 0.0
        self.is_parallel = False
        # Only trees merged from worker payloads fill this in: the highest mean time per call
        # within a single payload (see profiler.multiprocess.merge).
        self.peak_mean = 0.0
        # Set on the blocks that MXNet-style objects time (see profiler.control.durations): the domain
        # they belong to and the object: "task", "frame" or "event". None on plain blocks.
        self.domain: str | None = None
        self.object_type: str | None = None
        # The profiler scopes (profiler.control.scopes) the block ran in, once it ran in one.
        self.scopes: set[str] | None = None
        self._stack = stack
        self._start = 0.0

    # The clock is read through the module global ``_clock`` rather than bound as a default
    # argument: a method with no defaults is called through the interpreter's cheapest path
    # (see benchmarks/timer_overhead.py), and set_clock only has to rebind one name.
    def __enter__(self) -> TimerNode:
        self._stack.current = self
        self._start = _clock()
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        elapsed = _clock() - self._start
        self._stack.current = self.parent  # type: ignore[assignment]
        self.total += elapsed
        self.count += 1
        if elapsed > self.max:
            self.max = elapsed
        if elapsed < self.min:
            self.min = elapsed
        if exc_type is not None:
            self.errors += 1

    # While timeline recording is on, profiler.recording.events installs this as ``__exit__``: a separate
    # method rather than a branch in the plain one, so that recording off costs nothing.
    def _exit_and_record(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        end = _clock()
        elapsed = end - self._start
        stack = self._stack
        stack.current = self.parent  # type: ignore[assignment]
        self.total += elapsed
        self.count += 1
        if elapsed > self.max:
            self.max = elapsed
        if elapsed < self.min:
            self.min = elapsed
        if exc_type is not None:
            self.errors += 1
        timeline = stack.timeline
        if timeline is not None:
            timeline.spans.append((self.name, self._start, end))
            timeline.spans_recorded += 1

    def running_for(self, at: float) -> float:
        """For a block open right now: how long its current run has lasted at time ``at``."""
        return at - self._start

    def get_child(self, name: str) -> TimerNode:
        """Return the child called ``name``, creating it on first use.

        Safe against a second thread creating the same child at the same moment (a merger adding
        worker blocks while the owning thread times): ``setdefault`` is one atomic step, so both
        threads end up with the one node that won, and no time is added to a discarded node.
        """
        child = self.children.get(name)
        if child is None:
            child = self.children.setdefault(name, TimerNode(name, self, self._stack))
            if self._stack is not None:
                self._stack.shape_changed = True  # a payload declares the new block's name
        return child

    @property
    def self_time(self) -> float:
        """Seconds spent in this block outside its children; never negative.

        A child marked ``is_parallel`` under a node that is not ran *beside* this block (in another
        process or thread), so its time is not taken out. Clock granularity can make children
        exceed their parent by a hair, hence the clamp at zero.
        """
        return self.self_time_within(self.total)

    def self_time_within(self, total: float) -> float:
        """Like :attr:`self_time`, for this node's children under a given ``total``."""
        nested = sum(
            max(0.0, child.total)
            for child in list(self.children.values())
            if self.is_parallel or not child.is_parallel
        )
        return max(0.0, total - nested)

    def add_time(self, elapsed: float) -> None:
        """Count one more call of this block, lasting ``elapsed`` seconds (ML-Agents' API).

        For code that times a block itself, between :meth:`TimerStack.push` and
        :meth:`TimerStack.pop`; ``with hierarchical_timer(...)`` does this on its own.
        """
        self.add_runs(elapsed, 1, 0, elapsed, elapsed)

    def merge(self, other: TimerNode, root_name: str | None = None, is_parallel: bool = True) -> None:
        """Add ``other``'s tree into this one, as ML-Agents' ``TimerNode.merge`` does.

        With ``root_name``, ``other`` is added as (or into) this node's child of that name: the
        way ML-Agents' trainer files each worker's root under ``worker_root``. ``is_parallel``
        marks every node it touches as having run beside its parent, in another process or
        thread. Unlike ML-Agents, a node that ``other`` already marks parallel stays parallel, and
        error counts are added too; ``other`` itself is left unchanged.
        """
        target = self.get_child(root_name) if root_name else self
        target.add(other, parallel=is_parallel)

    def __getstate__(self) -> dict[str, Any]:
        """What pickling keeps: the figures and the children, not the parent, stack or open run.

        ML-Agents' workers send ``get_timer_root()`` to the trainer over a pipe; the stack a node
        belongs to (its locks, mergers and timeline) has no meaning in another process.
        """
        return {
            slot: getattr(self, slot)
            for slot in TimerNode.__slots__
            if slot not in _UNPICKLED_NODE_SLOTS
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        for slot, value in state.items():
            setattr(self, slot, value)
        self.parent = None
        self._stack = None  # type: ignore[assignment]
        self._start = 0.0
        for child in self.children.values():
            child.parent = self

    def add(self, other: TimerNode, *, parallel: bool = False) -> None:
        """Add ``other``'s totals, counts and children into this subtree (``other`` is unchanged).

        ``parallel`` marks every node it touches as having run beside, not inside, its parent.
        """
        self.add_runs(other.total, other.count, other.errors, other.min, other.max)
        self.is_parallel = self.is_parallel or parallel or other.is_parallel
        self.add_labels(other.domain, other.object_type, other.scopes)
        for name, other_child in list(other.children.items()):
            self.get_child(name).add(other_child, parallel=parallel)

    def add_runs(
        self, total: float, count: int, errors: int, minimum: float, maximum: float
    ) -> None:
        """Fold in ``count`` runs timed elsewhere (another thread, a worker's payload).

        Totals, counts and errors add up; the per-call extremes are the extremes of both sides.
        ``minimum`` and ``maximum`` are ignored when ``count`` is 0: such a side has no run.
        """
        self.total += total
        self.count += count
        self.errors += errors
        if count:
            if minimum < self.min:
                self.min = minimum
            if maximum > self.max:
                self.max = maximum

    def add_labels(
        self, domain: str | None, object_type: str | None, scopes: Iterable[str] | None
    ) -> None:
        """Take the labels of the same block timed elsewhere: its domain and object type where
        this node has none, and the scopes it ran in."""
        if domain is not None and self.domain is None:
            self.domain = domain
            self._labels_changed()
        if object_type is not None and self.object_type is None:
            self.object_type = object_type
            self._labels_changed()
        if scopes:
            if self.scopes is None:
                self.scopes = set()
            if not self.scopes.issuperset(scopes):
                self.scopes.update(scopes)
                self._labels_changed()

    def note_scope(self, scope: str) -> None:
        """Record that a run of this block happened in the profiler scope ``scope``."""
        if self.scopes is None:
            self.scopes = {scope}
            self._labels_changed()
        elif scope not in self.scopes:
            self.scopes.add(scope)
            self._labels_changed()

    def _labels_changed(self) -> None:
        # Payloads carry a block's labels; the stack's next flush looks for what changed.
        if self._stack is not None:
            self._stack.shape_changed = True

    def clear_runs(self) -> None:
        """Forget the runs counted so far (a flush): the node and its children stay in the tree."""
        self.total = 0.0
        self.count = 0
        self.errors = 0
        self.min = math.inf
        self.max = 0.0

    def walk(self) -> Iterator[TimerNode]:
        """Yield this node and every descendant, parents before children."""
        yield self
        for child in self.children.values():
            yield from child.walk()

    def to_dict(self, depth: int = 0) -> dict[str, Any]:
        """The JSON-ready form of this subtree (see docs/formats.md), this node at ``depth``.

        Children that would sit deeper than :data:`MAX_DEPTH` are folded into one node.
        """
        result: dict[str, Any] = {
            "name": self.name,
            # Negative only while a block flushed mid-run is still open (see profiler.multiprocess.payload):
            # it has no closed time since the flush, so 0 is what it shows.
            "total": max(0.0, self.total),
            "count": self.count,
            "self": self.self_time,
        }
        # A node whose count was raised without its extremes (code adding to ``count`` by hand)
        # still has min at infinity: it is written without them rather than as invalid JSON.
        if self.count and self.min <= self.max:
            result["min"] = self.min
            result["max"] = self.max
        if self.errors:
            result["errors"] = self.errors
        if self.is_parallel:
            result["is_parallel"] = True
        if self.domain is not None:
            result["domain"] = self.domain
        if self.object_type is not None:
            result["object_type"] = self.object_type
        if self.scopes:
            result["scopes"] = sorted(self.scopes)
        # list() snapshots the children in one step: another thread may be adding to them.
        children = list(self.children.values())
        if depth + 1 >= MAX_DEPTH and children:
            result["children"] = [_folded_dict(children)]
        else:
            result["children"] = [child.to_dict(depth + 1) for child in children]
        return result

    def __repr__(self) -> str:
        return f"TimerNode({self.name!r}, total={self.total:.6f}, count={self.count})"


_UNPICKLED_NODE_SLOTS = frozenset({"parent", "_stack", "_start"})


def gauge_value(name: str, value: Any) -> float:
    """``value`` as the Python float a gauge stores, or an error naming the gauge.

    Training code passes whatever its libraries hand back: NumPy scalars and 0-d arrays, torch
    scalar tensors, bools, Fractions, Decimals. Converting once, when the gauge is set, keeps the
    payloads, the merger and the JSON dump working on plain floats only. Python floats and ints
    take the fast path; anything else must convert through ``__float__`` and be a single real
    number. NaN and infinities are kept: a diverging loss is worth seeing.

    Raises ``TypeError`` for a non-number (a string, a complex, an array of several values) and
    ``ValueError`` for an integer too large for a float, each naming the gauge.
    """
    value_type = type(value)
    if value_type is float:
        return value  # type: ignore[no-any-return]
    if value_type is not int and value_type is not bool:
        if getattr(value_type, "__float__", None) is None and getattr(value_type, "__index__", None) is None:
            raise TypeError(f"gauge {name!r}: expected a real number, got {_describe(value)}")
        if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
            raise TypeError(f"gauge {name!r}: expected a real number, got {_describe(value)}")
        shape = getattr(value, "shape", ())
        if tuple(shape) != ():
            raise TypeError(
                f"gauge {name!r}: expected one number, got {value_type.__name__} of shape "
                f"{tuple(shape)} (reduce it, or pass .item() of a one-element array)"
            )
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"gauge {name!r}: {_describe(value)} is too large for a float") from None
    except Exception as error:  # a third-party __float__ can raise anything
        raise TypeError(f"gauge {name!r}: cannot convert {_describe(value)} to a float: {error}") from None


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _lower(current: float, candidate: float) -> float:
    """The smaller reading, ignoring NaN unless every reading so far was NaN."""
    return candidate if candidate < current or current != current else current


def _higher(current: float, candidate: float) -> float:
    """The larger reading, ignoring NaN unless every reading so far was NaN."""
    return candidate if candidate > current or current != current else current


def _folded_dict(nodes: list[TimerNode]) -> dict[str, Any]:
    """One leaf standing for ``nodes`` and everything below them (see :data:`MAX_DEPTH`)."""
    total = sum(max(0.0, node.total) for node in nodes)
    folded: dict[str, Any] = {
        "name": FOLDED_BLOCK_NAME,
        "total": total,
        "count": sum(node.count for node in nodes),
        "self": total,
    }
    called = [node for node in nodes if node.count and node.min <= node.max]
    if called:
        folded["min"] = min(node.min for node in called)
        folded["max"] = max(node.max for node in called)
    errors = sum(node.errors for node in nodes)
    if errors:
        folded["errors"] = errors
    if all(node.is_parallel for node in nodes):
        folded["is_parallel"] = True
    folded["children"] = []
    return folded


class GaugeNode:
    """The latest value of a named measurement, with its min, max and how often it was set.

    ``updated_at`` is the wall-clock time (``time.time()``) of the latest value: gauges merged
    from several processes or threads keep the value set last, as ML-Agents' do. ``min`` and
    ``max`` skip NaN readings (as ``numpy.nanmin`` does): after a loss turns NaN, the gauge shows
    ``value`` NaN and the range it covered before. They are NaN only while every reading was.
    """

    __slots__ = ("value", "min_value", "max_value", "count", "updated_at")

    def __init__(self, value: float) -> None:
        self.value = value
        self.min_value = value
        self.max_value = value
        self.count = 1
        self.updated_at = time.time()

    def update(self, new_value: float) -> None:
        self.value = new_value
        self.min_value = _lower(self.min_value, new_value)
        self.max_value = _higher(self.max_value, new_value)
        self.count += 1
        self.updated_at = time.time()

    def merge(self, other: GaugeNode) -> None:
        """Fold in a gauge recorded elsewhere; the value set later (by ``updated_at``) is kept."""
        if other.updated_at > self.updated_at:
            self.value = other.value
            self.updated_at = other.updated_at
        self.min_value = _lower(self.min_value, other.min_value)
        self.max_value = _higher(self.max_value, other.max_value)
        self.count += other.count

    def merge_summary(self, value: float, minimum: float, maximum: float, count: int) -> None:
        """Fold in ``count`` readings summarized as (latest, min, max), arriving now: a worker's
        payload, whose latest value is the latest there is."""
        self.value = value
        self.updated_at = time.time()
        self.min_value = _lower(self.min_value, minimum)
        self.max_value = _higher(self.max_value, maximum)
        self.count += count

    def copy(self) -> GaugeNode:
        """An independent gauge with the same figures."""
        duplicate = GaugeNode(self.value)
        duplicate.min_value = self.min_value
        duplicate.max_value = self.max_value
        duplicate.count = self.count
        duplicate.updated_at = self.updated_at
        return duplicate

    def to_dict(self) -> dict[str, float]:
        return {
            "value": self.value,
            "min": self.min_value,
            "max": self.max_value,
            "count": self.count,
        }

    as_dict = to_dict
    """ML-Agents' name for :meth:`to_dict`."""

    def __repr__(self) -> str:
        return f"GaugeNode(value={self.value!r}, min={self.min_value!r}, max={self.max_value!r})"


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
        self.reset()

    def reset(self) -> None:
        """Forget every block, gauge, metadata entry, attached merger and timeline event, and
        restart the run clock. Mergers re-attach (with emptied worker trees) on their next merge.
        Runs that deferred recorders hold for this stack go with the tree.
        """
        for recorder in list(self.deferred):
            recorder.discard(self)
        self.root = TimerNode("root", None, self)
        self.current = self.root
        self.gauges: dict[str, GaugeNode] = {}
        self.metadata: dict[str, str] = {}
        self.start_time = _clock()
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
            for recorder in list(self.deferred):
                recorder.fold()

    def open_blocks(self) -> list[TimerNode]:
        """The blocks open right now, outermost first (the root excluded)."""
        blocks = []
        node: TimerNode | None = self.current
        while node is not None and node is not self.root:
            blocks.append(node)
            node = node.parent
        blocks.reverse()
        return blocks

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
            return _keyed_by_name(node.to_dict())
        tree: dict[str, Any] = {"name": "root"}
        if self.gauges:
            tree["gauges"] = {name: gauge.as_dict() for name, gauge in list(self.gauges.items())}
        tree["metadata"] = {**self.default_metadata(time.time()), **self.metadata}
        tree.update(_keyed_by_name(self.get_root().to_dict()))
        return tree

    def default_metadata(self, end_wall_time: float) -> dict[str, str]:
        """The metadata every dump carries, as ML-Agents writes it: the timer format version,
        start and end (wall clock, whole seconds), the Python version and the command line."""
        return {
            "timer_format_version": TIMER_FORMAT_VERSION,
            "start_time_seconds": str(int(self.start_wall_time)),
            "end_time_seconds": str(int(end_wall_time)),
            "python_version": platform.python_version(),
            "command_line_arguments": " ".join(sys.argv),
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
            timeline.add_counter(name, _clock(), value, details)

    def elapsed(self) -> float:
        """Seconds since this stack was created or last reset."""
        return _clock() - self.start_time

    def __repr__(self) -> str:
        return f"TimerStack(thread={self.thread_name!r}, blocks={sum(1 for _ in self.root.walk()) - 1})"


def _keyed_by_name(node: dict[str, Any]) -> dict[str, Any]:
    """A node of rlprof's JSON layout in ML-Agents': children keyed by name, without ``name``."""
    converted = {key: value for key, value in node.items() if key not in ("name", "children")}
    if node["children"]:
        converted["children"] = {child["name"]: _keyed_by_name(child) for child in node["children"]}
    return converted


ENDED_THREAD_GROUPS = 64
"""How many groups of ended threads are kept apart (by name pattern); the rest share one."""


class _StackRegistry:
    """Which stack belongs to which thread, and the folded trees of threads that have ended.

    The hot path never takes the lock: each thread caches its stack in the module's
    ``threading.local`` and consults the registry only on its first timer call.

    A program that starts many short threads (a thread per request, per episode, per download)
    must not pay for each of them forever. When a thread has ended, its tree and gauges are added
    into one stack per *group* of threads — its name with every number replaced by ``N``, so
    ``Thread-7 (fetch)`` and ``Thread-912 (fetch)`` share ``ended:Thread-N (fetch)`` — and its
    own stack is let go. Totals, counts and errors are added, so nothing is lost; the group's
    ``ended_threads`` counts the threads it holds. Ended threads are folded when a dump asks for
    every stack, and, as threads come and go, whenever the number of registered threads has
    doubled since the last look (so registration stays cheap). A stack a merger is attached to is
    never folded, and a thread's recorded timeline events are kept on their own track.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stacks_by_thread: dict[int, tuple[threading.Thread, TimerStack]] = {}
        self.kept: list[TimerStack] = []
        self.ended_groups: dict[str, TimerStack] = {}
        self._fold_when_over = 64

    def stack_for_thread(self, thread: threading.Thread) -> TimerStack:
        with self.lock:
            ident = thread.ident
            if ident is None:
                raise RuntimeError(f"thread {thread.name!r} has not started, so it has no timers")
            entry = self.stacks_by_thread.get(ident)
            if entry is not None and entry[0] is thread:
                return entry[1]
            if not thread.is_alive():
                # An ended thread's timers are in its group's stack, or will be folded there.
                return self._group_for(thread.name)
            if entry is not None:
                # The identifier was reused, so the thread that had it has ended.
                self._fold(*entry)
            stack = TimerStack(thread.name)
            self.stacks_by_thread[ident] = (thread, stack)
            if len(self.stacks_by_thread) > self._fold_when_over:
                self._fold_ended_threads()
                self._fold_when_over = 2 * len(self.stacks_by_thread) + 64
            return stack

    def all_stacks(self) -> list[TimerStack]:
        """Every live thread's stack, then those kept for their timeline or mergers, then the
        groups of ended threads."""
        with self.lock:
            self._fold_ended_threads()
            return [
                *(stack for _, stack in self.stacks_by_thread.values()),
                *self.kept,
                *self.ended_groups.values(),
            ]

    def _fold_ended_threads(self) -> None:
        # The main thread counts as ended once the interpreter shuts down, which is when the
        # end-of-run dump takes its tree: that tree must stay the one dumped, not a folded copy.
        ended = [
            ident
            for ident, (thread, _) in self.stacks_by_thread.items()
            if not thread.is_alive() and thread is not threading.main_thread()
        ]
        for ident in ended:
            self._fold(*self.stacks_by_thread.pop(ident))
        # A stack kept for its recorded events goes once they have been cleared or drained.
        self.kept = [stack for stack in self.kept if stack.mergers or _holds_events(stack.timeline)]

    def _fold(self, thread: threading.Thread, stack: TimerStack) -> None:
        """Fold the stack of ``thread``, which has ended and is no longer registered."""
        if stack.mergers:
            self.kept.append(stack)  # its mergers dump their workers with it
            return
        stack.settle()
        if stack.root.children or stack.gauges:
            group = self._group_for(stack.thread_name)
            group.root.add(stack.root)
            group.ended_threads += 1
            # The root of a group counts no runs of its own; its extremes are those of the
            # threads it holds, each thread's run being its outermost blocks back to back.
            thread_run = sum(child.total for child in stack.root.children.values())
            group.root.min = min(group.root.min, thread_run)
            group.root.max = max(group.root.max, thread_run)
            for name, gauge in stack.gauges.items():
                existing = group.gauges.get(name)
                if existing is None:
                    group.gauges[name] = gauge.copy()
                else:
                    existing.merge(gauge)
        if _holds_events(stack.timeline):
            # The tree is folded; the recorded events keep their thread's own track.
            stack.root = stack.current = TimerNode("root", None, stack)
            stack.gauges = {}
            self.kept.append(stack)

    def _group_for(self, thread_name: str) -> TimerStack:
        pattern = re.sub(r"\d+", "N", thread_name)
        if pattern not in self.ended_groups and len(self.ended_groups) >= ENDED_THREAD_GROUPS:
            pattern = "other"
        group = self.ended_groups.get(pattern)
        if group is None:
            group = self.ended_groups[pattern] = TimerStack(f"ended:{pattern}")
            group.holds_ended_threads = True
            group.timeline = None
        return group


def _holds_events(timeline: Any) -> bool:
    return timeline is not None and bool(timeline.spans or timeline.instants or timeline.counters)


_new_thread_timeline: Callable[[], Any] | None = None
"""Set by ``profiler.recording.events`` while recording: makes the timeline buffers of a new stack."""

_registry = _StackRegistry()
_thread_local = threading.local()
_enabled = os.environ.get("RLPROF_DISABLE", "").strip().lower() not in {"1", "true", "yes", "on"}
plain_blocks = _enabled
"""True while timing is on and no companion watches blocks (timeline recording, memory sampling,
NVTX ranges, profiler scopes): a block's run is then fully described by its start and end
stamps, so a hot path may time it from stamps it takes itself (see :class:`PhasedBlock`) rather
than enter it. Read it as ``timers.plain_blocks`` each time: it changes as companions come and go."""


def _forget_parent_timers() -> None:
    """Give a forked child empty stacks, so that its payloads never repeat the parent's tree."""
    global _registry, _thread_local
    _registry = _StackRegistry()
    _thread_local = threading.local()


os.register_at_fork(after_in_child=_forget_parent_timers)


def _current_thread_stack() -> TimerStack:
    try:
        return _thread_local.stack  # type: ignore[no-any-return]
    except AttributeError:
        stack = _thread_local.stack = _registry.stack_for_thread(threading.current_thread())
        return stack


def get_timer_stack_for_thread(thread: threading.Thread) -> TimerStack:
    """The stack that ``thread`` times into; created empty on first request.

    For a thread that has ended: the stack its timers are folded into, shared with the ended
    threads of the same name pattern (see :func:`all_timer_stacks`).
    """
    return _registry.stack_for_thread(thread)


def _resolve(timer_stack: TimerStack | None) -> TimerStack:
    return _current_thread_stack() if timer_stack is None else timer_stack


class _DisabledBlock:
    """What ``hierarchical_timer`` returns while profiling is off: enters and exits, does nothing.

    ``as`` gives the block itself, which takes what ML-Agents' trainer code does to the node of
    an open block (``merge`` worker trees, ``add_time``) and records none of it, so that code
    runs unchanged with profiling off.
    """

    __slots__ = ()

    def __enter__(self) -> _DisabledBlock:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        return None

    def merge(self, other: Any, root_name: str | None = None, is_parallel: bool = True) -> None:
        return None

    def add_time(self, elapsed: float) -> None:
        return None


_DISABLED_BLOCK = _DisabledBlock()


def hierarchical_timer(
    name: str, timer_stack: TimerStack | None = None, device: str | None = None, cuda_sync: bool = False
) -> Any:
    """Time the ``with`` block as the child ``name`` of whichever block is open in this thread.

    ``as`` gives the :class:`TimerNode` (while profiling is disabled, a stand-in whose ``merge``
    and ``add_time`` record nothing). Blocks must nest
    within a thread, as ``with`` statements do. An exception inside the block still closes it,
    counts it in the node's ``errors`` and propagates unchanged.

    ``device="cuda"`` (or ``"cuda:1"``) also times the block's work on that GPU, which the host
    time misses (it sees kernels launched, not run); ``cuda_sync=True`` synchronises the device
    instead, at a cost. See ``profiler.gpu.device_time``.
    """
    # The common case first, in as few steps as possible: timing on, the calling thread's stack
    # already made, a block that ran here before. Everything else takes the slow path.
    if _enabled and timer_stack is None and device is None:
        try:
            return _thread_local.stack.current.children[name]
        except (AttributeError, KeyError):
            pass
    if not _enabled:
        return _DISABLED_BLOCK
    node = _resolve(timer_stack).current.get_child(name)
    if device is None:
        return node
    return _device_block(node, device, cuda_sync)


def _no_device_timing(node: TimerNode, device: str, cuda_sync: bool) -> Any:
    raise RuntimeError("hierarchical_timer(device=...) needs profiler.gpu, which was not imported")


# What times a block on a device: profiler.gpu.device_time's, set as it is imported (timers
# imports nothing of rlprof).
_device_block: Callable[[TimerNode, str, bool], Any] = _no_device_timing


def set_device_block(make_block: Callable[[TimerNode, str, bool], Any]) -> None:
    """Have ``hierarchical_timer(name, device=...)`` return ``make_block(node, device, cuda_sync)``."""
    global _device_block
    _device_block = make_block


FOLD_AT_RUNS = 1024
"""A phased block folds the runs it holds into its nodes once it holds this many: seldom enough
that folding costs a run next to nothing, often enough that the runs stay in cache."""


class PhasedBlock:
    """A block timed from clock stamps its caller takes, its run cut into consecutive phases.

    ``with hierarchical_timer(...)`` costs a function call and two special-method calls per
    block, which on a path taken thousands of times a second, through several nested blocks
    (a vector env's step: the step, then sending, waiting and receiving), is most of what
    profiling adds to it. Here a run costs one call to :meth:`open`, a clock read where each
    phase ends, and one call to :meth:`close`, and leaves the tree exactly as the nested
    ``with`` blocks would: the block as the child ``name`` of the block open in the calling
    thread, each phase a child of it that ends where the next one begins, with the same
    totals, counts, per-call extremes and errors (the nodes of all phases are made at the first
    run, where ``with`` blocks make a phase's node when it is first entered). While the block is
    open it is the thread's open block, so blocks opened meanwhile (and trees merged under it)
    nest under it.

    ::

        clock = step_block.open()
        if clock is None:            # not timed this way now: use `with` blocks
            ...
        try:
            send()
            sent = clock()
            wait()
        except BaseException:
            step_block.fail(sent)    # the phase ends reached so far
            raise
        step_block.close(sent)

    A closed run is not added to the nodes at once: its stamps go to :attr:`runs`, and the runs
    are folded into the nodes in bulk, with numpy (:meth:`fold`): when :data:`FOLD_AT_RUNS` are
    held, and before anything reads the tree (:meth:`TimerStack.settle`, which every reader
    calls: dumps, payloads, :func:`get_timer_root`). Adding a run to four nodes as it closed
    cost several times what the same lines cost in a loop, inside a vector env's real steps
    (``benchmarks/profiling_overhead.py``): the trainer sleeps while its workers step, and what
    it touches then is, most likely, no longer in its caches. Code that holds a node and reads
    its figures directly calls :meth:`fold` first.

    The hottest callers close a run inline, as :meth:`close` does: set the stack's ``current``
    back to :attr:`parent`, append ``(start, *phase_ends, end, *extra)`` to :attr:`runs`,
    ``start`` being ``node._start``, and fold once :data:`FOLD_AT_RUNS` are held. Extra columns
    (numbers, or None) go to ``on_fold`` at each fold, as a table with a row per run: float64,
    or object when some run carried a None.

    :meth:`open` returns None while timing is off or paused, or while a companion watches
    every block (timeline recording, memory sampling, NVTX ranges, profiler scopes): those
    need each block's own entry and exit, so the caller times its phases with ``with`` blocks
    then. A phased block is used by one thread at a time; any thread may fold it.
    """

    __slots__ = (
        "name",
        "phase_names",
        "node",
        "parent",
        "stack",
        "runs",
        "on_fold",
        "_phases",
        "_phase_ends",
        "_fold_lock",
        "__weakref__",
    )

    def __init__(
        self, name: str, phase_names: tuple[str, ...] = (), on_fold: Callable[[Any], None] | None = None
    ) -> None:
        self.name = name
        self.phase_names = tuple(phase_names)
        # The block's node, the block it hangs under and the stack it was last opened in (None
        # before that): read them, never set them.
        self.node: TimerNode | None = None
        self.parent: TimerNode | None = None
        self.stack: TimerStack | None = None
        # The runs not folded into the nodes yet: start, the phase ends, end, any extra columns.
        self.runs: list[tuple[Any, ...]] = []
        self.on_fold = on_fold
        self._phases: tuple[TimerNode, ...] = ()
        # How many stamps close() takes: where each phase but the last ended.
        self._phase_ends = max(len(self.phase_names) - 1, 0)
        self._fold_lock = threading.Lock()

    def open(self) -> Callable[[], float] | None:
        """Open the block in the calling thread and return the clock to stamp phase ends with
        (the timers' clock); None, opening nothing, when it cannot be timed this way now."""
        if not plain_blocks:
            return None
        try:
            stack = _thread_local.stack
        except AttributeError:
            stack = _current_thread_stack()
        if stack.current is not self.parent:
            self._attach(stack)
        node = self.node
        stack.current = node
        node._start = _clock()  # type: ignore[union-attr]
        return _clock

    def _attach(self, stack: TimerStack) -> None:
        """Fold the runs held so far into the nodes they ran in, then hang the block's nodes
        under the block open in ``stack`` (found once per parent, not per run)."""
        parent = stack.current
        with self._fold_lock:
            self._fold_held()
            node = self.node = parent.get_child(self.name)
            self._phases = tuple(node.get_child(phase) for phase in self.phase_names)
            self.parent = parent
            self.stack = stack
        stack.deferred.add(self)

    def close(self, *phase_ends: float) -> None:
        """Close the block now; ``phase_ends`` are the stamps at which all phases but the last
        ended (the last one ends now)."""
        end = _clock()
        self.stack.current = self.parent  # type: ignore[union-attr]
        if len(phase_ends) != self._phase_ends:
            raise TypeError(f"{self.name}: close() takes {self._phase_ends} phase ends, got {len(phase_ends)}")
        runs = self.runs
        runs.append((self.node._start, *phase_ends, end))  # type: ignore[union-attr]
        if len(runs) >= FOLD_AT_RUNS:
            self.fold()

    def fail(self, *phase_ends: float | None) -> None:
        """Close the block now, as an exception leaving it: the phases that ended (stamps in
        ``phase_ends``; None for one not reached) count normally, the block and the phase that
        was running count the run and an error, later phases nothing."""
        end = _clock()
        node: TimerNode = self.node  # type: ignore[assignment]
        self.stack.current = self.parent  # type: ignore[union-attr]
        self.fold()
        start = node._start
        _add_run(node, end - start)
        node.errors += 1
        reached = [stamp for stamp in phase_ends if stamp is not None]
        for phase, phase_end in zip(self._phases, reached):
            _add_run(phase, phase_end - start)
            start = phase_end
        if len(reached) < len(self._phases):
            running = self._phases[len(reached)]
            _add_run(running, end - start)
            running.errors += 1

    def fold(self) -> None:
        """Add the runs held to the block's nodes, and their extra columns to ``on_fold``."""
        with self._fold_lock:
            self._fold_held()

    def discard(self, stack: TimerStack) -> None:
        """Drop the runs held if they ran in ``stack``: it was reset, and its tree with them."""
        with self._fold_lock:
            if stack is self.stack:
                del self.runs[:]

    def _fold_held(self) -> None:
        runs = self.runs
        held = len(runs)
        if not held:
            return
        # Only the runs taken are removed: the owner thread may be appending one meanwhile.
        taken = runs[:held]
        del runs[:held]
        import numpy  # a core dependency; imported by the first fold, not with the timers

        columns = len(taken[0])
        if len(taken[-1]) != columns:
            raise TypeError(f"{self.name}: runs of different widths were appended")
        # fromiter reads a None as NaN, which no clock gives: a NaN is a None in an extra column.
        table = numpy.fromiter(chain.from_iterable(taken), numpy.float64, held * columns).reshape(held, columns)
        if numpy.isnan(table).any():
            table = numpy.array(taken, dtype=object)
        width = self._phase_ends + 2
        stamps = table[:, :width].astype(numpy.float64, copy=False)
        _add_runs(self.node, stamps[:, -1] - stamps[:, 0])  # type: ignore[arg-type]
        if self._phases:
            for phase, elapsed in zip(self._phases, numpy.diff(stamps, axis=1).T):
                _add_runs(phase, elapsed)
        if self.on_fold is not None and table.shape[1] > width:
            self.on_fold(table[:, width:])


def _add_runs(node: TimerNode, elapsed: Any) -> None:
    """Count closed runs of ``elapsed`` seconds each (a numpy array), as as many
    :meth:`TimerNode.__exit__` would."""
    node.total += float(elapsed.sum())
    node.count += len(elapsed)
    longest, shortest = float(elapsed.max()), float(elapsed.min())
    if longest > node.max:
        node.max = longest
    if shortest < node.min:
        node.min = shortest


def _add_run(node: TimerNode, elapsed: float) -> None:
    """Count one closed run of ``elapsed`` seconds, as :meth:`TimerNode.__exit__` does."""
    node.total += elapsed
    node.count += 1
    if elapsed > node.max:
        node.max = elapsed
    if elapsed < node.min:
        node.min = elapsed


@overload
def timed(function: FunctionType, /) -> FunctionType: ...
@overload
def timed(*, name: str | None = None) -> Callable[[FunctionType], FunctionType]: ...


def timed(function: Any = None, /, *, name: str | None = None) -> Any:
    """Decorate a function so every call is a timer block named by its ``__qualname__``.

    Use bare (``@timed``) or with a name (``@timed(name="policy.forward")``). The wrapper keeps the
    function's name, docstring and signature, so tools that introspect it keep working.
    """

    def decorate(function: FunctionType) -> FunctionType:
        block_name = name or function.__qualname__

        @functools.wraps(function)
        def timed_function(*args: Any, **kwargs: Any) -> Any:
            describe = _describe_arguments
            if describe is None:
                with hierarchical_timer(block_name):
                    return function(*args, **kwargs)
            # What the block's enter observers read of its arguments (see set_argument_describer):
            # set just before the block opens and cleared as soon as it is open, so that no
            # block but this one sees it.
            local = _thread_local
            local.block_arguments = describe(args, kwargs)
            with hierarchical_timer(block_name):
                local.block_arguments = None
                return function(*args, **kwargs)

        return timed_function  # type: ignore[return-value]

    if function is None:
        return decorate
    return decorate(function)


def set_gauge(name: str, value: Any, timer_stack: TimerStack | None = None) -> None:
    """Record the latest ``value`` of a measurement, keeping its min, max and count.

    ``value`` may be any real number: a float or int, a NumPy scalar or 0-d array, a torch
    scalar tensor, a bool, a Fraction or Decimal. It is stored as a Python float; anything else
    raises ``TypeError`` naming the gauge (see :func:`gauge_value`).
    """
    if _enabled:
        _resolve(timer_stack).set_gauge(name, value)


def merge_gauges(gauges: dict[str, GaugeNode], timer_stack: TimerStack | None = None) -> None:
    """Fold gauges recorded elsewhere (another thread's or process's) into a stack's gauges.

    ML-Agents' trainer does this with each trainer thread's gauges after joining it. A gauge
    the stack already has keeps the value set later (see :meth:`GaugeNode.merge`); a new one is
    copied in, so that ``gauges`` stays independent of the stack it came from.
    """
    own = _resolve(timer_stack).gauges
    for name, gauge in list(gauges.items()):
        existing = own.get(name)
        if existing is None:
            own[name] = gauge.copy()
        else:
            existing.merge(gauge)


def add_metadata(key: str, value: Any, timer_stack: TimerStack | None = None) -> None:
    """Attach a string to the run's metadata (kept even while profiling is disabled)."""
    _resolve(timer_stack).add_metadata(key, value)


def get_timer_root(timer_stack: TimerStack | None = None) -> TimerNode:
    """The root node of a stack's tree, its total set to the run time so far (see
    :meth:`TimerStack.get_root`); its children are the outermost blocks."""
    return _resolve(timer_stack).get_root()


def reset_timers(timer_stack: TimerStack | None = None) -> None:
    """Forget everything a stack recorded (the calling thread's by default)."""
    _resolve(timer_stack).reset()


def all_timer_stacks() -> list[TimerStack]:
    """Every stack of this process: each live thread's, then those of threads that ended.

    Threads that have ended are folded first, one stack per group of thread names (see
    :class:`_StackRegistry`); such a stack's ``ended_threads`` says how many threads it holds.
    """
    return _registry.all_stacks()


# --- which __enter__ and __exit__ a block runs ---------------------------------------------------
#
# The plain methods do only what every block needs. Companions need more, only while in use:
# timeline recording (profiler.recording.events: the span of every run), profiler scopes (profiler.control.scopes:
# the scope each run happened in) and memory sampling (profiler.recording.memory: a sample every N blocks,
# the allocations of each block). Rather than test flags on every block, the methods in force are
# swapped whenever what is needed changes, so that what is off costs nothing.

_plain_enter = TimerNode.__enter__
_plain_exit = TimerNode.__exit__
_base_exit: Callable[[TimerNode, Any, Any, Any], None] = _plain_exit
_after_exit: Callable[[TimerNode], None] | None = None
# Each companion's (on_enter, on_exit) observers, by companion name, in the order they came.
_block_observers: dict[str, tuple[Callable[[TimerNode], None] | None, Callable[[TimerNode], None] | None]] = {}
# How @timed describes its arguments for the observers (None: it does not; see below).
_describe_arguments: Callable[[tuple[Any, ...], dict[str, Any]], Any] | None = None


def set_span_recording(recording: bool) -> None:
    """Make every block's exit record its span on the thread's timeline (``profiler.recording.events``)."""
    global _base_exit
    _base_exit = TimerNode._exit_and_record if recording else _plain_exit
    _install_block_methods()


def set_exit_hook(hook: Callable[[TimerNode], None] | None) -> None:
    """Call ``hook(node)`` after every block's exit (None: no hook), for ``profiler.control.scopes``."""
    global _after_exit
    _after_exit = hook
    _install_block_methods()


def observe_blocks(
    on_enter: Callable[[TimerNode], None] | None,
    on_exit: Callable[[TimerNode], None] | None,
    *,
    companion: str,
) -> None:
    """Call ``on_enter(node)`` as each block opens, before its clock starts, and ``on_exit(node)``
    as it closes, after its clock stops, so that what they do is not timed as the block's own.

    ``companion`` names who observes (``"memory"`` for ``profiler.recording.memory``, ``"nvtx"`` for
    ``profiler.gpu``): several companions observe at once, each replacing only its own observers.
    ``None`` for both takes the companion's observers out, and then nothing of them is left on
    the path a block takes. Observers that came later wrap those before them: the first to see a
    block open is the last to see it close, so that what they open nests.
    """
    if on_enter is None and on_exit is None:
        _block_observers.pop(companion, None)
    else:
        _block_observers[companion] = (on_enter, on_exit)
    _install_block_methods()


def set_argument_describer(describe: Callable[[tuple[Any, ...], dict[str, Any]], Any] | None) -> None:
    """Have every ``@timed`` call hand ``describe(args, kwargs)`` to the enter observers of its block
    (as :func:`block_arguments`), or stop that (None).

    For ``profiler.gpu``'s ``record_shapes``: describing arguments costs, so only a ``@timed``
    call made while a describer is set pays for it.
    """
    global _describe_arguments
    _describe_arguments = describe


def block_arguments() -> Any:
    """In an enter observer: what the describer made of the arguments of the ``@timed`` call
    whose block is opening in this thread; None for any other block."""
    return getattr(_thread_local, "block_arguments", None)


def _install_block_methods() -> None:
    """Put the cheapest ``__enter__`` and ``__exit__`` that do what is switched on onto TimerNode."""
    exit_method = _base_exit
    if _after_exit is not None:
        exit_method = _observed_exit(exit_method, _after_exit)
    enter_method = _plain_enter
    for on_enter, on_exit in _block_observers.values():
        if on_enter is not None:
            enter_method = _observed_enter(enter_method, on_enter)
        if on_exit is not None:
            exit_method = _observed_exit(exit_method, on_exit)
    TimerNode.__enter__ = enter_method  # type: ignore[method-assign]
    TimerNode.__exit__ = exit_method  # type: ignore[method-assign]
    _note_plain_blocks()


def _note_plain_blocks() -> None:
    global plain_blocks
    plain_blocks = _enabled and TimerNode.__enter__ is _plain_enter and TimerNode.__exit__ is _plain_exit


def _observed_enter(
    timed_enter: Callable[[TimerNode], TimerNode], observer: Callable[[TimerNode], None]
) -> Callable[[TimerNode], TimerNode]:
    def __enter__(self: TimerNode) -> TimerNode:
        observer(self)
        return timed_enter(self)

    return __enter__


def _observed_exit(
    timed_exit: Callable[..., None], observer: Callable[[TimerNode], None]
) -> Callable[..., None]:
    def __exit__(self: TimerNode, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        timed_exit(self, exc_type, exc_value, traceback)
        observer(self)

    return __exit__


def now() -> float:
    """The clock every timer reads, in seconds (monotonic; its origin is arbitrary)."""
    return _clock()


def current_clock() -> Callable[[], float]:
    """The function every timer reads the time with (see :func:`set_clock`), for a hot path that
    reads it itself: one call less per read than :func:`now`."""
    return _clock


def set_clock(clock: Callable[[], float]) -> Callable[[], float]:
    """Make every timer read ``clock`` (seconds, monotonic) and return the clock used before.

    For tests and simulations: a fake clock makes timings exact.
    """
    global _clock
    previous = _clock
    _clock = clock
    return previous


def enable() -> None:
    """Turn timing back on after :func:`disable`."""
    global _enabled
    _enabled = True
    _note_plain_blocks()


def disable() -> None:
    """Turn timing off: every block, decorator and gauge becomes a no-op that records nothing."""
    global _enabled
    _enabled = False
    _note_plain_blocks()


def is_enabled() -> bool:
    return _enabled
