"""GPU memory per block, when asked: how much device memory each block left allocated (its net
allocation, summed over its calls) and the most it held above what was allocated as it opened
(its peak, the largest over its calls).

``track_block_memory("cuda")`` observes every block: as a block opens it reads the device's
allocated memory (``torch.cuda.memory_allocated``) and restarts the allocator's peak
(``torch.cuda.reset_peak_memory_stats``); as it closes it reads the peak since
(``torch.cuda.max_memory_allocated``) and the memory allocated now. The peak counter is one per
device, so every read also raises the running peak of every block open around it: an outer
block's peak covers its inner blocks' even though each of them restarted the counter. This
restarts the program's own ``max_memory_allocated`` figures while on (said in docs/gpu.md).

Memory is counted per device for the whole process: allocations of other threads during a block
count toward it. Off (the default) nothing is observed. Tests inject a backend with
:func:`set_block_memory_backend`.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from profiler.timing import block_hooks
from profiler.timing.timers import TimerNode, TimerStack

__all__ = [
    "TorchCudaBlockMemory",
    "block_memory_section",
    "check_block_memory",
    "set_block_memory_backend",
    "stop_tracking_block_memory",
    "track_block_memory",
]


class TorchCudaBlockMemory:
    """``torch.cuda``'s allocator counters for one device."""

    def __init__(self, device: str) -> None:
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_available():
            raise RuntimeError("GPU memory per block needs PyTorch with a GPU visible "
                               "(torch not imported, or torch.cuda.is_available() is False)")
        self.cuda = torch.cuda
        self.device = device

    def allocated(self) -> int:
        return self.cuda.memory_allocated(self.device)

    def peak(self) -> int:
        return self.cuda.max_memory_allocated(self.device)

    def reset_peak(self) -> None:
        self.cuda.reset_peak_memory_stats(self.device)


class _BlockMemory:
    __slots__ = ("calls", "net_bytes", "peak_bytes")

    def __init__(self) -> None:
        self.calls = 0
        self.net_bytes = 0
        self.peak_bytes = 0


class _Tracker:
    def __init__(self, backend: Any, device: str) -> None:
        self.backend = backend
        self.device = device
        self.lock = threading.Lock()
        # Open blocks: node -> [allocated as it opened, running peak of allocated bytes].
        self.open: dict[TimerNode, list[int]] = {}
        self.figures: dict[TimerNode, _BlockMemory] = {}

    def _raise_open_peaks(self, peak: int) -> None:
        for figures in self.open.values():
            if peak > figures[1]:
                figures[1] = peak

    def enter(self, node: TimerNode) -> None:
        with self.lock:
            self._raise_open_peaks(self.backend.peak())
            allocated = self.backend.allocated()
            self.backend.reset_peak()
            self.open[node] = [allocated, allocated]

    def exit(self, node: TimerNode) -> None:
        with self.lock:
            self._raise_open_peaks(self.backend.peak())
            opened = self.open.pop(node, None)
            if opened is None:
                return
            figures = self.figures.get(node)
            if figures is None:
                figures = self.figures[node] = _BlockMemory()
            figures.calls += 1
            figures.net_bytes += self.backend.allocated() - opened[0]
            figures.peak_bytes = max(figures.peak_bytes, opened[1] - opened[0])


_tracker: _Tracker | None = None
_backend: Any = None


def set_block_memory_backend(backend: Any | None) -> None:
    """Read device memory through ``backend`` (``allocated()``, ``peak()``, ``reset_peak()``);
    None: torch.cuda's. For tests."""
    global _backend
    _backend = backend


def check_block_memory(device: str = "cuda") -> None:
    """Raise ``RuntimeError`` saying what is missing where ``device``'s memory cannot be read
    (no torch, no GPU); return where it can. Changes nothing."""
    _backend_for(device)


def _backend_for(device: str) -> Any:
    return _backend if _backend is not None else TorchCudaBlockMemory(device)


def track_block_memory(device: str = "cuda") -> None:
    """Measure every block's GPU memory on ``device`` from now on (see the module docstring).
    Raises ``RuntimeError`` saying what is missing without torch or a GPU."""
    global _tracker
    backend = _backend_for(device)
    _tracker = _Tracker(backend, device)
    block_hooks.observe_blocks(_tracker.enter, _tracker.exit, companion="block_device_memory")


def stop_tracking_block_memory() -> None:
    """Stop measuring; the figures so far stay, to dump."""
    block_hooks.observe_blocks(None, None, companion="block_device_memory")


def block_memory_section(stack: TimerStack) -> list[dict[str, Any]] | None:
    """The dump's ``device_memory`` section: per block measured, by path from the root, its calls,
    net bytes and peak bytes on the device; None when none was measured."""
    tracker = _tracker
    if tracker is None or not tracker.figures:
        return None
    entries = []
    for path, node in _walk(stack.root, ()):
        figures = tracker.figures.get(node)
        if figures is not None:
            entries.append({"path": list(path), "device": tracker.device, "calls": figures.calls,
                            "net_bytes": figures.net_bytes, "peak_bytes": figures.peak_bytes})
    return entries or None


def _walk(node: TimerNode, path: tuple[str, ...]) -> Any:
    for child in list(node.children.values()):
        child_path = (*path, child.name)
        yield child_path, child
        yield from _walk(child, child_path)


