"""PyTorch's operators inside rlprof's blocks: ``aten::addmm`` under ``policy.forward``.

rlprof does not capture operators itself: while operator recording is on, PyTorch's own profiler
(``torch.profiler.profile``) runs beside rlprof's timers, and its events are folded into rlprof's
tree. Each operator becomes a block (labelled ``"object_type": "operator"``) under the rlprof
block that was open when it ran, with the operators it called beneath it, so that a block's self
time is what it spent outside PyTorch's operators, and every output (the dump, ``rlprof analyze``,
the report, the flame graph) shows them. What PyTorch gives beyond time goes to the dump's
``operators`` section, one entry per operator block: input shapes and dtypes, FLOPs (matrix
multiplications and convolutions; PyTorch counts no others), the CPU memory the operator itself
allocated, and, with ``with_stack`` (MegEngine's ``with_backtrace``), the Python call stacks it
was called from.

**Which block an operator belongs to.** Each rlprof block opened while recording is also a
PyTorch annotation (a ``RecordFunction`` named ``rlprof:<key> <block name>``, the key leading back
to the block), so PyTorch itself nests every operator inside the blocks open when it started:
no clock has to be matched. (PyTorch's profiler stamps events with the wall clock,
``CLOCK_REALTIME``, while rlprof's blocks read ``time.perf_counter``, ``CLOCK_MONOTONIC`` on
Linux: matching intervals would have to correct for the offset between the two, and for any step
of the wall clock, which nesting by annotation avoids.)

Operators that ran in no annotated block go under the root: those run outside every block, and
those run in a block opened *before* the recording started (Python bound that block's ``__exit__``
as it was entered, so its end would go unseen and it is not annotated). Start the recording
before the blocks whose operators you want.

**One thread.** PyTorch's profiler records the thread that started it only, so the operators
recorded are that thread's (the trainer's main thread, as a rule); blocks of other threads are not
annotated, and a process forked while recording (an env worker) records none. PyTorch's events
are read when that thread reads the tree (a dump, ``dumps()``, the end of a session): its
profiler is stopped, the events folded, and a new one started with the blocks still open
annotated again. A dump from another thread (``continuous_dump``'s) shows the operators folded
until then.

**Cost.** PyTorch's profiler slows every operator (see benchmarks/operator_overhead.py), and every
block pays for its annotation while recording; off (the default) nothing of this is installed.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from profiler.gpu.execution_trace import ExecutionTrace, fold_execution_trace, outputs_sayings
from profiler.gpu.operator_calls import backtrace_text, dtype_names
from profiler.gpu.operator_figures import OperatorFigures, PathFigures, figures_of, payload_field, section_entry
from profiler.recording import events as timeline
from profiler.timing import block_hooks, timers
from profiler.timing.timers import TimerNode, TimerStack

__all__ = [
    "ANNOTATION_PREFIX",
    "OPERATOR_OBJECT_TYPE",
    "OperatorRecording",
    "OperatorsUnavailableError",
    "check_available",
    "drain_operators",
    "is_recording_operators",
    "operators_section",
    "start_operators",
    "stop_operators",
]

ANNOTATION_PREFIX = "rlprof:"
"""The start of the name of the PyTorch annotation each rlprof block opens while recording."""

OPERATOR_OBJECT_TYPE = "operator"
"""The ``object_type`` label of the blocks that stand for PyTorch operators."""

_MEMORY_EVENT = "[memory]"


class OperatorsUnavailableError(RuntimeError):
    """Operators were asked for where PyTorch is not installed."""


MAX_KERNEL_SPANS = 100_000
"""Kernels kept for the trace's GPU tracks per recording; later ones are counted, not kept."""


