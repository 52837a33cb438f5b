"""NVTX ranges for rlprof blocks, so that Nsight Systems shows them beside the GPU's work.

While :class:`emit_nvtx` is active, every timer block of this process (``hierarchical_timer``,
``@timed``, a session's blocks) also opens an NVTX range of the same name as it opens and closes
it as it closes. It is PyTorch's ``torch.autograd.profiler.emit_nvtx`` for rlprof's blocks, and it
runs PyTorch's too where it can (see :mod:`profiler.gpu.autograd_ranges`): under ``nsys profile``
a trainer's ``update`` range holds the ``aten::`` ranges of the ops it ran, each with its ``seq``
and, on the backward pass, the ``stashed seq`` of the forward op it differentiates.

Each range carries:

* ``seq``, a running number of the blocks this process opened, which the block's span on rlprof's
  own timeline carries too (its ``seq`` arg), so a range in Nsight and a span in Perfetto are
  matched by number. With the ``nvtx`` package it is the range's integer payload: that package
  registers every message as a string it keeps for the life of the process, so a number in the
  message would grow memory without bound. ``torch.cuda.nvtx`` takes plain strings, and there it
  is in the message, as PyTorch writes it: ``update, seq = 12``.
* the process, as the range's category (``trainer (pid 4242)``, ``worker 3 (pid 4250)``) in the
  domain ``rlprof``; ``torch.cuda.nvtx`` has neither categories nor domains, and there both are
  in the message.
* with ``record_shapes=True``, the sizes and dtypes of a ``@timed`` function's arguments, in the
  range's message (``act, sizes = [[4, 3], []], dtypes = [float32, -]``) and in the span's args.

Env workers open ranges too: an env manager hands the settings to the workers it starts (in their
config) and to running workers before the next request it sends them once the settings changed
(see :func:`nvtx_settings` and ``envmanager``).

Switched off, nothing of this is left on a block's path: the bridge installs its observers on the
timers (``profiler.timing.block_hooks.observe_blocks``) while active and takes them out after.
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from profiler.recording import events
from profiler.timing import block_hooks, timers
from profiler.gpu.argument_shapes import ArgumentShapes, describe_arguments
from profiler.gpu.autograd_ranges import AutogradRanges, AutogradRangesUnavailableError, autograd_ranges_wanted
from profiler.timing.timers import TimerNode

__all__ = [
    "DOMAIN_NAME",
    "NvtxBackend",
    "NvtxPackageBackend",
    "NvtxSettings",
    "NvtxUnavailableError",
    "TorchNvtxBackend",
    "apply_nvtx",
    "autograd_ranges_on",
    "emit_nvtx",
    "is_emitting",
    "nvtx_settings",
    "resolve_backend",
    "start_nvtx",
    "stop_nvtx",
]

DOMAIN_NAME = "rlprof"
"""The NVTX domain of rlprof's ranges (Nsight lists ranges by domain)."""

BACKEND_NAMES = ("nvtx", "torch")
"""The backends by name, in the order tried when none is named."""


class NvtxUnavailableError(RuntimeError):
    """Asked for NVTX ranges with neither the ``nvtx`` package nor a CUDA build of torch."""


class NvtxBackend(Protocol):
    """What opens and closes ranges. Ranges nest per thread, as rlprof's blocks do."""

    name: str

    def push_range(self, message: str, sequence: int, category: str) -> None: ...

    def pop_range(self) -> None: ...


class NvtxPackageBackend:
    """NVIDIA's ``nvtx`` package: ranges in the ``rlprof`` domain, ``seq`` as the payload and the
    process as the category.

    Without a tool attached (no ``nsys``) the package hands out a domain whose calls do nothing,
    so leaving emit_nvtx on outside Nsight costs little.
    """

    name = "nvtx"

    def __init__(self) -> None:
        import nvtx

        self.domain = nvtx.get_domain(DOMAIN_NAME)

    def push_range(self, message: str, sequence: int, category: str) -> None:
        self.domain.push_range(message=message, category=category, payload=sequence)

    def pop_range(self) -> None:
        self.domain.pop_range()


class TorchNvtxBackend:
    """``torch.cuda.nvtx``: one message holds the name, ``seq``, domain and process."""

    name = "torch"

    def __init__(self) -> None:
        import torch.cuda.nvtx

        # A CPU-only build of torch has the module but no NVTX behind it: its calls raise at the
        # first range, deep inside a block. Say so now instead.
        try:
            from torch._C import _nvtx  # noqa: F401
        except ImportError as error:
            raise NvtxUnavailableError(
                "emit_nvtx: this build of torch has no NVTX (a CPU-only build); install the nvtx "
                "package (pip install 'rlprof[nvtx]') or a CUDA build of torch"
            ) from error
        self.nvtx = torch.cuda.nvtx

    def push_range(self, message: str, sequence: int, category: str) -> None:
        self.nvtx.range_push(f"{message}, seq = {sequence}, {DOMAIN_NAME} {category}")

    def pop_range(self) -> None:
        self.nvtx.range_pop()


