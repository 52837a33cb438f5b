"""MXNet's ``Domain`` and what it makes: ``Task``, ``Frame``, ``Event``, ``Counter``, ``Marker``.

One module, because a domain makes each of these objects and each of them belongs to a domain.

**Domain.** The category (``cat``) of their events in the Chrome trace; it labels the blocks its
tasks and frames time (``"domain"`` in the dump), and ``rlprof analyze --domain NAME`` keeps only
those blocks.

**Task, Frame, Event** (MXNet's duration objects). Each run, from ``start()`` to ``stop()`` (or
the ``with`` block the object opens), is a run of a timer block named after the object, under the
block open in the thread when it started, labelled in the tree with its domain and object type;
recorded on the timeline (when recording), its span carries the domain as its category. So a
task is timed, merged, dumped and analysed like any block, and blocks opened while it runs nest
inside it.

Unlike ``with`` blocks, ``start()`` and ``stop()`` need not nest and may be called from different
functions. A run stopped while blocks opened after its start are still open ends there; those
blocks carry on, and the blocks opened after they close go to the task's parent: the open block
directly inside the task is re-pointed at the task's parent until the task starts again. Both
calls must come from the same thread, since each thread has its own open blocks.

A run belongs to the state the profiler was in at its start (as a block does): started while
paused or stopped, it records nothing, even if it stops after ``resume()``.

**Counter.** Every change is a reading of the gauge ``{domain}.{name}`` (latest value, min, max,
how many changes; in the dump's ``gauges``) and, while the timeline is recorded, a sample on its
counter track, in the domain's trace category. While the profiler is paused or stopped the
counter keeps counting but records nothing.

**Marker.** MXNet's marker scopes map to the Chrome trace's instant scopes as MXNet maps them:
``global`` to ``g`` (a line across every process), ``thread`` to ``t`` (the thread's track), and
``process``, ``task`` and ``marker`` to ``p`` (the process's tracks). A mark is a timeline event:
it is kept while the timeline is recorded (``set_state("run")`` records it, as does
``profiler.start_recording()``) and the profiler runs, and left out otherwise.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from profiler.control.scopes import note_current_scope
from profiler.recording.events import recording_timeline
from profiler.timing import timers
from profiler.timing.timers import TimerNode, TimerStack

__all__ = ["MARKER_SCOPES", "Counter", "Domain", "Event", "Frame", "Marker", "Task"]


class Domain:
    """A profiling domain named ``name``, as MXNet's."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Domain: the name must be a non-empty string, got {name!r}")
        self.name = name

    def new_task(self, name: str) -> Task:
        return Task(self, name)

    def new_frame(self, name: str) -> Frame:
        return Frame(self, name)

    def new_counter(self, name: str, value: Any = None) -> Counter:
        return Counter(self, name, value)

    def new_marker(self, name: str) -> Marker:
        return Marker(self, name)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Domain({self.name!r})"


# --- durations: Task, Frame, Event ---------------------------------------------------------------


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


# --- Counter -----------------------------------------------------------------------------------


class Counter:
    """A counter of ``domain`` named ``name``, set to ``value`` if given (MXNet's arguments)."""

    def __init__(self, domain: Domain, name: str, value: Any = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Counter: the name must be a non-empty string, got {name!r}")
        self.domain = domain
        self.name = name
        self.gauge_name = f"{domain.name}.{name}"
        self.value: Any = 0
        if value is not None:
            self.set_value(value)

    def set_value(self, value: Any) -> None:
        """Set the counter to ``value`` (any real number; see ``profiler.set_gauge``)."""
        timers.gauge_value(self.gauge_name, value)  # a bad value is refused before it is kept
        self.value = value
        if timers.is_enabled():
            timers._resolve(None).set_gauge(self.gauge_name, value, (("cat", self.domain.name),))

    def increment(self, delta: Any = 1) -> None:
        self.set_value(self.value + delta)

    def decrement(self, delta: Any = 1) -> None:
        self.set_value(self.value - delta)

    def __iadd__(self, delta: Any) -> Counter:
        self.increment(delta)
        return self

    def __isub__(self, delta: Any) -> Counter:
        self.decrement(delta)
        return self

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Counter({self.domain!r}, {self.name!r}, value={self.value!r})"


# --- Marker ------------------------------------------------------------------------------------


MARKER_SCOPES = {"global": "g", "process": "p", "thread": "t", "task": "p", "marker": "p"}
"""MXNet's marker scope -> the trace format's instant scope."""


class Marker:
    """A marker of ``domain`` named ``name``."""

    def __init__(self, domain: Domain, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Marker: the name must be a non-empty string, got {name!r}")
        self.domain = domain
        self.name = name

    def mark(self, scope: str = "process") -> None:
        """Mark this moment on the timeline, reaching ``scope`` (one of :data:`MARKER_SCOPES`)."""
        instant_scope = MARKER_SCOPES.get(scope) if isinstance(scope, str) else None
        if instant_scope is None:
            raise ValueError(
                f"Marker.mark: scope must be one of {', '.join(MARKER_SCOPES)}, got {scope!r}"
            )
        timeline = recording_timeline()
        if timeline is not None and timers.is_enabled():
            details = (("cat", self.domain.name), ("scope", instant_scope))
            timeline.add_instant(self.name, timers.now(), details)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Marker({self.domain!r}, {self.name!r})"