class OperatorRecording:
    """PyTorch's profiler beside rlprof's timers in the thread that starts it.

    A deferred recorder of the thread's stack (see :meth:`TimerStack.settle`): every reader of
    the tree in that thread has the events so far folded in first.
    """

    def __init__(self, stack: TimerStack, *, record_shapes: bool, with_flops: bool,
                 profile_memory: bool, torch_module: Any, with_stack: bool = False,
                 record_outputs: bool = False) -> None:
        self.stack = stack
        self.thread_id = threading.get_ident()
        self.record_shapes = record_shapes
        self.with_flops = with_flops
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.record_outputs = record_outputs
        # The current session's execution trace, and what went wrong with the traces (see
        # profiler.gpu.execution_trace.outputs_sayings).
        self._trace: ExecutionTrace | None = None
        self.outputs_unmatched = 0
        self.outputs_unavailable = self.outputs_lost = None
        self._torch = torch_module
        self._annotation = torch_module._C._profiler._RecordFunctionFast
        self._lock = threading.RLock()
        # Each annotated block's annotation name, and the block each key names. Keys are never
        # reused, so that an event recorded before a reset cannot name a block made after it.
        self._names: dict[TimerNode, str] = {}
        self._nodes: dict[int, TimerNode] = {}
        self._next_key = itertools.count(1)
        self._open: dict[TimerNode, Any] = {}
        self.figures: dict[TimerNode, OperatorFigures] = {}
        self.events_folded = 0
        self._session: Any = None
        self.device_time_unavailable = device_unavailable_reason(torch_module)
        # (device, kernel name, start, end) on rlprof's clock, for the trace's GPU tracks.
        self.kernels: list[tuple[str, str, float, float]] = []
        self.kernels_left_out = 0
        # (operator name, start, end) on rlprof's clock, for the trace's operator track: kept
        # from the sessions read while the timeline was recorded.
        self.operator_spans: list[tuple[str, float, float]] = []
        self.operator_spans_left_out = 0

    # --- on and off ----------------------------------------------------------------------------

    def start(self) -> None:
        self._start_session()
        block_hooks.observe_blocks(self._on_enter, self._on_exit, companion="torch_ops")
        self.stack.deferred.add(self)

    def stop(self) -> None:
        """Stop PyTorch's profiler and fold what it recorded; the figures stay, to dump."""
        block_hooks.observe_blocks(None, None, companion="torch_ops")
        with self._lock:
            self._fold_session()
            self._open.clear()

    def _start_session(self, reopen: tuple[TimerNode, ...] = ()) -> None:
        profiler = self._torch.profiler
        activities = [profiler.ProfilerActivity.CPU]
        if self.device_time_unavailable is None:
            activities.append(profiler.ProfilerActivity.CUDA)
        stack_options: dict[str, Any] = {}
        if self.with_stack:
            # PyTorch gives each operator's Python stack only with its experimental ``verbose``
            # (documented as "the trace file has a Call stack field"); with_stack alone leaves
            # the events' stacks empty.
            stack_options = {"with_stack": True,
                             "experimental_config": profiler._ExperimentalConfig(verbose=True)}
        if self.record_outputs and self.outputs_unavailable is None:
            try:
                self._trace = ExecutionTrace(self._torch)
                stack_options["execution_trace_observer"] = self._trace.observer
            except (RuntimeError, OSError) as error:
                self.outputs_unavailable = str(error)
        self._session = profiler.profile(
            activities=activities,
            record_shapes=self.record_shapes,
            with_flops=self.with_flops,
            profile_memory=self.profile_memory,
            **stack_options,
        )
        self._session.__enter__()
        # The blocks still open from the session just read are annotated again in this one,
        # outermost first, so that the operators they go on to run nest in them. (A block opened
        # before the recording started is not annotated: Python bound its plain __exit__ when it
        # was entered, so its end would go unseen.)
        if threading.get_ident() == self.thread_id:
            for node in self.stack.open_blocks():
                if node in reopen:
                    self._annotate(node)

    def _close_annotations(self) -> tuple[TimerNode, ...]:
        """End the open annotations, innermost first, inside the session that started them; return
        their blocks. An annotation left open when its session stops is not PyTorch's to report
        the same way from one version to the next (torch 2.11 lost the operators it held), and
        ending it under the next session hands that session an end it never saw begin."""
        nodes = tuple(self._open)
        for node in reversed(nodes):
            self._open.pop(node).__exit__(None, None, None)
        return nodes

    # --- the annotations -------------------------------------------------------------------------

    def _on_enter(self, node: TimerNode) -> None:
        if threading.get_ident() == self.thread_id:
            self._annotate(node)

    def _on_exit(self, node: TimerNode) -> None:
        annotation = self._open.pop(node, None)
        if annotation is not None:
            annotation.__exit__(None, None, None)

    def _annotate(self, node: TimerNode) -> None:
        name = self._names.get(node)
        if name is None:
            key = next(self._next_key)
            self._nodes[key] = node
            name = self._names[node] = f"{ANNOTATION_PREFIX}{key} {node.name}"
        previous = self._open.pop(node, None)
        if previous is not None:
            previous.__exit__(None, None, None)
        annotation = self._annotation(name)
        annotation.__enter__()
        self._open[node] = annotation

    # --- folding -------------------------------------------------------------------------------

    def fold(self) -> None:
        """Fold the events recorded so far (from the recording thread only: PyTorch's profiler
        cannot be stopped from another one), then go on recording."""
        if threading.get_ident() != self.thread_id:
            return
        with self._lock:
            if self._session is None:
                return
            self._start_session(self._fold_session())

    def discard(self, stack: TimerStack) -> None:
        """The stack was reset: what was folded went with its tree, and what PyTorch recorded
        since the last fold goes too (from the recording thread; PyTorch's profiler cannot be
        restarted from another, whose reset leaves those events to land under the root)."""
        with self._lock:
            self.figures.clear()
            self.kernels.clear()
            self.operator_spans.clear()
            self._names.clear()
            self._nodes.clear()
            if self._session is not None and threading.get_ident() == self.thread_id:
                reopen = self._close_annotations()
                self._session.__exit__(None, None, None)
                self._read_trace()
                self._start_session(reopen)

    def _fold_session(self) -> tuple[TimerNode, ...]:
        """Stop the session and fold its events; return the blocks whose annotations it ended."""
        session, self._session = self._session, None
        if session is None:
            return ()
        reopen = self._close_annotations()
        session.__exit__(None, None, None)
        events = session.profiler.kineto_results.events()
        kernels: list[tuple[str, str, int, int]] = []
        spans: list[tuple[str, int, int]] | None = [] if timeline.is_recording() else None
        self.events_folded += fold_events(events, self._nodes, self.stack.root, self.figures, kernels, spans)
        nodes = self._read_trace()
        if nodes:
            _, unmatched = fold_execution_trace(nodes, self._nodes, self.stack.root, self.figures,
                                                _annotation_key, ANNOTATION_PREFIX)
            self.outputs_unmatched += unmatched
        # PyTorch's profiler stamps events with the wall clock (see the module docstring); both
        # clocks are read together here to move the kernels and operators onto rlprof's.
        offset = time.time() - timers.now()
        if kernels:
            room = max(0, MAX_KERNEL_SPANS - len(self.kernels))
            self.kernels.extend((device, name, start / 1e9 - offset, end / 1e9 - offset)
                                for device, name, start, end in kernels[:room])
            self.kernels_left_out += max(0, len(kernels) - room)
        if spans:
            room = max(0, MAX_KERNEL_SPANS - len(self.operator_spans))
            self.operator_spans.extend((name, start / 1e9 - offset, end / 1e9 - offset)
                                       for name, start, end in spans[:room])
            self.operator_spans_left_out += max(0, len(spans) - room)
        return reopen

    def _read_trace(self) -> list[dict[str, Any]]:
        """The nodes of the session's execution trace (none without record_outputs), ended."""
        trace, self._trace = self._trace, None
        if trace is None:
            return []
        try:
            return trace.read_nodes()
        except ValueError as error:
            self.outputs_lost = f"{error}: output shapes and tensor bytes miss a stretch of the run"
            return []


