"""Memory over time, in every process: resident memory samples, and Python allocations per block.

Two measurements, off until :func:`start_sampling` asks for them, and free for the hot path while
off (nothing is installed on the timer blocks until then):

* **Samples** of this process's memory: RSS, the resident set (every page it has in RAM, shared
  ones included), and on request USS, the unique set (the pages only it holds: what its exit
  would free, the honest figure for a forked worker whose pages start out shared with the
  trainer). A sample is taken every ``every_blocks`` timer blocks that close (MegEngine's
  ``sample_rate``: every n ops) and/or every ``interval`` seconds on a daemon thread, which also
  sees the memory of a long block while it runs. A sample is ``(time, rss, uss)``: seconds on the
  timers' clock, bytes, and bytes or None.
* **Allocations per block** (``track_allocations``, through :mod:`tracemalloc`): for each block,
  the Python memory still allocated when it closes beyond what was allocated when it opened,
  summed over its calls (``net_bytes``), and the most it held above that start at any moment of
  one call (``peak_bytes``). Allocations of every thread count toward the blocks open at the time.

A worker ships its samples and allocation figures in its timer payloads (:func:`drain_memory`,
called by ``snapshot_and_flush``): the trainer never reads another process's memory, so its own
hot path does not pay for the workers'. A process that merges payloads keeps its own samples for
its dump instead. The merger keeps them per worker process
(:class:`ProcessMemory`), and a dump holds every process's in its ``memory`` section
(:func:`memory_section`, described in docs/formats.md).

Samples are kept in a :class:`SampleBuffer` of bounded size: when it is full every other sample is
dropped, and from then on only every other new one is kept, so a run of any length keeps its whole
course at a coarser grain rather than only its end.
"""

from __future__ import annotations

import os
import sys
import threading
import tracemalloc
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from profiler.recording import events
from profiler.timing import block_hooks, timers
from profiler.timing.timers import TimerNode, TimerStack

if TYPE_CHECKING:
    import psutil

__all__ = [
    "DEFAULT_CAPACITY",
    "MemorySampling",
    "ProcessMemory",
    "SampleBuffer",
    "add_sample_companion",
    "clear_memory",
    "drain_memory",
    "is_sampling",
    "memory_section",
    "sample_now",
    "sampling_settings",
    "start_sampling",
    "stop_sampling",
]

DEFAULT_CAPACITY = 10_000
"""Samples kept per process before they are thinned (about a megabyte)."""

Sample = tuple[float, int, "int | None"]
"""``(time on the timers' clock, rss bytes, uss bytes or None)``."""

Allocation = tuple[tuple[str, ...], int, int, int]
"""``(block path, calls, net bytes, peak bytes)``: what a block allocated (see the module docstring)."""


@dataclass(frozen=True)
class MemorySampling:
    """What is sampled: handed to worker processes, so they sample as the trainer does."""

    every_blocks: int = 0
    """Sample when this many timer blocks have closed since the last sample; 0: never."""
    interval: float | None = None
    """Seconds between samples taken on a sampler thread; None: no thread."""
    uss: bool = False
    """Read the unique set size too: about 20 times the cost of the resident set size alone."""
    track_allocations: bool = False
    """Measure each block's Python allocations with tracemalloc (which slows allocation down)."""
    capacity: int = DEFAULT_CAPACITY
    """Samples kept per process before thinning (see :class:`SampleBuffer`)."""

    def __post_init__(self) -> None:
        if isinstance(self.every_blocks, bool) or not isinstance(self.every_blocks, int) or self.every_blocks < 0:
            raise ValueError(f"sample_rate (every_blocks) must be a whole number >= 0, got {self.every_blocks!r}")
        if self.interval is not None and (
            isinstance(self.interval, bool) or not isinstance(self.interval, (int, float)) or not self.interval > 0
        ):
            raise ValueError(f"the memory sampling interval must be a number of seconds > 0, got {self.interval!r}")
        if isinstance(self.capacity, bool) or not isinstance(self.capacity, int) or self.capacity < 2:
            raise ValueError(f"capacity must be a whole number of samples >= 2, got {self.capacity!r}")

    @property
    def samples(self) -> bool:
        """Whether anything triggers samples."""
        return self.every_blocks > 0 or self.interval is not None


