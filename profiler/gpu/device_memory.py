"""The GPU's memory beside the host's: allocated and reserved device memory as counter tracks.

At every memory sample (``sample_rate``/``every_blocks``, ``memory_interval``, ``profile_memory``;
see :mod:`profiler.recording.memory`), in every process that samples, each CUDA device PyTorch has
initialised in that process is read: the memory its caching allocator has handed to tensors
(``torch.cuda.memory_allocated``) and the memory it holds from the driver
(``torch.cuda.memory_reserved``, what ``nvidia-smi`` shows of it, less the context). Each reading
is a timeline counter, ``GPU cuda:0 allocated (MiB)`` and ``GPU cuda:0 reserved (MiB)``: the trace
draws them as counter tracks on the process, and an env worker's travel in its payloads with its
other counters. They are recorded while the timeline is (as every counter is).

Nothing here imports torch or initialises CUDA: a process that has not imported torch, or has
not used its GPU, has no GPU memory to show, and reading it must not create a CUDA context the
program did not (that costs hundreds of MiB of device memory and changes what is measured).
Tests inject a reader with :func:`set_device_memory`.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any, Callable

from profiler.recording import events, memory

__all__ = [
    "COUNTER_NAMES",
    "TorchMemoryHistory",
    "memory_snapshot",
    "memory_snapshot_file",
    "read_torch_cuda_memory",
    "record_device_memory",
    "set_device_memory",
    "set_memory_history",
    "start_memory_history",
    "stop_memory_history",
]

MEBIBYTE = 1024 * 1024

COUNTER_NAMES = ("GPU {device} allocated (MiB)", "GPU {device} reserved (MiB)")
"""The counters' names, ``{device}`` being ``cuda:0``, ``cuda:1``..."""

Reading = list[tuple[str, int, int]]  # (device, allocated bytes, reserved bytes)


def read_torch_cuda_memory() -> Reading:
    """Each initialised CUDA device's allocated and reserved bytes; nothing where torch was not
    imported by the program or CUDA not initialised."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return []
    return [(f"cuda:{index}", cuda.memory_allocated(index), cuda.memory_reserved(index))
            for index in range(cuda.device_count())]


_reader: Callable[[], Reading] = read_torch_cuda_memory


def set_device_memory(reader: Callable[[], Reading] | None) -> Callable[[], Reading]:
    """Read device memory with ``reader`` (None: torch.cuda's); returns the reader used before."""
    global _reader
    previous = _reader
    _reader = reader if reader is not None else read_torch_cuda_memory
    return previous


def record_device_memory() -> None:
    """Record each device's memory as counters now (called at every memory sample)."""
    try:
        readings = _reader()
    except Exception:  # a driver error must not break the host's sampling: no GPU reading then
        return
    allocated_name, reserved_name = COUNTER_NAMES
    for device, allocated, reserved in readings:
        events.record_counter(allocated_name.format(device=device), round(allocated / MEBIBYTE, 3))
        events.record_counter(reserved_name.format(device=device), round(reserved / MEBIBYTE, 3))


memory.add_sample_companion(record_device_memory)




# --- a memory snapshot: MXNet's gpu_memory_profile_filename_prefix ----------------------------------

HISTORY_ENTRIES = 100_000
"""Allocations and frees the allocator's history keeps (PyTorch's ring; older ones are dropped)."""


class TorchMemoryHistory:
    """PyTorch's record of every CUDA allocation with its Python stack
    (``torch.cuda.memory._record_memory_history``), read as a snapshot (``_snapshot``) that
    https://pytorch.org/memory_viz draws."""

    def available(self) -> str | None:
        """Why no history can be recorded here (one line), or None when it can."""
        torch = sys.modules.get("torch")
        if torch is None:
            return "the program has not imported torch"
        if not torch.cuda.is_available():
            return "torch.cuda.is_available() is False"
        return None

    def start(self) -> None:
        sys.modules["torch"].cuda.memory._record_memory_history(max_entries=HISTORY_ENTRIES)

    def stop(self) -> None:
        sys.modules["torch"].cuda.memory._record_memory_history(enabled=None)

    def snapshot(self) -> Any:
        return sys.modules["torch"].cuda.memory._snapshot()


_history: Any = TorchMemoryHistory()
_recording_history = False


def set_memory_history(history: Any | None) -> Any:
    """Record the allocator's history through ``history`` (None: PyTorch's); returns the one
    used before. For tests: an object with ``available``, ``start``, ``stop`` and ``snapshot``."""
    global _history
    previous = _history
    _history = history if history is not None else TorchMemoryHistory()
    return previous


def start_memory_history() -> str | None:
    """Start recording every CUDA allocation (for :func:`memory_snapshot`); returns why not, in
    one line, where it cannot (no torch imported by the program, no GPU)."""
    global _recording_history
    reason = _history.available()
    if reason is None and not _recording_history:
        _history.start()
        _recording_history = True
    return reason


def stop_memory_history() -> None:
    global _recording_history
    if _recording_history:
        _history.stop()
        _recording_history = False


def memory_snapshot() -> Any | None:
    """The allocator's snapshot (segments, blocks and the history of allocations with their
    stacks) while the history is recorded; None otherwise."""
    return _history.snapshot() if _recording_history else None


def memory_snapshot_file() -> bytes | None:
    """The allocator's snapshot as the pickle file PyTorch's memory viewer reads
    (https://pytorch.org/memory_viz), or None when no history is recorded.

    rlprof writes this pickle and never reads one: the viewer is PyTorch's, and a snapshot holds
    only plain containers (docs/trust.md)."""
    snapshot = memory_snapshot()
    return None if snapshot is None else pickle.dumps(snapshot)
