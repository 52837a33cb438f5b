"""MXNet's duration objects — ``Task``, ``Frame``, ``Event`` — as timer blocks and timeline spans.

Each run, from ``start()`` to ``stop()`` (or the ``with`` block the object opens), is a run of a
timer block named after the object, under the block open in the thread when it started, labelled
in the tree with its domain and object type; recorded on the timeline (when recording), its span
carries the domain as its category. So a task is timed, merged, dumped and analysed like any
block, and blocks opened while it runs nest inside it.

Unlike ``with`` blocks, ``start()`` and ``stop()`` need not nest and may be called from different
functions. A run stopped while blocks opened after its start are still open ends there; those
blocks carry on, and the blocks opened after they close go to the task's parent: the open block
directly inside the task is re-pointed at the task's parent until the task starts again. Both
calls must come from the same thread, since each thread has its own open blocks.

A run belongs to the state the profiler was in at its start (as a block does): started while
paused or stopped, it records nothing, even if it stops after ``resume()``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, ClassVar

from profiler.timing import timers
from profiler.recording.events import recording_timeline
from profiler.control.scopes import note_current_scope
from profiler.timing.timers import TimerNode, TimerStack

if TYPE_CHECKING:
    from profiler.control.domain import Domain

__all__ = ["Event", "Frame", "Task"]


class _Run:
    """One run in progress: where it started and when."""

    __slots__ = ("stack", "node", "start", "thread")

    def __init__(self, stack: TimerStack, node: TimerNode, start: float) -> None:
        self.stack = stack
        self.node = node
        self.start = start
        self.thread = threading.current_thread()


_NOT_RECORDED = object()
"""The run of an object started while the profiler was paused or stopped."""


class _Duration:
    """What ``Task``, ``Frame`` and ``Event`` share: start, stop, ``with``, and their block."""

    object_type: ClassVar[str]

    def __init__(self, domain: Domain | None, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{type(self).__name__}: the name must be a non-empty string, got {name!r}")
        self.name = name
        self.domain = domain
        self._run: _Run | object | None = None

    def start(self) -> None:
        """Open a run: a block under the block open in this thread now."""
        if self._run is not None:
            raise RuntimeError(f"{self._description()} is already started: stop() it first")
        if not timers.is_enabled():
            self._run = _NOT_RECORDED
            return
        stack = timers._resolve(None)
        node = stack.current.get_child(self.name)
        node.add_labels(self._domain_name(), self.object_type, None)
        # An earlier run stopped out of order re-pointed the block open inside it; point it back.
        for child in node.children.values():
            child.parent = node
        stack.current = node
        self._run = _Run(stack, node, timers.now())

    def stop(self) -> None:
        """Close the run started last, recording it (see the module docstring)."""
        self._close(error=False)

    def _close(self, *, error: bool) -> None:
        run = self._run
        if run is None:
            raise RuntimeError(f"{self._description()} was not started")
        if run is _NOT_RECORDED:
            self._run = None
            return
        assert isinstance(run, _Run)
        if run.thread is not threading.current_thread():
            raise RuntimeError(
                f"{self._description()} was started in thread {run.thread.name!r}: stop it there "
                "(each thread has its own open blocks)"
            )
        end = timers.now()
        self._run = None
        elapsed = end - run.start
        node = run.node
        node.add_runs(elapsed, 1, 1 if error else 0, elapsed, elapsed)
        note_current_scope(node)
        _leave(run.stack, node)
        timeline = recording_timeline(run.stack)
        if timeline is not None:
            timeline.add_span(self.name, run.start, end, self._details())

    def __enter__(self) -> _Duration:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        self._close(error=exc_type is not None)

    def _domain_name(self) -> str | None:
        return None if self.domain is None else self.domain.name

    def _details(self) -> tuple[tuple[str, Any], ...]:
        """What the span carries on the timeline: the domain as its category, the object type."""
        domain = self._domain_name()
        category = () if domain is None else (("cat", domain),)
        return (*category, ("object_type", self.object_type))

    def _description(self) -> str:
        return f"{type(self).__name__} {self.name!r}"

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.domain!r}, {self.name!r})"


def _leave(stack: TimerStack, node: TimerNode) -> None:
    """Make ``node`` no longer an open block of ``stack``."""
    if stack.current is node:
        stack.current = node.parent  # type: ignore[assignment]
        return
    # Stopped out of order: the block opened directly inside it is still open. Re-point that one
    # at the task's parent, so that closing it does not reopen the task (start() undoes this).
    inner: TimerNode | None = stack.current
    while inner is not None and inner.parent is not node:
        inner = inner.parent
    if inner is not None:
        inner.parent = node.parent


class Task(_Duration):
    """A unit of work of one thread (MXNet's ``Task``): every run is a run of one block."""

    object_type = "task"

    def __init__(self, domain: Domain, name: str) -> None:
        super().__init__(domain, name)


class Frame(_Duration):
    """A numbered period (MXNet's ``Frame``), as a frame of a game: each run is numbered from 1,
    on its span (``frame``), and ``rlprof analyze`` and the report show the frames' count, mean,
    min and max time and rate."""

    object_type = "frame"

    def __init__(self, domain: Domain, name: str) -> None:
        super().__init__(domain, name)
        self.frames = 0
        """Frames completed (and recorded) so far."""

    def _close(self, *, error: bool) -> None:
        recorded = isinstance(self._run, _Run)
        super()._close(error=error)
        if recorded:
            self.frames += 1

    def _details(self) -> tuple[tuple[str, Any], ...]:
        return (*super()._details(), ("frame", self.frames + 1))


class Event(_Duration):
    """A region of code (MXNet's ``Event``, which belongs to no domain)."""

    object_type = "event"

    def __init__(self, name: str) -> None:
        super().__init__(None, name)