class SampleBuffer:
    """Samples in time order, at most ``capacity`` of them: when full, every other one is dropped
    and every other new one kept from then on (``stride`` says one kept in how many taken)."""

    __slots__ = ("capacity", "samples", "stride", "_until_kept", "_lock")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self.samples: list[Sample] = []
        self.stride = 1
        self._until_kept = 1
        self._lock = threading.Lock()

    def add(self, sample: Sample) -> None:
        with self._lock:
            self._until_kept -= 1
            if self._until_kept > 0:
                return
            self._until_kept = self.stride
            self.samples.append(sample)
            if len(self.samples) >= self.capacity:
                del self.samples[1::2]
                self.stride *= 2

    def extend(self, samples: Iterable[Sample]) -> None:
        for sample in samples:
            self.add(sample)

    @classmethod
    def holding(cls, samples: list[Sample], stride: int) -> SampleBuffer:
        """A buffer holding ``samples`` already taken, one kept in every ``stride``."""
        buffer = cls(max(2, len(samples) + 1))
        buffer.samples = list(samples)
        buffer.stride = stride
        return buffer

    def take(self) -> list[Sample]:
        """Hand over and forget the samples held (the stride stays)."""
        with self._lock:
            taken, self.samples = self.samples, []
            return taken

    def since(self, moment: float) -> list[Sample]:
        """A copy of the samples taken at or after ``moment``."""
        with self._lock:
            return [sample for sample in self.samples if sample[0] >= moment]


class _MemoryReader:
    """Reads this process's RSS cheaply (Linux: one read of /proc/self/statm through a file kept
    open) and its USS through psutil. A forked child reopens what it inherited, since
    /proc/self named the parent when the file was opened.

    psutil is imported when first needed (the USS, or the RSS where there is no /proc): every
    process that imports rlprof's timers imports this module, an env worker of ``rlprof run``
    included, and psutil's import is a quarter of what rlprof adds to such a worker's start.
    """

    __slots__ = ("_pid", "_statm", "_process", "_page_size")

    def __init__(self) -> None:
        self._pid = 0
        self._statm: int | None = None
        self._process: psutil.Process | None = None
        self._page_size = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def _follow_fork(self) -> None:
        pid = os.getpid()
        if pid == self._pid:
            return
        self.close()
        self._pid = pid
        self._process = None
        if sys.platform.startswith("linux"):
            try:
                self._statm = os.open("/proc/self/statm", os.O_RDONLY)
            except OSError:
                self._statm = None

    def rss(self) -> int:
        self._follow_fork()
        if self._statm is not None:
            try:
                return int(os.pread(self._statm, 128, 0).split()[1]) * self._page_size
            except (OSError, ValueError, IndexError):
                os.close(self._statm)
                self._statm = None
        return int(self._psutil_process().memory_info().rss)

    def uss(self) -> int | None:
        self._follow_fork()
        import psutil

        try:
            return int(self._psutil_process().memory_full_info().uss)
        except (psutil.Error, AttributeError):  # not permitted, or not on this platform
            return None

    def _psutil_process(self) -> psutil.Process:
        if self._process is None:
            import psutil

            self._process = psutil.Process(self._pid)
        return self._process

    def close(self) -> None:
        if self._statm is not None:
            try:
                os.close(self._statm)
            except OSError:
                pass
            self._statm = None
        self._pid = 0


