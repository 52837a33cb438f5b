"""A block timed from clock stamps its caller takes, its run cut into consecutive phases."""

from __future__ import annotations

import threading
from itertools import chain, repeat
from typing import Any, Callable

from profiler.timing import accelerator, block_hooks, timer_node, timers
from profiler.timing.timer_node import TimerNode, current_clock
from profiler.timing.timer_stack import TimerStack

__all__ = ["FOLD_AT_RUNS", "PhasedBlock", "add_run", "runs_table", "runs_table_in_python", "span_timeline",
           "take_held_runs"]


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
    are numbers, or None. ``on_fold`` gets the runs of each fold, as a table with a row per run
    (its stamps, then its extra columns): float64, or object when some run carried a None.

    While the timeline records (``timers.span_blocks``: ``rlprof run``'s default), a run's
    stamps are exactly the spans the ``with`` blocks would record on the thread's timeline:
    each phase ``(phase, its start, its end)``, then the block ``(name, start, end)``. They are
    added as the runs fold, in bulk, to the timeline of the stack the runs ran in: the first
    phase's spans of every run folded, then the next phase's, the block's last (a phase's
    spans before the block's, as ``with`` blocks exit). In the ring they therefore follow the
    spans of blocks that closed after them but before the fold (an enclosing block's among
    them). Every reader orders a thread's spans by start, the enclosing span first, so the
    trace, speedscope, the gaps between steps and the phases read the same spans; what differs
    is which spans a full ring drops (the oldest appended: up to a fold of a block's runs later
    than ``with`` blocks' would be).
    So that no span is lost or invented, the timeline's readers settle every stack first
    (:func:`profiler.recording.events.timeline_section`, a payload's drain), and so do
    :func:`~profiler.recording.events.clear_recording` and the switch of span recording
    (:func:`~profiler.timing.block_hooks.set_span_recording`): the runs held are folded with
    their spans recorded or not as they were taken.

    :meth:`open` returns None while timing is off or paused, or while a companion other than
    the timeline watches every block (memory sampling, NVTX ranges, profiler scopes): those
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
        "accumulator",
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
        # Runs held in another form than ``runs``, by a caller that counts them as they close (the
        # trainer's step record, envmanager.transport.step_stamps): its ``fold()`` adds them to
        # the nodes wherever these fold, its ``drop()`` forgets them where these are discarded.
        self.accumulator: Any = None
        self._phases: tuple[TimerNode, ...] = ()
        # How many stamps close() takes: where each phase but the last ended.
        self._phase_ends = max(len(self.phase_names) - 1, 0)
        self._fold_lock = threading.Lock()

    def open(self) -> Callable[[], float] | None:
        """Open the block in the calling thread and return the clock to stamp phase ends with
        (the timers' clock); None, opening nothing, when it cannot be timed this way now."""
        if not (timers.plain_blocks or timers.span_blocks):
            return None
        # timers.current_thread_stack() and current_clock() without their calls: this runs on
        # every step of a manager, where each Python call is a visible share of the step.
        try:
            stack = timers._thread_local.stack
        except AttributeError:  # the thread's first block
            stack = timers.current_thread_stack()
        if stack.current is not self.parent:
            self._attach(stack)
        node = self.node
        stack.current = node
        clock = timer_node._clock
        node._start = clock()  # type: ignore[union-attr]
        return clock

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
        end = current_clock()()
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
        end = current_clock()()
        node: TimerNode = self.node  # type: ignore[assignment]
        self.stack.current = self.parent  # type: ignore[union-attr]
        self.fold()
        start = node._start
        add_run(node, end - start)
        node.errors += 1
        reached = [stamp for stamp in phase_ends if stamp is not None]
        # The spans the `with` blocks would have recorded, in the order they exit.
        spans = []
        for phase, phase_end in zip(self._phases, reached):
            add_run(phase, phase_end - start)
            spans.append((phase.name, start, phase_end))
            start = phase_end
        if len(reached) < len(self._phases):
            running = self._phases[len(reached)]
            add_run(running, end - start)
            running.errors += 1
            spans.append((running.name, start, end))
        spans.append((node.name, node._start, end))
        timeline = self._span_timeline()
        if timeline is not None:
            timeline.add_spans(spans)

    def fold(self) -> None:
        """Add the runs held to the block's nodes, and hand them to ``on_fold``."""
        with self._fold_lock:
            self._fold_held()

    def discard(self, stack: TimerStack) -> None:
        """Drop the runs held if they ran in ``stack``: it was reset, and its tree with them."""
        with self._fold_lock:
            if stack is self.stack:
                del self.runs[:]
                if self.accumulator is not None:
                    self.accumulator.drop()

    def _fold_held(self) -> None:
        if self.accumulator is not None:
            self.accumulator.fold()
        taken = take_held_runs(self.runs)
        if not taken:
            return
        import numpy  # a core dependency; imported by the first fold, not with the timers

        columns = len(taken[0])
        if len(taken[-1]) != columns:
            raise TypeError(f"{self.name}: runs of different widths were appended")
        width = self._phase_ends + 2
        # A None reads as NaN, which no clock gives: a NaN is a None in an extra column.
        table = runs_table(taken, columns)
        if numpy.isnan(table).any():
            table = numpy.array(taken, dtype=object)
        stamps = table[:, :width].astype(numpy.float64, copy=False)
        timeline = self._span_timeline()
        if timeline is not None:
            if type(taken[0][0]) is float:
                _add_packed_run_spans(timeline, self.name, self.phase_names, stamps)
            else:  # a clock of other numbers (a test's): its readings kept as they are
                timeline.add_spans(_run_spans(self.name, self.phase_names, taken, width))
        _add_runs(self.node, stamps[:, -1] - stamps[:, 0])  # type: ignore[arg-type]
        if self._phases:
            for phase, elapsed in zip(self._phases, numpy.diff(stamps, axis=1).T):
                _add_runs(phase, elapsed)
        if self.on_fold is not None:
            self.on_fold(table)

    def _span_timeline(self) -> Any:
        """The timeline of the stack the runs ran in, while spans are recorded there; else None."""
        return span_timeline(self.stack)


def _add_packed_run_spans(timeline: Any, name: str, phase_names: tuple[str, ...], stamps: Any) -> None:
    """Add the spans that ``with`` blocks would have recorded for runs of float ``stamps`` (one
    row a run: start, the phase ends, end) to ``timeline`` packed
    (:mod:`profiler.recording.packed_spans`): each phase's, then the block's."""
    import numpy

    for column, phase_name in enumerate(phase_names):
        timeline.add_packed_spans(phase_name, numpy.ascontiguousarray(stamps[:, column:column + 2]).tobytes())
    whole = numpy.ascontiguousarray(stamps[:, [0, stamps.shape[1] - 1]])
    timeline.add_packed_spans(name, whole.tobytes())


def _run_spans(name: str, phase_names: tuple[str, ...], runs: list[tuple[Any, ...]],
               width: int) -> list[tuple[str, Any, Any]]:
    """The spans that ``with`` blocks would have recorded for ``runs`` (each ``width`` stamps
    first: start, the phase ends, end): each phase's, then the block's, a column at a time (the
    tuples made in C, by ``zip``: a loop over the runs cost half as much again)."""
    columns = list(zip(*runs))
    spans: list[tuple[str, Any, Any]] = []
    for phase_name, starts, ends in zip(phase_names, columns, columns[1:width]):
        spans.extend(zip(repeat(phase_name), starts, ends))
    spans.extend(zip(repeat(name), columns[0], columns[width - 1]))
    return spans


def take_held_runs(runs: list[Any]) -> list[Any]:
    """Remove and return the runs ``runs`` holds now; call it holding its owner's fold lock.

    Only the runs taken are removed: the thread that owns the timer may be appending one
    meanwhile, and that run stays for the next fold.
    """
    held = len(runs)
    taken = runs[:held]
    del runs[:held]
    return taken


def runs_table(runs: list[tuple[Any, ...]], columns: int) -> Any:
    """``runs`` (tuples of ``columns`` numbers or None) as a float64 array of one row per run,
    None as NaN: through the C accelerator's ``runs_table`` where it is loaded and takes them,
    else :func:`runs_table_in_python`, the reference (and the one that raises)."""
    import numpy  # a core dependency; imported by the first fold, not with the timers

    if accelerator.extension is not None:
        packed = accelerator.extension.runs_table(runs, columns)
        if packed is not None:
            return numpy.frombuffer(packed, numpy.float64).reshape(len(runs), columns)
    return runs_table_in_python(runs, columns)


def runs_table_in_python(runs: list[tuple[Any, ...]], columns: int) -> Any:
    """:func:`runs_table` in Python: ``numpy.fromiter`` reads a None as NaN."""
    import numpy

    return numpy.fromiter(chain.from_iterable(runs), numpy.float64, len(runs) * columns).reshape(len(runs), columns)


def _add_runs(node: TimerNode, elapsed: Any) -> None:
    """Count closed runs of ``elapsed`` seconds each (a numpy array), as as many
    :meth:`TimerNode.__exit__` would."""
    node.add_runs(float(elapsed.sum()), len(elapsed), 0, float(elapsed.min()), float(elapsed.max()))


def span_timeline(stack: Any) -> Any:
    """``stack``'s timeline while spans are recorded there, else None: spans added to it by hand
    are added as the blocks' recording exit adds each (:meth:`TimerNode._exit_and_record`)."""
    timeline = stack.timeline
    return timeline if timeline is not None and block_hooks.records_spans() else None


def add_run(node: TimerNode, elapsed: float) -> None:
    """Count one closed run of ``elapsed`` seconds, as :meth:`TimerNode.__exit__` does."""
    node.add_runs(elapsed, 1, 0, elapsed, elapsed)
