"""A timer node: one named block of the tree, its figures, and the clock every block reads.

A block *is* its tree node. ``hierarchical_timer(name)`` finds (or, the first time, creates) the
child of the currently open node and returns it; the node is its own context manager, so that
after a block's first entry nothing is allocated per call: no generator, no dict, no list push.
The open block is a single ``current`` pointer on its stack, walked back through ``parent`` on
exit, instead of a list.

The clock lives here, as this module's global ``_clock``, because the node's ``__enter__`` and
``__exit__`` read it as a global: a method with no defaults is called through the interpreter's
cheapest path (see benchmarks/timer_overhead.py), and :func:`set_clock` only has to rebind one
name (and tell the accelerator).

Two cores time a block. The Python ``__enter__`` and ``__exit__`` below are the reference; the
optional C accelerator (``_timer_core.c``, loaded by :mod:`profiler.timing.accelerator`) makes
the same two methods in C, over the same slots, with the same results, and is what blocks run
where it was built (:func:`accelerated` says which core runs). Either way the methods in force are
:data:`PLAIN_ENTER` and :data:`PLAIN_EXIT`, which companions wrap (see
:mod:`profiler.timing.block_hooks`). This module imports nothing of rlprof but its accelerator.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Iterable, Iterator, Protocol

from profiler.timing.accelerator import extension as _accelerator
from profiler.timing.accelerator import unavailable_reason

__all__ = [
    "FOLDED_BLOCK_NAME",
    "MAX_DEPTH",
    "PLAIN_ENTER",
    "PLAIN_EXIT",
    "PYTHON_ENTER",
    "PYTHON_EXIT",
    "PYTHON_RECORDING_EXIT",
    "RECORDING_EXIT",
    "TIMER_FORMAT_VERSION",
    "NodeStack",
    "TimerNode",
    "accelerated",
    "current_clock",
    "now",
    "set_clock",
    "use_compiled_core",
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


class NodeStack(Protocol):
    """What a node needs of the stack it belongs to (a
    :class:`~profiler.timing.timer_stack.TimerStack`): the pointer to the open block, which
    entering and leaving a block moves; the flag that tells the next payload its blocks changed;
    the timeline buffers a recorded span goes to. Named here so that the node's module does not
    import the stack's, which holds nodes."""

    current: TimerNode
    shape_changed: bool
    timeline: Any


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
        "_bound_methods",
    )

    def __init__(
        self, name: str = "root", parent: TimerNode | None = None, stack: NodeStack | None = None
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
        # Set on the blocks that MXNet-style objects time (see profiler.control.domain): the domain
        # they belong to and the object: "task", "frame" or "event". None on plain blocks.
        self.domain: str | None = None
        self.object_type: str | None = None
        # The profiler scopes (profiler.control.scopes) the block ran in, once it ran in one.
        self.scopes: set[str] | None = None
        self._stack = stack
        self._start = 0.0
        # The C accelerator keeps this node's bound __enter__ and __exit__ here, made at the
        # first ``with``: so that a block allocates nothing (see _timer_core.c's BlockMethod).
        self._bound_methods: Any = None

    # The pure-Python core (PYTHON_ENTER and PYTHON_EXIT below; the C accelerator's methods,
    # where loaded, replace these two on the class and must give the same results). The clock
    # is read through the module global ``_clock`` rather than bound as a default argument: a
    # method with no defaults is called through the interpreter's cheapest path (see
    # benchmarks/timer_overhead.py), and set_clock only has to rebind one name.
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

    # While timeline recording is on, profiler.recording.events installs this as ``__exit__`` (or
    # the accelerator's copy, :data:`COMPILED_RECORDING_EXIT`): a separate method rather than a
    # branch in the plain one, so that recording off costs nothing.
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
    def stack(self) -> NodeStack | None:
        """The stack whose thread times this node (None: a detached tree)."""
        return self._stack

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
        self._bound_methods = None
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


_UNPICKLED_NODE_SLOTS = frozenset({"parent", "_stack", "_start", "_bound_methods"})


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


PYTHON_ENTER = TimerNode.__enter__
PYTHON_EXIT = TimerNode.__exit__
"""The pure-Python core: the reference the C accelerator matches, and the fallback where it was
not built or ``RLPROF_PURE_PYTHON=1`` keeps it off."""

COMPILED_ENTER, COMPILED_EXIT = (
    _accelerator.block_methods(TimerNode, _clock) if _accelerator is not None else (None, None)
)
"""The C accelerator's methods for :class:`TimerNode` (None where it is not loaded)."""

PYTHON_RECORDING_EXIT = TimerNode._exit_and_record
COMPILED_RECORDING_EXIT = _accelerator.recording_exit() if _accelerator is not None else None
"""The exit that also records the run's span on the timeline, in Python (the reference) and in C
(None where the accelerator is not loaded): a Python ``__exit__`` frame was most of what a
recorded block cost (about 3,400 instructions a block, against under 1,000 in C)."""

PLAIN_ENTER = PYTHON_ENTER if COMPILED_ENTER is None else COMPILED_ENTER
PLAIN_EXIT = PYTHON_EXIT if COMPILED_EXIT is None else COMPILED_EXIT
RECORDING_EXIT = PYTHON_RECORDING_EXIT if COMPILED_RECORDING_EXIT is None else COMPILED_RECORDING_EXIT
"""The methods a block runs while no companion watches blocks (see profiler.timing.block_hooks),
and the exit it runs while timeline recording is on: the C accelerator's where it is loaded, else
the Python ones. Read them as ``timer_node.PLAIN_ENTER`` each time: :func:`use_compiled_core`
changes them."""

TimerNode.__enter__ = PLAIN_ENTER  # type: ignore[method-assign]
TimerNode.__exit__ = PLAIN_EXIT  # type: ignore[method-assign]


def use_compiled_core(compiled: bool) -> None:
    """Make :data:`PLAIN_ENTER`, :data:`PLAIN_EXIT` and :data:`RECORDING_EXIT` the C accelerator's methods (``True``) or
    the Python ones (``False``); :func:`profiler.timing.block_hooks.use_compiled_core` then
    installs them. For comparing the two cores in one process: tests and benchmarks."""
    global PLAIN_ENTER, PLAIN_EXIT, RECORDING_EXIT
    if compiled and COMPILED_ENTER is None:
        raise RuntimeError(f"the C accelerator is not loaded: {unavailable_reason}")
    PLAIN_ENTER, PLAIN_EXIT, RECORDING_EXIT = (
        (COMPILED_ENTER, COMPILED_EXIT, COMPILED_RECORDING_EXIT) if compiled
        else (PYTHON_ENTER, PYTHON_EXIT, PYTHON_RECORDING_EXIT)
    )
    if _accelerator is not None:
        # hierarchical_timer's common case in C too, or every call through the Python function.
        _accelerator.use_compiled_lookup(compiled)


def accelerated() -> bool:
    """Whether blocks run the C accelerator's ``__enter__`` and ``__exit__`` (with a companion
    on, its Python wrappers call them); False: the pure-Python core runs."""
    return COMPILED_ENTER is not None and PLAIN_ENTER is COMPILED_ENTER


def now() -> float:
    """The clock every timer reads, in seconds (monotonic; its origin is arbitrary)."""
    return _clock()


if _accelerator is not None:
    # The same reading without a Python frame (the accelerator reads the clock set_clock sets):
    # a vector step's timing on the trainer's side reads it at every step.
    now = _accelerator.now  # noqa: F811


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
    if _accelerator is not None:
        _accelerator.set_clock(clock)
    _clock = clock
    return previous