class _Allocations:
    """Python allocations per open block, through tracemalloc's current and peak counters.

    tracemalloc keeps one peak for the process. So that each block learns the peak within it, the
    peak is reset whenever a block opens or closes: the peak since the last reset belongs to the
    innermost block open in that thread, and a closing block hands its own peak to its parent.
    """

    __slots__ = ("open_by_stack", "by_node", "started_tracing")

    def __init__(self) -> None:
        # stack -> [node, allocated at entry, highest allocated seen while open], innermost last
        self.open_by_stack: dict[TimerStack, list[list[Any]]] = {}
        # node -> [calls, net bytes, peak bytes above the start of one call]
        self.by_node: dict[TimerNode, list[int]] = {}
        self.started_tracing = False

    def start(self) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(1)
            self.started_tracing = True
        self.open_by_stack.clear()

    def stop(self) -> None:
        if self.started_tracing:
            tracemalloc.stop()
            self.started_tracing = False
        self.open_by_stack.clear()

    def enter(self, node: TimerNode) -> None:
        current, peak = tracemalloc.get_traced_memory()
        stack = node._stack
        open_blocks = self.open_by_stack.get(stack)
        if open_blocks is None:
            open_blocks = self.open_by_stack[stack] = []
        elif open_blocks and peak > open_blocks[-1][2]:
            open_blocks[-1][2] = peak
        tracemalloc.reset_peak()
        open_blocks.append([node, current, current])

    def exit(self, node: TimerNode) -> None:
        current, peak = tracemalloc.get_traced_memory()
        open_blocks = self.open_by_stack.get(node._stack)
        if not open_blocks or open_blocks[-1][0] is not node:
            return  # opened before tracking started
        _, at_entry, highest = open_blocks.pop()
        highest = max(highest, peak)
        figures = self.by_node.get(node)
        if figures is None:
            figures = self.by_node[node] = [0, 0, 0]
        figures[0] += 1
        figures[1] += current - at_entry
        figures[2] = max(figures[2], highest - at_entry)
        if open_blocks and highest > open_blocks[-1][2]:
            open_blocks[-1][2] = highest
        tracemalloc.reset_peak()

    def figures(self, stack: TimerStack) -> list[Allocation]:
        """Each block's figures, its path seen from ``stack`` (another thread's blocks under
        ``thread:<name>``, as in a dump); blocks of trees reset since are left out."""
        allocations = []
        for node, (calls, net, peak) in list(self.by_node.items()):
            path = _path_from(node, stack)
            if path is not None:
                allocations.append((path, calls, net, peak))
        return allocations


def _path_from(node: TimerNode, stack: TimerStack) -> tuple[str, ...] | None:
    names = []
    current: TimerNode | None = node
    while current is not None and current.parent is not None:
        names.append(current.name)
        current = current.parent
    owner = node._stack
    if owner is None or current is not owner.root:
        return None  # its tree was reset: it is no longer in any dump
    names.reverse()
    if owner is not stack:
        names.insert(0, f"thread:{owner.thread_name}")
    return tuple(names)


class _ProcessSampler:
    """This process's sampling: its settings, samples, allocations and sampler thread."""

    __slots__ = (
        "settings", "buffer", "reader", "allocations", "every_blocks", "blocks_left", "thread",
        "stopping", "lock",
    )

    def __init__(self) -> None:
        self.settings: MemorySampling | None = None
        self.buffer = SampleBuffer()
        self.reader = _MemoryReader()
        self.allocations = _Allocations()
        self.every_blocks = 0
        self.blocks_left = 0
        self.thread: threading.Thread | None = None
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def forget_parent(self) -> None:
        """In a forked child: keep the settings (its blocks still count, through the observers
        bound to this object) but none of the parent's samples, figures, files, locks or thread;
        a worker that samples by time starts its own thread (:func:`apply_sampling`)."""
        capacity = self.settings.capacity if self.settings is not None else DEFAULT_CAPACITY
        self.buffer = SampleBuffer(capacity)
        self.reader.close()
        self.allocations.open_by_stack.clear()
        self.allocations.by_node.clear()
        self.blocks_left = self.every_blocks
        self.thread = None
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def sample(self) -> None:
        settings = self.settings
        uss = self.reader.uss() if settings is not None and settings.uss else None
        self.buffer.add((timers.now(), self.reader.rss(), uss))
        for take_sample in _sample_companions:
            take_sample()

    # The block observers (see block_hooks.observe_blocks): one of these is installed, never a branch.
    def count_block(self, node: TimerNode) -> None:
        self.blocks_left -= 1
        if self.blocks_left <= 0:
            self.blocks_left = self.every_blocks
            self.sample()

    def count_block_and_allocations(self, node: TimerNode) -> None:
        self.allocations.exit(node)
        self.count_block(node)

    def run_thread(self, interval: float) -> None:
        while not self.stopping.wait(interval):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a failed reading must not end the sampling
                continue

    def start_thread(self, interval: float) -> None:
        if self.thread is not None and self.thread.is_alive():
            return
        self.stopping = threading.Event()
        self.thread = threading.Thread(
            target=self.run_thread, args=(interval,), name="rlprof memory sampler", daemon=True
        )
        self.thread.start()

    def stop_thread(self) -> None:
        thread, self.thread = self.thread, None
        self.stopping.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()