def fold_events(events: Any, blocks: dict[int, TimerNode], root: TimerNode,
                figures: dict[TimerNode, OperatorFigures],
                kernels: list[tuple[str, str, int, int]] | None = None,
                spans: list[tuple[str, int, int]] | None = None) -> int:
    """Fold PyTorch's raw events (``kineto_results.events()``) into the tree; returns how many
    operators were folded.

    Events nest by time on their thread: an operator goes under the innermost event open when it
    started, an rlprof annotation (its block) or an operator (the operator's block), else under
    ``root``. A ``[memory]`` event is an allocation (bytes > 0) or a release, charged to the
    innermost operator open.

    A device event (a kernel, a copy, a memset) names the operator that launched it by its
    ``linked_correlation_id``, which is that operator's ``correlation_id`` (as PyTorch's own
    ``FunctionEvent.kernels`` are found): its time is the operator's device self time, and device
    total time for it and the operators it ran in. Each device event is also appended to
    ``kernels`` as (device, name, start ns, end ns) on PyTorch's clock, and each operator to
    ``spans`` as (name, start ns, end ns).
    """
    rows = []
    device_events = []
    for event in events:
        if event.device_type().name != "CPU":
            device_events.append(event)
        elif _host_side_of_pytorch(event):
            rows.append((event.start_ns(), -event.duration_ns(), event))
    rows.sort(key=lambda row: (row[0], row[1]))
    # An operator's correlation id -> its block, then the operator blocks it ran in, innermost first.
    launched_by: dict[int, list[TimerNode]] = {}
    folded = 0
    # Per thread: (end_ns, node, is_operator) of the events open at the current event's start.
    open_events: dict[int, list[tuple[int, TimerNode, bool]]] = {}
    for start, negative_duration, event in rows:
        stack = open_events.setdefault(event.start_thread_id(), [])
        while stack and stack[-1][0] <= start and not (negative_duration == 0 and stack[-1][0] == start):
            stack.pop()
        name = event.name()
        if name == _MEMORY_EVENT:
            for _, node, is_operator in reversed(stack):
                if is_operator:
                    figures_of(figures, node).cpu_memory_bytes += event.nbytes()
                    break
            continue
        end = start - negative_duration
        if name.startswith(ANNOTATION_PREFIX):
            block = blocks.get(_annotation_key(name))
            if block is not None:
                stack.append((end, block, False))
            continue
        parent = stack[-1][1] if stack else root
        node = parent.get_child(name)
        seconds = -negative_duration / 1e9
        node.add_runs(seconds, 1, 0, seconds, seconds)
        node.add_labels(None, OPERATOR_OBJECT_TYPE, None)
        if spans is not None:
            spans.append((name, start, end))
        operator = figures_of(figures, node)
        operator.flops += max(0, event.flops())
        shapes = event.shapes()
        if shapes and any(shapes):
            operator.add_shapes(str(shapes))
        dtypes = event.dtypes()
        if dtypes:
            operator.add_dtypes(dtype_names(dtypes))
        stack_entries = event.stack()
        if stack_entries:
            operator.add_backtrace(backtrace_text(stack_entries))
        if device_events:
            chain = [node]
            for _, outer, is_operator in reversed(stack):
                if not is_operator:
                    break
                if outer not in chain:  # an operator nested in one of its own name counts once
                    chain.append(outer)
            launched_by[event.correlation_id()] = chain
        stack.append((end, node, True))
        folded += 1
    for event in device_events:
        seconds = max(0, event.duration_ns()) / 1e9
        chain = launched_by.get(event.linked_correlation_id())
        if chain:
            figures[chain[0]].device_self += seconds
            for node in chain:
                figures[node].device_total += seconds
        if kernels is not None:
            device = f"{event.device_type().name.lower()}:{event.device_index()}"
            kernels.append((device, event.name(), event.start_ns(), event.start_ns() + max(0, event.duration_ns())))
    return folded