def resolve_backend(backend: str | NvtxBackend | None = None) -> NvtxBackend:
    """The backend to use: ``backend`` itself if it is one, the one named, or (None) the ``nvtx``
    package if installed, else torch's. Raises :class:`NvtxUnavailableError` naming what to
    install when there is none, and ``ValueError`` for a name that is not a backend."""
    if backend is not None and not isinstance(backend, str):
        return backend
    if backend is not None and backend not in BACKEND_NAMES:
        raise ValueError(f"emit_nvtx: unknown backend {backend!r}; the backends are {', '.join(BACKEND_NAMES)}")
    names = BACKEND_NAMES if backend is None else (backend,)
    missing = []
    for name in names:
        try:
            return NvtxPackageBackend() if name == "nvtx" else TorchNvtxBackend()
        except ImportError as error:
            missing.append(f"{name} ({error})")
    raise NvtxUnavailableError(
        "emit_nvtx needs the nvtx package (pip install 'rlprof[nvtx]') or a CUDA build of torch; "
        f"could not import: {'; '.join(missing)}"
    )


@dataclass(frozen=True)
class NvtxSettings:
    """What an active bridge does, as plain data that travels to env workers.

    ``backend`` is a name (each process resolves it itself) or a backend object, which must then
    pickle to reach workers started with ``spawn`` (tests inject one this way). ``autograd``:
    PyTorch's autograd ranges too (True), not (False), or where torch is imported and has a GPU
    (None); each process decides for itself.
    """

    record_shapes: bool = False
    backend: Any = None
    autograd: bool | None = None


class _Bridge:
    """The process's bridge: the backend in use and the runs of blocks whose range is open."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.settings: NvtxSettings | None = None
        self.backend: NvtxBackend | None = None
        self.category = ""
        # seq and what record_shapes found, per block whose range is open. Keyed by node: a node
        # is never open twice at once. A block opened before the bridge started has no entry,
        # and its exit closes no range.
        self.open_runs: dict[TimerNode, tuple[int, ArgumentShapes | None]] = {}
        # One count for the life of the process, so that seq never repeats within it.
        self.sequence = itertools.count()
        self.autograd = AutogradRanges()

    def on_enter(self, node: TimerNode) -> None:
        sequence = next(self.sequence)
        self.backend.push_range(node.name, sequence, self.category)  # type: ignore[union-attr]
        self.open_runs[node] = (sequence, None)

    def on_enter_with_shapes(self, node: TimerNode) -> None:
        sequence = next(self.sequence)
        shapes = timers.block_arguments()
        message = node.name if shapes is None else f"{node.name}, sizes = {shapes[0]}, dtypes = {shapes[1]}"
        self.backend.push_range(message, sequence, self.category)  # type: ignore[union-attr]
        self.open_runs[node] = (sequence, shapes)

    def on_exit(self, node: TimerNode) -> None:
        run = self.open_runs.pop(node, None)
        if run is None:
            return
        self.backend.pop_range()  # type: ignore[union-attr]
        if events.is_recording():
            _label_span(node, run)


def _label_span(node: TimerNode, run: tuple[int, ArgumentShapes | None]) -> None:
    """Give the span the block's exit just recorded its ``seq`` (and shapes) as details.

    The recording exit appends the span as the last of the thread's spans just before the exit
    observers run, in this same thread, so the last span is this block's.
    """
    timeline = node._stack.timeline if node._stack is not None else None
    if timeline is None or not timeline.spans:
        return
    span = timeline.spans[-1]
    if span[0] is not node.name or len(span) != 3:
        return
    sequence, shapes = run
    details: tuple[tuple[str, Any], ...] = (("seq", sequence),)
    if shapes is not None:
        details += (("sizes", shapes[0]), ("dtypes", shapes[1]))
    timeline.spans[-1] = (*span, details)


_bridge = _Bridge()
os.register_at_fork(after_in_child=_bridge.autograd.forget)


def process_category(worker_index: int | None = None) -> str:
    """How ranges name this process: ``trainer (pid N)`` or ``worker I (pid N)``."""
    role = "trainer" if worker_index is None else f"worker {worker_index}"
    return f"{role} (pid {os.getpid()})"


def apply_nvtx(settings: NvtxSettings | None, worker_index: int | None = None) -> None:
    """Emit ranges as ``settings`` say, or stop (None): what a worker does with the trainer's
    :func:`nvtx_settings`. Raises :class:`NvtxUnavailableError` if no backend can be had, and
    then changes nothing."""
    bridge = _bridge
    with bridge.lock:
        if settings is None:
            # PyTorch's ranges end before rlprof's, so that they nest inside the blocks' ranges.
            bridge.autograd.switch(False, False)
            block_hooks.observe_blocks(None, None, companion="nvtx")
            timers.set_argument_describer(None)
            bridge.settings = bridge.backend = None
            return
        backend = resolve_backend(settings.backend)
        try:
            autograd = autograd_ranges_wanted(settings.autograd, in_worker=worker_index is not None)
        except AutogradRangesUnavailableError as error:
            raise NvtxUnavailableError(str(error)) from None
        # PyTorch's ranges first: if they fail to start, nothing has changed.
        bridge.autograd.switch(autograd, settings.record_shapes)
        bridge.backend = backend
        bridge.category = process_category(worker_index)
        bridge.settings = settings
        if settings.record_shapes:
            timers.set_argument_describer(describe_arguments)
            block_hooks.observe_blocks(bridge.on_enter_with_shapes, bridge.on_exit, companion="nvtx")
        else:
            timers.set_argument_describer(None)
            block_hooks.observe_blocks(bridge.on_enter, bridge.on_exit, companion="nvtx")


def autograd_ranges_on() -> bool:
    """Whether PyTorch's autograd ranges are being emitted in this process now."""
    return _bridge.autograd.on