_sampler = _ProcessSampler()
os.register_at_fork(after_in_child=_sampler.forget_parent)


def start_sampling(
    every_blocks: int = 0,
    interval: float | None = None,
    *,
    uss: bool = False,
    track_allocations: bool = False,
    capacity: int = DEFAULT_CAPACITY,
) -> MemorySampling:
    """Sample this process's memory from now on; returns the settings, for worker processes.

    ``every_blocks=N`` samples each time N timer blocks have closed; ``interval`` samples every so
    many seconds on a daemon thread; both may be on. ``uss`` adds the unique set size to each
    sample, ``track_allocations`` measures each block's Python allocations (see the module
    docstring for both). A sample is taken at once. Calling it again replaces the settings, and
    keeps the samples taken so far. Raises ``ValueError`` for a meaningless option, or when
    nothing would be measured.
    """
    settings = MemorySampling(every_blocks, interval, uss, track_allocations, capacity)
    apply_sampling(settings)
    return settings


def apply_sampling(settings: MemorySampling) -> None:
    """Sample as ``settings`` say (what a worker does with the trainer's :func:`sampling_settings`)."""
    if not settings.samples and not settings.track_allocations:
        raise ValueError(
            "nothing to measure: give sample_rate (every_blocks) > 0, an interval, or "
            "track_allocations=True"
        )
    sampler = _sampler
    with sampler.lock:
        if sampler.settings is not None and sampler.settings.capacity != settings.capacity:
            sampler.buffer.capacity = settings.capacity
        sampler.stop_thread()
        sampler.settings = settings
        sampler.every_blocks = sampler.blocks_left = settings.every_blocks
        if settings.track_allocations:
            sampler.allocations.start()
        else:
            sampler.allocations.stop()
        _install_observers(settings)
        if settings.interval is not None:
            sampler.start_thread(settings.interval)
    if settings.samples:
        sampler.sample()


def _install_observers(settings: MemorySampling) -> None:
    sampler = _sampler
    on_enter = sampler.allocations.enter if settings.track_allocations else None
    if settings.every_blocks and settings.track_allocations:
        on_exit = sampler.count_block_and_allocations
    elif settings.every_blocks:
        on_exit = sampler.count_block
    elif settings.track_allocations:
        on_exit = sampler.allocations.exit
    else:
        on_exit = None
    block_hooks.observe_blocks(on_enter, on_exit, companion="memory")


def stop_sampling() -> None:
    """Stop sampling and tracking allocations; what was measured stays until dumped or drained."""
    sampler = _sampler
    with sampler.lock:
        block_hooks.observe_blocks(None, None, companion="memory")
        sampler.stop_thread()
        sampler.allocations.stop()
        sampler.settings = None


def is_sampling() -> bool:
    return _sampler.settings is not None


def sampling_settings() -> MemorySampling | None:
    """The settings in force (None while off): what workers started now should sample with."""
    return _sampler.settings


_sample_companions: list[Any] = []
"""Functions called at every sample, after it is taken: profiler.gpu.device_memory's, which
records the GPU's memory beside the host's (recording sits below gpu, so gpu adds itself here)."""


def add_sample_companion(take_sample: Any) -> None:
    """Call ``take_sample()`` at every memory sample of this process (once per function)."""
    if take_sample not in _sample_companions:
        _sample_companions.append(take_sample)


def sample_now() -> None:
    """Take one sample now, whether sampling is on or not (a session takes one as it ends)."""
    _sampler.sample()


def clear_memory() -> None:
    """Forget every sample and allocation figure taken so far (the settings stay)."""
    _sampler.buffer.take()
    _sampler.allocations.by_node.clear()