_OPERATOR_ACTIVITIES = frozenset(("cpu_op", "user_annotation"))
"""The kinds of host events PyTorch's profiler records itself (operators, annotations). With CUDA
activity it also reports the CUDA runtime and driver calls (``cudaLaunchKernel``...) as host
events, timestamped on their own system thread: those are not operators (their time is already
their operator's), and nested by time on that thread they would land under the root."""

_RUNTIME_CALL = re.compile(r"cu(da)?[A-Z]")
"""A CUDA runtime or driver call's name (``cudaEventQuery``, ``cuLaunchKernel``). PyTorch 2.11
reports some of them (the event calls, ``cudaDeviceSynchronize``) with an operator's activity
type, so the name tells them apart too: no operator or annotation of PyTorch's is named so."""


def _host_side_of_pytorch(event: Any) -> bool:
    name = event.name()
    if name == _MEMORY_EVENT:
        return True
    if _RUNTIME_CALL.match(name):
        return False
    activity = getattr(event, "activity_type", None)
    return activity is None or activity() in _OPERATOR_ACTIVITIES


def device_unavailable_reason(torch_module: Any) -> str | None:
    """Why operators get no device time here (None: CUDA activity is recorded)."""
    cuda = getattr(torch_module, "cuda", None)
    if _forked_after_cuda:
        return ("no device time per operator: this process was forked from one that had "
                "initialised CUDA, which a forked child cannot use (start workers with spawn)")
    if cuda is None or not cuda.is_available():
        return ("no device time per operator: torch.cuda.is_available() is False (a CPU-only "
                "build of torch, or no GPU visible), so PyTorch's profiler records CPU activity only")
    return None


