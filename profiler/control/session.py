"""MegEngine's profiler session on rlprof: ``Profiler`` (``profile`` is the same class), a decorator and a
``with`` block that own their outputs.

Code written against ``megengine.utils.profiler`` ports by changing the import::

    from profiler import Profiler, profile

    @profile()                                   # every call of train_step is profiled
    def train_step(batch): ...

    with Profiler(path="profile", formats=["chrome_timeline.json", "memory_flow.svg"], sample_rate=8):
        rollout()                                # this block is profiled

While a session is on, the timeline is recorded (so the trace shows when each block ran, not a
layout made up from totals) and, when asked (``sample_rate``, ``memory_interval``,
``track_allocations``), memory is sampled (:mod:`profiler.recording.memory`). An env manager built inside
a session starts its workers recording and sampling too, so their blocks, spans and memory land in
the same files. rlprof's timers are always on: the files hold the thread's whole timer tree, the
blocks timed before the session included; call ``profiler.reset_timers()`` first to profile a
region alone.

**When the files are written**, under ``path`` as ``{pid}.{format}`` (MegEngine's names): when a
``with`` block ends (and, for one ``Profiler`` entered again and again in a loop, again at most
every ``dump_interval`` seconds); for a decorator, or anything not yet written, when the session is
garbage collected or the interpreter exits; and whenever :meth:`Profiler.dump` is called.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import time
import warnings
import weakref
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from profiler.automatic import torch_phases
from profiler.recording import events, memory
from profiler.timing import timers
from profiler.control.dump_outputs import write_formats
from profiler.gpu import device_time, torch_ops
from profiler.tree.timer_tree import get_timer_tree

__all__ = ["DEFAULT_DUMP_INTERVAL", "SESSION_FORMATS", "Profiler", "profile"]

SESSION_FORMATS: dict[str, str] = {
    "chrome_timeline.json": "chrome",
    "chrome_timeline.json.gz": "chrome",
    "memory_flow.svg": "memory-svg",
    "timers.json": "timers",
    "report.html": "html",
    "speedscope.json": "speedscope",
    "collapsed.txt": "collapsed",
    "mlagents_timers.json": "mlagents",
}
"""Each output a session writes, by the name it is asked for (the end of its file name), and the
rlprof output it is: MegEngine's two (``chrome_timeline.json``, ``memory_flow.svg``), then rlprof's
own (see docs/outputs.md). A ``.json.gz`` trace is compressed."""

DEFAULT_DUMP_INTERVAL = 60.0
"""Seconds between rewrites of the files by a ``with`` block entered again and again."""

FunctionType = TypeVar("FunctionType", bound=Callable[..., Any])


class Profiler:
    """A profiling session: a ``with`` block, or a decorator whose every call is profiled.

    Args:
        path: the folder the files go in (made if missing), as ``{pid}.{format}``.
        format: the one output to write, when ``formats`` is not given.
        formats: the outputs to write, any of :data:`SESSION_FORMATS`.
        sample_rate: sample memory every this many timer blocks (MegEngine: every n ops); 0: no.
        profile_device: time every block on the GPU too while the session runs (device time
            beside host time, see profiler.gpu.device_time). None (the default) does where a CUDA
            GPU is visible to torch, as MegEngine's default ``True`` does, and quietly times the
            host only where not; ``True`` says in one warning why not where no GPU is visible;
            ``False`` times the host only.
        memory_interval: also sample memory every this many seconds, on a sampler thread.
        memory_uss: read each sample's unique set size too (costlier; see profiler.recording.memory).
        track_allocations: measure each block's Python allocations (tracemalloc; costly).
        name: time each entry of a ``with`` block as a block of this name (a decorator times
            each call as a block named for the function unless given one).
        dump_interval: see the module docstring.
        record_operators: record PyTorch's operators under the blocks that ran them, with their
            input shapes, FLOPs and CPU memory, through PyTorch's own profiler
            (:mod:`profiler.gpu.torch_ops`; MegEngine records its operators always). Needs torch.
        with_scopes: MegEngine's module scopes: while the session runs, each outermost
            ``nn.Module`` call is a ``<Module>.forward`` block, the module calls inside it blocks
            nested in it, named by their attribute path (``actor.0.forward``), and ``backward`` and
            the optimizer's ``step`` and ``zero_grad`` are blocks
            (:mod:`profiler.automatic.torch_phases`; ``rlprof run`` times the outermost calls
            only). Each layer call then costs a block. Needs torch.
        with_backtrace: MegEngine's backtraces: record the operators (as ``record_operators``)
            with the Python call stack each was called from, counted per operator in the dump
            and shown by ``rlprof analyze``. PyTorch's Python tracer then runs beside its
            profiler, which slows every Python call (see docs/gpu.md). Needs torch.
        enable_cupti: MegEngine's CUPTI device timing: record the operators (as
            ``record_operators``) with the GPU time of the kernels each launched, which PyTorch's
            profiler reads through CUPTI. Refused (``ValueError`` saying why) where it cannot:
            no torch, no GPU visible, a process forked after CUDA was initialised.
        record_outputs: record the operators (as ``record_operators``) with their output shapes
            and the sizes of the tensors they took and returned, for ``profile_analyze``'s
            ``out_shapes`` and ``bandwidth`` columns, through PyTorch's execution trace
            (:mod:`profiler.gpu.execution_trace`; costlier again). Needs torch.

    Raises:
        ValueError: an unknown format (the valid ones are listed), or a meaningless option.

    ``Profiler(function)`` with a function as its one argument returns that function profiled
    with the defaults, so that ``profile`` (which *is* this class, as in MegEngine) also
    decorates bare: ``@profile``.
    """

    # Class-level: __del__ reads it even when the constructor never ran (a keyword Python refused
    # before calling __init__, such as MegEngine's num_tensor_watch, or one __init__ refused).
    _unwritten = False

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return cls()(args[0])
        return super().__new__(cls)

    def __init__(
        self,
        path: str | os.PathLike[str] = "profile",
        format: str = "chrome_timeline.json",  # noqa: A002 - MegEngine's name
        formats: Sequence[str] | None = None,
        sample_rate: int = 0,
        profile_device: bool | None = None,
        *,
        memory_interval: float | None = None,
        memory_uss: bool = False,
        track_allocations: bool = False,
        name: str | None = None,
        dump_interval: float = DEFAULT_DUMP_INTERVAL,
        record_operators: bool = False,
        with_scopes: bool = False,
        with_backtrace: bool = False,
        enable_cupti: bool = False,
        record_outputs: bool = False,
    ) -> None:
        self._pid = os.getpid()
        self._device = _session_device(profile_device)
        self._device_before: str | None = None
        self._formats = _checked_formats(format, formats)
        self._path = Path(path)
        self._memory_sampling = _memory_sampling(sample_rate, memory_interval, memory_uss, track_allocations)
        if not dump_interval >= 0:
            raise ValueError(f"dump_interval must be a number of seconds >= 0, got {dump_interval!r}")
        self._dump_interval = dump_interval
        if not isinstance(with_backtrace, bool):
            raise TypeError(f"with_backtrace must be True or False, got {with_backtrace!r}")
        if not isinstance(enable_cupti, bool):
            raise TypeError(f"enable_cupti must be True or False, got {enable_cupti!r}")
        if not isinstance(record_outputs, bool):
            raise TypeError(f"record_outputs must be True or False, got {record_outputs!r}")
        if record_operators or with_backtrace or enable_cupti or record_outputs:
            torch_ops.check_available()
        if enable_cupti:
            reason = torch_ops.device_unavailable_reason(sys.modules["torch"])
            if reason is not None:
                raise ValueError(f"enable_cupti: {reason}")
        self._record_operators = record_operators or with_backtrace or enable_cupti or record_outputs
        self._with_backtrace = with_backtrace
        self._record_outputs = record_outputs
        self._recording_operators = False
        if not isinstance(with_scopes, bool):
            raise TypeError(f"with_scopes must be True or False, got {with_scopes!r}")
        self._with_scopes = with_scopes and _torch_for_scopes() is not None
        self._installed_scopes = False
        self._module_scopes_before = False
        self._name = name
        self._depth = 0
        self._timer_stack: timers.TimerStack | None = None
        self._started_recording = False
        self._memory_before: memory.MemorySampling | None = None
        self._open_blocks: list[Any] = []
        self._dumped_at: float | None = None
        _living_sessions.add(self)

    @property
    def formats(self) -> list[str]:
        return list(self._formats)

    @property
    def directory(self) -> Path:
        """The folder the files go in (MegEngine's ``directory``)."""
        return self._path

    @property
    def paths(self) -> dict[str, Path]:
        """Each format's file in this process (``{path}/{pid}.{format}``)."""
        return {name: self._path / f"{os.getpid()}.{name}" for name in self._formats}

    # --- on and off ------------------------------------------------------------------------------

    def start(self) -> Profiler:
        """Start profiling (the outermost of nested starts does; the others count)."""
        self._depth += 1
        if self._depth > 1:
            return self
        if self._timer_stack is None:
            self._timer_stack = timers._resolve(None)
        self._started_recording = not events.is_recording()
        if self._started_recording:
            events.start_recording()
        if self._device is not None:
            self._device_before = device_time.set_default_device(self._device)
        if self._memory_sampling is not None:
            self._memory_before = memory.sampling_settings()
            memory.apply_sampling(self._memory_sampling)
        # A recording already on (another session's, set_config's) is left to its owner.
        if self._record_operators and not torch_ops.is_recording_operators():
            torch_ops.start_operators(with_stack=self._with_backtrace, record_outputs=self._record_outputs)
            self._recording_operators = True
        # Hooks already installed (by rlprof run, another session) are left to their owner.
        if self._with_scopes and not torch_phases.torch_phases_installed():
            torch_phases.install_torch_phases(_torch_for_scopes())
            self._installed_scopes = True
        if self._with_scopes:
            self._module_scopes_before = torch_phases.set_module_scopes(True)
        return self

    def stop(self) -> None:
        """Stop profiling (the outermost start's stop does); what was recorded stays for the files."""
        if self._depth == 0:
            raise RuntimeError("Profiler.stop() without a start()")
        self._depth -= 1
        if self._depth > 0:
            return
        if self._recording_operators:
            torch_ops.stop_operators()
            self._recording_operators = False
        if self._device is not None:
            device_time.set_default_device(self._device_before)
        if self._with_scopes:
            torch_phases.set_module_scopes(self._module_scopes_before)
        if self._installed_scopes:
            torch_phases.uninstall_torch_phases()
            self._installed_scopes = False
        if self._memory_sampling is not None:
            memory.sample_now()  # the memory as the profiled stretch ends
            if self._memory_before is None:
                memory.stop_sampling()
            else:
                memory.apply_sampling(self._memory_before)
        if self._started_recording:
            events.stop_recording()
        self._unwritten = True

    def step(self) -> Profiler:
        """Mark the end of a step on the timeline (MegEngine's ``step``)."""
        events.mark("step")
        return self

    def __enter__(self) -> Profiler:
        self.start()
        if self._name is not None:
            block = timers.hierarchical_timer(self._name)
            block.__enter__()
            self._open_blocks.append(block)
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        if self._name is not None:
            self._open_blocks.pop().__exit__(exc_type, exc_value, traceback)
        self.stop()
        if self._depth == 0 and (self._dumped_at is None or time.monotonic() - self._dumped_at >= self._dump_interval):
            self.dump()

    def __call__(self, function: FunctionType) -> FunctionType:
        """Profile every call of ``function``, timed as a block named for it (or ``name``)."""
        block_name = self._name or function.__qualname__

        @functools.wraps(function)
        def profiled(*args: Any, **kwargs: Any) -> Any:
            self.start()
            try:
                with timers.hierarchical_timer(block_name):
                    return function(*args, **kwargs)
            finally:
                self.stop()

        profiled.__profiler__ = self  # type: ignore[attr-defined]
        return profiled  # type: ignore[return-value]

    # --- the files -------------------------------------------------------------------------------

    def dump(self) -> list[Path]:
        """Write every format now (atomically) and return the files written.

        Raises ``OSError`` naming the file that could not be written.
        """
        stack = self._timer_stack or timers._resolve(None)
        self._path.mkdir(parents=True, exist_ok=True)
        tree = get_timer_tree(stack, include_threads=True)  # one moment for every file
        written = [written_path for name, path in self.paths.items()
                   for written_path in write_formats(tree, {SESSION_FORMATS[name]: path})]
        self._unwritten = False
        self._dumped_at = time.monotonic()
        return written

    def _write_if_unwritten(self) -> None:
        """At garbage collection or interpreter exit: write what no dump has written yet."""
        # _unwritten is True only once a session has stopped, so only a fully built one writes.
        if self._unwritten and self._pid == os.getpid():
            try:
                self.dump()
            except Exception as error:  # noqa: BLE001 - nothing can be raised from here
                print(f"rlprof: could not write the profile under {self._path}: {error}", file=sys.stderr)

    def __del__(self) -> None:
        self._write_if_unwritten()

    def __repr__(self) -> str:
        return f"Profiler(path={str(self._path)!r}, formats={self._formats!r})"


profile = Profiler
"""MegEngine's alias: ``profile`` is ``Profiler`` (``@profile()``, ``with profile(...)``, and
bare ``@profile``)."""


def _session_device(profile_device: bool | None) -> str | None:
    """The device a session times its blocks on ("cuda"), or None: see ``profile_device``."""
    if profile_device is not None and not isinstance(profile_device, bool):
        raise ValueError(f"profile_device must be True, False or None, got {profile_device!r}")
    if profile_device is False:
        return None
    if profile_device is None and "torch" not in sys.modules:
        return None  # the program has not imported torch: no GPU work of torch's to time, no import
    reason = device_time.device_unavailable_reason()
    if reason is None:
        return "cuda"
    if profile_device:
        warnings.warn(f"Profiler(profile_device=True): device time is not recorded: {reason}",
                      RuntimeWarning, stacklevel=3)
    return None


def _torch_for_scopes() -> Any:
    """torch, for ``with_scopes``; ``ValueError`` saying what to install without it."""
    try:
        import torch
    except ImportError:
        raise ValueError("with_scopes=True times PyTorch's modules and needs PyTorch: pip install torch") from None
    return torch


def _checked_formats(format_name: str, formats: Sequence[str] | None) -> tuple[str, ...]:
    if isinstance(formats, str):
        raise ValueError(f"formats takes a list of names, got the string {formats!r}; for one, use format=")
    names = tuple(formats) if formats else (format_name,)
    for name in names:
        if name not in SESSION_FORMATS:
            raise ValueError(f"unknown profiler format {name!r}; choose from {', '.join(SESSION_FORMATS)}")
    return names


def _memory_sampling(
    sample_rate: int, interval: float | None, uss: bool, track_allocations: bool
) -> memory.MemorySampling | None:
    """What to sample while the session is on (raises ValueError for a meaningless option)."""
    settings = memory.MemorySampling(sample_rate, interval, uss, track_allocations)
    if not settings.samples and not track_allocations:
        if uss:
            raise ValueError("memory_uss=True needs samples: give sample_rate or memory_interval")
        return None
    return settings


_living_sessions: weakref.WeakSet[Profiler] = weakref.WeakSet()


@atexit.register
def _write_living_sessions() -> None:
    for session in list(_living_sessions):
        session._write_if_unwritten()