def start_nvtx(record_shapes: bool = False, backend: str | NvtxBackend | None = None,
               autograd: bool | None = None) -> NvtxSettings:
    """Emit an NVTX range for every block of this process (and of env workers) from now on;
    returns the settings in force. See :class:`emit_nvtx`."""
    if not isinstance(record_shapes, bool):
        raise TypeError(f"emit_nvtx: record_shapes must be True or False, got {record_shapes!r}")
    _check_autograd(autograd)
    settings = NvtxSettings(record_shapes=record_shapes, backend=backend, autograd=autograd)
    apply_nvtx(settings)
    return settings


def stop_nvtx() -> None:
    """Stop emitting ranges. Blocks open now keep the range they opened until the thread ends."""
    apply_nvtx(None)


def _check_autograd(autograd: Any) -> None:
    if autograd is not None and not isinstance(autograd, bool):
        raise TypeError(f"emit_nvtx: autograd must be True, False or None, got {autograd!r}")


def nvtx_settings() -> NvtxSettings | None:
    """The settings in force (None while off): what env workers should emit ranges with."""
    return _bridge.settings


def is_emitting() -> bool:
    return _bridge.settings is not None


class emit_nvtx:
    """Make every rlprof block an NVTX range while the ``with`` block runs, as PyTorch's
    ``torch.autograd.profiler.emit_nvtx(enabled, record_shapes)`` does for autograd's ops.

    ``enabled=False`` makes it do nothing, so code can keep the ``with`` and switch it by a flag.
    ``record_shapes=True`` adds the sizes and dtypes of ``@timed`` functions' arguments to their
    ranges and spans; it costs a description of the arguments per call, so it is off by default.
    ``backend``: ``"nvtx"``, ``"torch"`` or an object with ``push_range(message, sequence,
    category)`` and ``pop_range()``; by default the ``nvtx`` package if installed, else torch's.
    ``autograd``: also run PyTorch's ``emit_nvtx(record_shapes=...)``, a range per autograd op
    with ``seq`` / ``stashed seq`` (True; None, the default: where the program imported torch and
    torch sees a GPU; False: never); see :mod:`profiler.gpu.autograd_ranges`.
    Entering raises :class:`NvtxUnavailableError` if there is no backend, or ``autograd=True``
    cannot be had. Leaving restores what was in force before (nothing, or an outer
    ``emit_nvtx``'s settings); PyTorch's ranges stop before rlprof's.
    """

    def __init__(
        self, enabled: bool = True, record_shapes: bool = False, *, backend: str | NvtxBackend | None = None,
        autograd: bool | None = None,
    ) -> None:
        if not isinstance(enabled, bool):
            raise TypeError(f"emit_nvtx: enabled must be True or False, got {enabled!r}")
        if not isinstance(record_shapes, bool):
            raise TypeError(f"emit_nvtx: record_shapes must be True or False, got {record_shapes!r}")
        _check_autograd(autograd)
        self.enabled = enabled
        self.settings = NvtxSettings(record_shapes=record_shapes, backend=backend, autograd=autograd)
        self._previous: NvtxSettings | None = None

    def __enter__(self) -> emit_nvtx:
        if self.enabled:
            self._previous = nvtx_settings()
            apply_nvtx(self.settings)
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        if self.enabled:
            apply_nvtx(self._previous)

    def __repr__(self) -> str:
        return f"emit_nvtx(enabled={self.enabled}, record_shapes={self.settings.record_shapes})"