def drain_memory(stack: TimerStack) -> tuple[Any, ...] | None:
    """The samples and allocations measured since the last drain, as the plain-data ``memory``
    field of a payload: ``(host, clock_origin, samples, allocations)``; None when there is
    nothing. Called by ``snapshot_and_flush`` for the stack it flushes.

    A process that merges payloads (a merger is attached to one of its stacks) is a trainer: it
    keeps its samples for its own dump, and workers that run as its threads, sharing its memory,
    ship none.
    """
    sampler = _sampler
    if not sampler.buffer.samples and not sampler.allocations.by_node:
        return None  # the common case, first: this process measures no memory
    if any(other.mergers for other in timers.all_timer_stacks()):
        return None
    samples = sampler.buffer.take()
    allocations = sampler.allocations.figures(stack)
    sampler.allocations.by_node.clear()
    if not samples and not allocations:
        return None
    return (events.HOST, events.clock_origin(), tuple(samples), tuple(allocations))


def memory_section(stack: TimerStack, mergers: Sequence[Any] | None = None) -> dict[str, Any] | None:
    """The ``memory`` section of ``stack``'s dump: this process, as ``trainer``, with the samples
    taken since the stack started, then the worker processes of ``mergers`` (default: every merger
    attached to the stack); None when no process measured anything."""
    sampler = _sampler
    processes = []
    samples = sampler.buffer.since(stack.start_time)
    allocations = sampler.allocations.figures(stack)
    if samples or allocations:
        own = ProcessMemory(os.getpid(), "trainer", 0.0)
        own.samples = SampleBuffer.holding(samples, sampler.buffer.stride)
        own.add_allocations(allocations)
        processes.append(own.to_entry())
    chosen = list(stack.mergers if mergers is None else mergers)
    processes.extend(entry for merger in chosen for entry in merger.memory_processes())
    if not processes:
        return None
    return {"unit": "bytes", "clock": events.CLOCK_NAME, "processes": processes}


class ProcessMemory:
    """One process's memory as a dump shows it: samples on the trainer's clock, and allocations
    summed by block path. The merger keeps one per worker process it hears from."""

    __slots__ = ("pid", "name", "clock_offset", "samples", "allocations")

    def __init__(self, pid: int, name: str, clock_offset: float, capacity: int = DEFAULT_CAPACITY) -> None:
        self.pid = pid
        self.name = name
        self.clock_offset = clock_offset
        self.samples = SampleBuffer(capacity)
        self.allocations: dict[tuple[str, ...], list[int]] = {}

    @classmethod
    def from_payload(cls, pid: int, name: str, field: tuple[Any, ...], capacity: int = DEFAULT_CAPACITY) -> ProcessMemory:
        """The record of a worker process first heard from with this payload ``memory`` field;
        a process on another machine has its times shifted onto this one's clock by wall clock."""
        host, origin = field[0], field[1]
        offset = 0.0 if host == events.HOST else origin - events.clock_origin()
        return cls(pid, name, offset, capacity)

    def add_payload(self, field: tuple[Any, ...]) -> None:
        """Add a validated payload ``memory`` field (see :func:`drain_memory`)."""
        _, _, samples, allocations = field
        offset = self.clock_offset
        self.samples.extend((at + offset, int(rss), None if uss is None else int(uss)) for at, rss, uss in samples)
        self.add_allocations(allocations)

    def add_allocations(self, allocations: Iterable[Allocation]) -> None:
        for path, calls, net, peak in allocations:
            figures = self.allocations.get(tuple(path))
            if figures is None:
                self.allocations[tuple(path)] = [calls, net, peak]
            else:
                figures[0] += calls
                figures[1] += net
                figures[2] = max(figures[2], peak)

    def to_entry(self) -> dict[str, Any]:
        """This process's entry in the dump's ``memory`` section (see docs/formats.md)."""
        return {
            "pid": self.pid,
            "name": self.name,
            "clock_offset": self.clock_offset,
            "stride": self.samples.stride,
            "samples": [list(sample) for sample in self.samples.since(float("-inf"))],
            "blocks": [
                {"path": list(path), "calls": calls, "net_bytes": net, "peak_bytes": peak}
                for path, (calls, net, peak) in self.allocations.items()
            ],
        }
