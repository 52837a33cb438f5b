"""How long a block's work took on the GPU, beside the host time that only saw it launched.

CUDA runs kernels asynchronously: ``with hierarchical_timer("update")`` around a PyTorch update
measures how long the host took to *queue* the kernels, which can be a small fraction of what the
GPU spends on them. ``hierarchical_timer(name, device="cuda")`` also records a CUDA event on the
device's current stream as the block opens and another as it closes, and later reads the time
between them: the block's **device time**. Nothing waits on the hot path: the pair is queued, and
pairs whose end event the GPU has passed are read as later device blocks close (a non-blocking
query); the rest are waited for when the tree is dumped.

Device time is the time the stream took from the start event to the end event, as
``torch.cuda.Event.elapsed_time`` gives it: the block's kernels, and any time the stream sat idle
waiting for the host to queue them.

``cuda_sync=True`` times differently: it synchronises the device as the block opens and closes,
so the host time itself covers the block's GPU work, which is then also its device time. It stalls
the CPU until the GPU has caught up, twice per block, and breaks the overlap of host and device
work a training loop relies on: a measure for a short investigation, not to leave on.

The device is reached through an event backend, PyTorch's ``torch.cuda`` by default, resolved the
first time a device block runs: without torch or a visible GPU that block raises
:class:`DeviceTimingUnavailableError`, and everything else works. Tests inject a backend with
:func:`set_device_events`. Only the process that times the block keeps its device time: env
workers' device blocks are not shipped in their payloads.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Protocol

from profiler.timing import timers
from profiler.timing.timers import TimerNode, TimerStack

__all__ = [
    "DeviceEvents",
    "DeviceTime",
    "DeviceTimingUnavailableError",
    "TorchCudaEvents",
    "clear_device_times",
    "device_time_section",
    "drain_device_times",
    "resolve_device_times",
    "device_unavailable_reason",
    "set_default_device",
    "set_device_events",
]


class DeviceTimingUnavailableError(RuntimeError):
    """A device block was asked for where there is no torch or no GPU visible to it."""


class DeviceEvents(Protocol):
    """What device timing needs of the GPU runtime."""

    def record(self, device: str) -> Any:
        """A new event, recorded now on ``device``'s current stream."""

    def is_done(self, event: Any) -> bool:
        """Whether the device has passed ``event`` (must not block)."""

    def wait(self, event: Any) -> None:
        """Block until the device has passed ``event``."""

    def elapsed(self, start: Any, end: Any) -> float:
        """Seconds between two events the device has passed."""

    def synchronize(self, device: str) -> None:
        """Block until ``device`` has finished all its work."""


class TorchCudaEvents:
    """``torch.cuda`` events with timing enabled, recorded on the current stream."""

    def __init__(self) -> None:
        try:
            import torch
        except ImportError as error:
            raise DeviceTimingUnavailableError(
                "hierarchical_timer(device=...) needs PyTorch with CUDA, and torch is not installed"
            ) from error
        if not torch.cuda.is_available():
            raise DeviceTimingUnavailableError(
                "hierarchical_timer(device=...) needs a GPU, and torch.cuda.is_available() is False "
                "(no GPU visible, or a CPU-only build of torch)"
            )
        self.cuda = torch.cuda

    def record(self, device: str) -> Any:
        event = self.cuda.Event(enable_timing=True)
        event.record(self.cuda.current_stream(device))
        return event

    def is_done(self, event: Any) -> bool:
        return bool(event.query())

    def wait(self, event: Any) -> None:
        event.synchronize()

    def elapsed(self, start: Any, end: Any) -> float:
        return start.elapsed_time(end) / 1000.0  # milliseconds

    def synchronize(self, device: str) -> None:
        self.cuda.synchronize(device)


class DeviceTime:
    """The device time of one block: total, count and per-run extremes, as the host figures."""

    __slots__ = ("device", "mode", "total", "count", "min", "max")

    def __init__(self, device: str, mode: str) -> None:
        self.device = device
        self.mode = mode  # "events" or "sync"
        self.total = 0.0
        self.count = 0
        self.min = float("inf")
        self.max = 0.0

    def add(self, seconds: float) -> None:
        self.total += seconds
        self.count += 1
        if seconds < self.min:
            self.min = seconds
        if seconds > self.max:
            self.max = seconds