def _annotation_key(name: str) -> int:
    try:
        return int(name[len(ANNOTATION_PREFIX):].split(" ", 1)[0])
    except ValueError:
        return 0


# --- the process's recording ---------------------------------------------------------------------

_recording: OperatorRecording | None = None


def check_available() -> None:
    """Raise :class:`OperatorsUnavailableError` (saying what to install) without PyTorch."""
    _torch()


def _torch() -> Any:
    try:
        import torch
        import torch.profiler  # noqa: F401 - torch.profiler.profile is reached through torch
    except ImportError as error:
        raise OperatorsUnavailableError(
            "recording PyTorch operators needs PyTorch: pip install torch (or turn operators off)"
        ) from error
    return torch


def start_operators(*, record_shapes: bool = True, with_flops: bool = True,
                    profile_memory: bool = True, with_stack: bool = False,
                    record_outputs: bool = False) -> OperatorRecording:
    """Run PyTorch's profiler beside rlprof's timers in this thread and fold its operators into
    this thread's tree (see the module docstring). ``with_stack`` also keeps the Python call
    stacks each operator was called from (PyTorch's Python tracer then runs: far costlier).
    ``record_outputs`` also runs PyTorch's execution trace, for each operator's output shapes and
    the bytes of the tensors it took and returned (``out_shapes`` and ``bandwidth``, see
    :mod:`profiler.gpu.execution_trace`; costlier again).
    Raises :class:`OperatorsUnavailableError` without PyTorch, and ``RuntimeError`` when
    operators are already being recorded."""
    global _recording
    if _recording is not None:
        raise RuntimeError("PyTorch operators are already being recorded in this process")
    torch = _torch()
    recording = OperatorRecording(timers.current_thread_stack(), record_shapes=record_shapes,
                                  with_flops=with_flops, profile_memory=profile_memory,
                                  torch_module=torch, with_stack=with_stack,
                                  record_outputs=record_outputs)
    recording.start()
    _recording = recording
    return recording


def stop_operators() -> None:
    """Stop recording operators (their blocks and figures stay in the tree, to dump); from the
    thread that started it, as PyTorch's profiler requires."""
    global _recording
    recording, _recording = _recording, None
    if recording is not None:
        recording.stop()
        _finished.append(recording)


def is_recording_operators() -> bool:
    return _recording is not None


def _forget_in_forked_child() -> None:
    """A process forked while recording (an env worker) inherits the block observers but not a
    running PyTorch profiler of its own: it records no operators, and its blocks pay nothing."""
    global _recording, _forked_after_cuda
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if _recording is not None and _recording.device_time_unavailable is None:
        _forked_after_cuda = True  # the parent's profiler had CUDA activity (CUPTI) running
    elif cuda is not None and cuda.is_initialized():
        _forked_after_cuda = True
    if _recording is not None:
        if _recording._trace is not None:
            _recording._trace.abandon_in_forked_child()
        _recording = None
        block_hooks.observe_blocks(None, None, companion="torch_ops")


_forked_after_cuda = False
"""Whether this process was forked from one that had initialised CUDA or recorded CUDA activity:
CUDA cannot be used in such a child, so its operators are recorded without device time."""


os.register_at_fork(after_in_child=_forget_in_forked_child)


# Recordings stopped, whose figures the dump still shows until their stack is reset.
_finished: list[OperatorRecording] = []


def _recordings_of(stack: TimerStack) -> list[OperatorRecording]:
    return [recording for recording in (*_finished, _recording)
            if recording is not None and recording.stack is stack and recording.figures]


def operators_section(stack: TimerStack, workers: Sequence[PathFigures] = ()) -> dict[str, Any] | None:
    """The dump's ``operators`` section for ``stack`` (see docs/formats.md), or None when no
    operator was recorded in it: one entry per operator block, by its path from the root.
    ``workers`` are the figures of env workers' operators merged into the tree (by the merger,
    see :mod:`profiler.gpu.operator_figures`); an operator block both the trainer and a worker
    ran (a worker's operator outside its blocks, merged under the block the trainer ran it in)
    adds up into one entry."""
    recordings = _recordings_of(stack)
    workers = [worker for worker in workers if worker.figures]
    if not recordings and not workers:
        return None
    unavailable = next((source.device_time_unavailable for source in (*recordings, *workers)
                        if source.device_time_unavailable is not None), None)
    by_path: dict[tuple[str, ...], OperatorFigures] = {}
    for recording in recordings:
        for node, operator in list(recording.figures.items()):
            path = _path_of(node, stack.root)
            if path is not None:
                figures_of(by_path, tuple(path)).add(operator)
    for worker in workers:
        for path, operator in worker.figures.items():
            figures_of(by_path, path).add(operator)
    # Workers record with start_operators' defaults: shapes, FLOPs and memory.
    section: dict[str, Any] = {
        "source": "torch.profiler",
        "device_time": unavailable is None,
        "record_shapes": any(recording.record_shapes for recording in recordings) or bool(workers),
        "with_flops": any(recording.with_flops for recording in recordings) or bool(workers),
        "profile_memory": any(recording.profile_memory for recording in recordings) or bool(workers),
        "with_stack": any(source.with_stack for source in (*recordings, *workers)),
        "record_outputs": any(recording.record_outputs and recording.outputs_unavailable is None
                              for recording in recordings),
        "operators": [section_entry(list(path), operator, unavailable is None)
                      for path, operator in by_path.items()],
    }
    if unavailable is not None:
        section["device_time_unavailable"] = unavailable
    section.update(outputs_sayings(recordings))
    return section


def drain_operators(stack: TimerStack) -> tuple[Any, ...] | None:
    """The figures of ``stack``'s operators folded since the last drain, as a worker's payload
    field (see :mod:`profiler.gpu.operator_figures`), then forgotten: the payload carries them
    to the trainer, as it carries the blocks' own figures. None when there are none."""
    recordings = _recordings_of(stack)
    if not recordings:
        return None
    by_path = []
    for recording in recordings:
        for node, operator in list(recording.figures.items()):
            path = _path_of(node, stack.root)
            if path is not None:
                by_path.append((tuple(path), operator))
        recording.figures.clear()
    unavailable = next((recording.device_time_unavailable for recording in recordings
                        if recording.device_time_unavailable is not None), None)
    return payload_field(by_path, unavailable, any(recording.with_stack for recording in recordings))


OPERATOR_TRACK = "PyTorch operators"
"""The name of the timeline thread that holds the operators' spans."""


def gpu_tracks(stack: TimerStack) -> list[dict[str, Any]]:
    """The kernels PyTorch's profiler recorded in ``stack``'s thread as timeline threads, one per
    device (``GPU cuda:0``), their spans on rlprof's clock, for the trace's GPU tracks; and, where
    the timeline was recorded, its operators as one more thread (:data:`OPERATOR_TRACK`), each
    operator a span nested in the operators that called it."""
    by_device: dict[str, list[list[Any]]] = {}
    operators: list[list[Any]] = []
    for recording in (*_finished, _recording):
        if recording is None or recording.stack is not stack:
            continue
        for device, name, start, end in recording.kernels:
            by_device.setdefault(device, []).append([name, start, end])
        operators.extend([name, start, end] for name, start, end in recording.operator_spans)
    tracks = [{"name": f"GPU {device}", "device": device, "spans": sorted(spans, key=lambda span: span[1])}
              for device, spans in sorted(by_device.items())]
    if operators:
        tracks.insert(0, {"name": OPERATOR_TRACK, "spans": sorted(operators, key=lambda span: (span[1], -span[2]))})
    return tracks


def _path_of(node: TimerNode, root: TimerNode) -> list[str] | None:
    """The names from the root's child down to ``node``; None for a node no longer in the tree."""
    names = []
    while node is not root:
        if node.parent is None:
            return None
        names.append(node.name)
        node = node.parent
    return names[::-1]