class _DeviceTimer:
    """The process's device timing: its event backend, the pairs not read yet, the figures."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: DeviceEvents | None = None
        # (node, start event, end event, device time) in the order the blocks closed.
        self.pending: deque[tuple[TimerNode, Any, Any, DeviceTime]] = deque()
        self.times: dict[TimerNode, DeviceTime] = {}

    def backend(self) -> DeviceEvents:
        events = self.events
        if events is None:
            with self.lock:
                if self.events is None:
                    self.events = TorchCudaEvents()
                events = self.events
        return events

    def time_of(self, node: TimerNode, device: str, mode: str) -> DeviceTime:
        figures = self.times.get(node)
        if figures is None:
            figures = self.times.setdefault(node, DeviceTime(device, mode))
        return figures

    def resolve(self, wait: bool) -> None:
        """Read the pairs the device has finished, oldest first; all of them if ``wait``."""
        events = self.events
        pending = self.pending
        while pending:
            node, start, end, figures = pending[0]
            if wait:
                events.wait(end)  # type: ignore[union-attr]
            elif not events.is_done(end):  # type: ignore[union-attr]
                return
            pending.popleft()
            figures.add(events.elapsed(start, end))  # type: ignore[union-attr]


_timer = _DeviceTimer()


class DeviceBlock:
    """A block timed on the host as usual and on ``device`` with a pair of events."""

    __slots__ = ("node", "device", "start")

    def __init__(self, node: TimerNode, device: str) -> None:
        self.node = node
        self.device = device
        self.start: Any = None

    def __enter__(self) -> TimerNode:
        events = _timer.backend()
        self.node.__enter__()
        self.start = events.record(self.device)
        return self.node

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        events = _timer.events
        end = events.record(self.device)  # type: ignore[union-attr]
        figures = _timer.time_of(self.node, self.device, "events")
        _timer.pending.append((self.node, self.start, end, figures))
        self.node.__exit__(exc_type, exc_value, traceback)
        _timer.resolve(wait=False)


class SynchronizedBlock:
    """A block whose device is synchronised as it opens and closes (``cuda_sync=True``)."""

    __slots__ = ("node", "device", "start")

    def __init__(self, node: TimerNode, device: str) -> None:
        self.node = node
        self.device = device
        self.start = 0.0

    def __enter__(self) -> TimerNode:
        _timer.backend().synchronize(self.device)
        self.node.__enter__()
        self.start = timers.now()
        return self.node

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        _timer.events.synchronize(self.device)  # type: ignore[union-attr]
        elapsed = timers.now() - self.start
        self.node.__exit__(exc_type, exc_value, traceback)
        _timer.time_of(self.node, self.device, "sync").add(elapsed)


def device_block(node: TimerNode, device: str, cuda_sync: bool) -> DeviceBlock | SynchronizedBlock:
    """What ``hierarchical_timer(name, device=..., cuda_sync=...)`` returns."""
    if not isinstance(device, str) or not device:
        raise ValueError(f"hierarchical_timer: device must name a device such as 'cuda' or 'cuda:1', got {device!r}")
    return SynchronizedBlock(node, device) if cuda_sync else DeviceBlock(node, device)


def set_device_events(events: DeviceEvents | None) -> DeviceEvents | None:
    """Time device blocks through ``events`` (None: torch.cuda, resolved at the next device
    block); returns the backend used before. Pairs not read yet are read first."""
    previous = _timer.events
    if previous is not None:
        _timer.resolve(wait=True)
    _timer.events = events
    return previous


def set_default_device(device: str | None, cuda_sync: bool = False) -> str | None:
    """Time every ``hierarchical_timer`` block on ``device`` unless the call names its own
    (``set_config(device="cuda")``, ``Profiler(profile_device=True)``): no call has to change.
    None turns it off. Returns the default used before. Raises
    :class:`DeviceTimingUnavailableError` (and changes nothing) where the device cannot be timed.
    ``@timed`` functions and blocks entered as nodes are not device blocks."""
    if device is not None:
        if not isinstance(device, str) or not device:
            raise ValueError(f"device must name a device such as 'cuda' or 'cuda:1', got {device!r}")
        _timer.backend()  # no torch or no GPU: the error now, not at the first block
    previous = timers.default_device()
    timers.set_default_device(device, cuda_sync)
    return previous


def device_unavailable_reason() -> str | None:
    """Why blocks cannot be device-timed here (one line), or None when they can."""
    try:
        _timer.backend()
    except DeviceTimingUnavailableError as error:
        return str(error)
    return None


def resolve_device_times() -> None:
    """Wait for every device block closed so far and read its device time (at a dump)."""
    if _timer.pending:
        _timer.resolve(wait=True)


def clear_device_times() -> None:
    """Forget every device time measured (the pairs still pending included)."""
    _timer.pending.clear()
    _timer.times.clear()


def drain_device_times(stack: TimerStack) -> tuple[tuple[Any, ...], ...] | None:
    """The device times of ``stack``'s blocks measured since the last drain, as plain data for a
    worker's payload, ``((path, device, mode, total, count, min, max), ...)``, then zeroed; None
    when there are none. Pairs the device has not finished yet are not waited for: they travel in
    a later payload (a worker's flush must not hold its env up until its GPU catches up)."""
    if _timer.pending and _timer.events is not None:
        _timer.resolve(wait=False)
    if not _timer.times:
        return None
    drained = []
    for path, node in _paths(stack.root, ()):
        figures = _timer.times.get(node)
        if figures is not None and figures.count:
            drained.append((path, figures.device, figures.mode, figures.total, figures.count,
                            figures.min, figures.max))
            figures.total, figures.count, figures.min, figures.max = 0.0, 0, float("inf"), 0.0
    return tuple(drained) or None


def device_time_section(stack: TimerStack) -> list[dict[str, Any]] | None:
    """The dump's ``device_time`` section: one entry per block of ``stack``'s tree that was timed
    on a device, by its path of names from the root; None when there is none."""
    resolve_device_times()
    if not _timer.times:
        return None
    entries = []
    for path, node in _paths(stack.root, ()):
        figures = _timer.times.get(node)
        if figures is not None and figures.count:
            entries.append(
                {
                    "path": list(path),
                    "device": figures.device,
                    "mode": figures.mode,
                    "total": figures.total,
                    "count": figures.count,
                    "min": figures.min,
                    "max": figures.max,
                }
            )
    return entries or None


timers.set_device_block(device_block)


def _paths(node: TimerNode, path: tuple[str, ...]) -> Any:
    for child in list(node.children.values()):
        child_path = (*path, child.name)
        yield child_path, child
        yield from _paths(child, child_path)
