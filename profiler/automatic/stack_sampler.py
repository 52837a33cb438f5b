"""Where the untimed time went: a low-rate sampler of the trainer's stack outside any block.

Blocks say what they are; the time between them (the root's self time, "untimed") says nothing.
A :class:`StackSampler` looks at one thread — the trainer's — every few milliseconds from a
thread of its own (``sys._current_frames()``: no signal, no tracing, nothing slowed between
looks) and, **only when no block is open in that thread**, counts the place the thread is at:
the innermost frame of the program's own code (function, file and line), or, when the thread
is in library code only, the innermost frame. Samples taken while a block is open are counted
apart and attributed to nothing: the blocks already say what that time was. Where rlprof's C
helpers were built, the sampling thread waits, and takes those looks, without the GIL
(``_block_watch.c``), so they do not make the watched thread hand the GIL over.

The counts go into the dump's ``untimed_samples`` section (docs/formats.md): per place, the
samples and the seconds they stand for (each sample, the time since the one before).
``rlprof analyze`` shares the untimed time the tree measured among the places in proportion to
those seconds, with the sampling error (:mod:`profiler.analysis.untimed_places`). The sampler's
own cost is measured by ``benchmarks/run_overhead.py``, not tested.

**In an env worker process** (``in_worker=True``: ``envmanager.instrumentation`` starts one in
every worker it times in place) the blocks are the env calls, and the sampler names the rest of
the worker's time: its vector env's loop reading the next command or sending results, and any
call the trainer makes of the env outside ``step`` and ``reset`` (``AsyncVectorEnv.call``,
SB3's ``env_method``). Frames outside the worker's own process start
(``multiprocessing``'s ``BaseProcess._bootstrap``) are the parent's, copied by ``fork``: they are
never a place. A place in library code only names the worker's loop as its call
(``_recv (connection.py:430) in _async_worker``). The worker ships :meth:`StackSampler.section`
with its timers, so its counts are cumulative and the last shipment holds them all.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator
from types import CodeType, FrameType
from typing import Any

from profiler.timing import accelerator, timers
from profiler.timing.timers import TimerStack

__all__ = ["DEFAULT_INTERVAL", "LONGEST_INTERVAL", "MAX_PLACES", "THINNING", "WORKER_INTERVAL", "StackSampler",
           "file_kind", "forget_samples", "is_sampled", "next_wait", "untimed_samples_section"]

DEFAULT_INTERVAL = 0.02
"""Seconds between the trainer's first looks: 50 samples a second. A look costs the trainer more
than its own few microseconds: on a machine with no core to spare, every wake-up of the sampler's
thread puts the trainer back in the queue for a core once more (about one more time per look,
``benchmarks/sampler_wakeups.py``), and that wait grows with the machine's load. So rarer looks
cost less, and more samples give tighter figures: the looks start at this rate, which gives a
run of two seconds a hundred samples, and thin out as the run goes on (:func:`next_wait`)."""

LONGEST_INTERVAL = 0.1
"""Seconds between the trainer's looks once its run has gone on for ten seconds: 10 a second, the
rate that samples a long run (its first ten seconds gave about 260 samples; an hour gives 36,000)."""

THINNING = 100
"""How fast the looks thin out: each wait is the time sampled so far divided by this, between the
first and the longest interval. The samples then grow by about ``THINNING`` each time the run's
length grows e-fold (69 per doubling) until the waits reach the longest interval."""

WORKER_INTERVAL = 0.1
"""Seconds between two looks in an env worker process: 10 samples a second. A worker is sampled
for as long as it runs, and most of its untimed time is waiting for the trainer, which a few
samples tell; rarer looks cost the env's steps less (``benchmarks/worker_stack_sampler.py``).
A look, its wake-up included, cost an idle worker 0.1 to 0.15 ms of CPU on a loaded 2-core
machine: at 50 a second 5.7 ms of CPU a second per worker, at 10 a second 1.5 ms, four SB3
workers on two cores then taking 0.3% of the machine rather than 1.1% (docs/run.md)."""

BLOCK_WATCH_VERSION = 1
"""The interface version ``_block_watch.c`` must say (its ``BLOCK_WATCH_VERSION``): raised with it.
A build that says another is stale and is not used (see
:func:`profiler.timing.accelerator.load_extension`)."""

MAX_PLACES = 50
"""Places kept in the dump, most seconds first; the rest add up in ``other_places``."""

_PROFILER_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# rlprof's own packages: profiler and its sibling envmanager. Their frames are never a place.
_OWN_FOLDERS = (_PROFILER_FOLDER + os.sep,
                os.path.join(os.path.dirname(_PROFILER_FOLDER), "envmanager") + os.sep)
# sysconfig.get_paths() called once: each call expands every path of the scheme anew (5 M
# instructions for five calls, before every rlprof run's program starts).
_LIBRARY_FOLDERS = tuple(sorted(
    {os.path.abspath(path) + os.sep for key, path in sysconfig.get_paths().items()
     if key in ("stdlib", "platstdlib", "purelib", "platlib", "scripts") and path},
))
_PROCESS_FILE = os.path.join("multiprocessing", "process.py")  # BaseProcess._bootstrap and run
_BY_VALUE = "<dynamic-code>"  # cloudpickle's file name for code it pickled by value
_sections: dict[int, StackSampler] = {}  # id(stack) -> the last sampler that watched it
# The C wait (_block_watch.c): the waits, and the looks that find a block open, without the GIL.
# Without it (RLPROF_PURE_PYTHON=1, no compiler at install, a stale build) the sampler's thread
# waits and looks in Python, the reference, which gives the same counts at a higher cost to the
# watched thread: each look takes the GIL from it.
_block_watch, _ = accelerator.load_extension("profiler.automatic._block_watch", BLOCK_WATCH_VERSION,
                                             "the stack sampler's C wait")


class StackSampler:
    """Samples one thread's stack while no block is open in it, from a daemon thread.

    ``start()`` and ``stop()`` once each; :meth:`section` is the dump's ``untimed_samples``.
    """

    def __init__(self, thread: threading.Thread | None = None, *, interval: float = DEFAULT_INTERVAL,
                 longest_interval: float = LONGEST_INTERVAL, in_worker: bool = False) -> None:
        self.thread = thread or threading.current_thread()
        self.in_worker = in_worker
        self.stack: TimerStack = timers.get_timer_stack_for_thread(self.thread)
        self.interval = interval
        self.longest_interval = max(interval, longest_interval)
        self._looks_outside_blocks = 0
        self._python_in_blocks = 0
        self._opened_before_the_read = 0  # looks outside any block whose frame was read inside one
        self._watch: Any = None  # the C wait, once started where it was built
        # [samples, seconds, seconds squared, first look, last look] per place; None is the place
        # of samples in no code to name. The squares give the sampling error of looks that stand
        # for unequal times; the looks' clock readings (the timeline's clock) tell the analysis
        # whether a place ran in the training loop or in the start-up.
        self.places: dict[tuple[str, str, int, str] | None, list[Any]] = {}
        self._kind_of_file: dict[str, str] = {}
        self._lines: dict[CodeType, dict[int, int]] = {}  # per code object: line per instruction
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    @property
    def samples(self) -> int:
        """The looks taken: outside any block (each counted for a place or as unnamed) and inside one."""
        return self._looks_outside_blocks + self.in_blocks

    @property
    def in_blocks(self) -> int:
        """The looks that found a block open (nothing else was read), or that found none open but
        one open once the thread's frame was read."""
        looks = self._watch.in_blocks if self._watch is not None else self._python_in_blocks
        return looks + self._opened_before_the_read

    def start(self) -> StackSampler:
        if not self.in_worker:  # a worker ships its section; its process writes no dump
            _sections[id(self.stack)] = self
        if _block_watch is not None:
            self._watch = _block_watch.BlockWatch(self.stack, self.interval, self.longest_interval, THINNING)
        self._sampler = threading.Thread(target=self._run, name="rlprof-stack-sampler", daemon=True)
        self._sampler.start()
        return self

    @property
    def native_id(self) -> int | None:
        """The sampling thread's native id once started (a worker leaves its waits for a core
        out of the program's figures)."""
        return self._sampler.native_id if self._sampler is not None else None

    def stop(self) -> None:
        """Stop sampling and wait for the sampling thread to end."""
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        if self._sampler is not None and self._sampler is not threading.current_thread():
            self._sampler.join()

    def _run(self) -> None:
        # Each sample stands for the time since the one before, not for one interval: while the
        # watched thread holds the GIL the sampler wakes late, so counting samples alone would
        # favour the places where it sleeps or waits (which release the GIL) over Python code.
        ident = self.thread.ident
        is_alive = self.thread.is_alive
        stopped = self._stop.is_set
        stack = self.stack
        clock = time.perf_counter
        for elapsed in self._looks_outside_any_block():
            frame = sys._current_frames().get(ident)  # noqa: SLF001 - the documented way to see another thread
            if stopped():
                # The look began before stop() and ended after: the watched thread is in rlprof's
                # own exit (joining this thread), not in the program.
                return
            if frame is None:
                if not is_alive():
                    return
                continue
            if stack.current is not stack.root:
                # The look found no block open, but the thread opened one before its frame was
                # read (the look waits for the GIL; a loop's next vector step begins microseconds
                # after the last one ended): the frame is inside that block, whose time it is.
                # The check and the read are a few bytecodes apart with the GIL held: the thread
                # could open a block between them only if this one kept the GIL a whole switch
                # interval.
                del frame
                self._opened_before_the_read += 1
                continue
            looked = clock()
            self._looks_outside_blocks += 1
            place = self._place(frame)
            del frame
            counts = self.places.get(place)
            if counts is None:
                self.places[place] = [1, elapsed, elapsed * elapsed, looked, looked]
            else:
                counts[0] += 1
                counts[1] += elapsed
                counts[2] += elapsed * elapsed
                counts[4] = looked

    def _looks_outside_any_block(self) -> Iterator[float]:
        """The seconds each look that found no block open stands for, until :meth:`stop`.

        A look that finds a block open reads nothing else (the blocks say what that time was, and
        ``sys._current_frames()``, a dict and a frame object per thread, is most of a look's cost)
        and is only counted, in C without the GIL where the C wait was built. A watched thread
        that ends is noticed at the next look outside any block (:meth:`_run`); one that ended
        with a block still open in its stack (a ``with`` block cannot) is looked at until
        :meth:`stop`, at most ten times a second once the waits have thinned out."""
        if self._watch is not None:
            next_look = self._watch.next_look
            while (elapsed := next_look()) is not None:
                yield elapsed
            return
        stack = self.stack
        wait = self._stop.wait
        interval, longest_interval = self.interval, self.longest_interval
        clock = time.perf_counter
        started = last = clock()
        while not wait(next_wait(last - started, interval, longest_interval)):
            now = clock()
            elapsed, last = now - last, now
            if stack.current is not stack.root:
                self._python_in_blocks += 1
                continue
            yield elapsed

    def _place(self, frame: FrameType | None) -> tuple[str, str, int, str] | None:
        """The innermost frame of the program's own code and the call it is in (the function it
        called: ``PPO.learn``, ``import`` ...; empty when the program's own code runs), else the
        innermost frame outside rlprof."""
        innermost = None
        called: FrameType | None = None
        inner: FrameType | None = None  # the frame called by the one being looked at
        worker_loop: FrameType | None = None  # in a worker: the function its process runs
        in_worker = self.in_worker
        while frame is not None:
            code = frame.f_code
            kind = self._kind_of_file.get(code.co_filename)
            if kind is None:
                kind = self._kind_of_file[code.co_filename] = file_kind(code.co_filename)
            if in_worker and code.co_filename.endswith(_PROCESS_FILE):
                if code.co_name == "run":
                    worker_loop = inner
                elif code.co_name == "_bootstrap":
                    break  # the frames outside it are the parent's (fork)
            if kind == "program":
                filename = code.co_filename if code.co_filename != _BY_VALUE else _main_file()
                return code.co_name, filename, self._line(frame, code), _call_name(called)
            if kind == "library":
                if innermost is None:
                    innermost = (code.co_name, code.co_filename, self._line(frame, code), "")
                called = frame
            if kind != "rlprof":  # rlprof's own frames (a process target it wrapped) are passed through
                inner = frame
            frame = frame.f_back
        if innermost is not None and worker_loop is not None:
            return (*innermost[:3], _call_name(worker_loop))
        return innermost

    def _line(self, frame: FrameType, code: CodeType) -> int:
        """The frame's line, remembered per instruction: ``f_lineno`` scans the code's line table
        from its start, tens of microseconds at the end of a long module (a CleanRL script's
        training loop runs at its top level), and the sampler finds the same few places again
        and again."""
        lines = self._lines.get(code)
        if lines is None:
            lines = self._lines[code] = {}
        instruction = frame.f_lasti
        line = lines.get(instruction)
        if line is None:
            # A frame between instructions (one a C call re-entered, say) has no line: 0 then.
            line = lines[instruction] = frame.f_lineno or 0
        return line

    def section(self) -> dict[str, Any]:
        """The counts as the dump's ``untimed_samples`` section (docs/formats.md); safe to call
        while sampling (a worker ships it as it goes)."""
        # list() of a dict's items and of a place's counts copies them without letting the
        # sampling thread in between.
        counted = [(place, list(counts)) for place, counts in list(self.places.items())]
        unnamed = next((counts for place, counts in counted if place is None), [0, 0.0, 0.0, 0.0, 0.0])
        ranked = sorted(((place, counts) for place, counts in counted if place is not None),
                        key=lambda item: -item[1][1])
        left_out = ranked[MAX_PLACES:]
        return {
            "thread": self.thread.name,
            "interval_seconds": self.interval,
            "longest_interval_seconds": self.longest_interval,
            "samples": self.samples,
            "in_blocks": self.in_blocks,
            "unnamed": _sampled(unnamed),
            "other_places": _sampled([sum(counts[column] for _, counts in left_out) for column in range(3)]),
            "places": [{"function": function, "file": file, "line": line, "calls": calls, **_sampled(counts),
                        "first_look": counts[3], "last_look": counts[4]}
                       for (function, file, line, calls), counts in ranked[:MAX_PLACES]],
        }


def next_wait(sampled_seconds: float, interval: float, longest_interval: float) -> float:
    """The wait before the next look, once the sampler has run ``sampled_seconds``: the first
    interval until the run has gone on for a hundred of them (:data:`THINNING`), then a hundredth
    of the time run so far, up to the longest interval. A short run gets its samples; a long one is
    looked at rarely, so the wake-ups cost it less."""
    return min(longest_interval, max(interval, sampled_seconds / THINNING))


def _sampled(counts: list[Any]) -> dict[str, Any]:
    samples, seconds, seconds_squared = counts[:3]
    return {"samples": samples, "seconds": seconds, "seconds_squared": seconds_squared}


def _call_name(frame: FrameType | None) -> str:
    """What a library frame is, as a reader knows it: ``import`` for the import machinery, else the
    function's qualified name (``OnPolicyAlgorithm.learn``)."""
    if frame is None:
        return ""
    code = frame.f_code
    if code.co_filename.startswith("<frozen importlib"):
        return "import"
    return getattr(code, "co_qualname", code.co_name)


def _main_file() -> str:
    """The program's main script, where code pickled by value comes from."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    return os.path.abspath(main_file) if isinstance(main_file, str) else _BY_VALUE


def file_kind(filename: str) -> str:
    """``"rlprof"`` for rlprof's own files (never a place), ``"library"`` for the standard library,
    installed packages and frozen modules, ``"program"`` for the rest: the program's own code,
    which includes the code cloudpickle sent to a spawned worker by value (the functions and classes
    of the program's main script, whose file it renames ``<dynamic-code>``)."""
    if filename == _BY_VALUE:
        return "program"
    if filename.startswith("<"):
        return "library"
    path = os.path.abspath(filename)
    if path.startswith(_OWN_FOLDERS):
        return "rlprof"
    if path.startswith(_LIBRARY_FOLDERS) or os.sep + "site-packages" + os.sep in path:
        return "library"
    return "program"


def untimed_samples_section(stack: TimerStack) -> dict[str, Any] | None:
    """The ``untimed_samples`` section of the sampler that watched ``stack``, if one did."""
    sampler = _sections.get(id(stack))
    if sampler is None or sampler.stack is not stack:
        return None
    return sampler.section()


def is_sampled(stack: TimerStack) -> bool:
    """Whether a sampler watches ``stack`` (``rlprof run``'s trainer, unless ``--no-stack-sampler``):
    the env workers the trainer starts then sample their own stacks too."""
    sampler = _sections.get(id(stack))
    return sampler is not None and sampler.stack is stack and not sampler._stop.is_set()


def forget_samples() -> None:
    """Drop the samplers' counts (``rlprof run`` does after writing its files)."""
    _sections.clear()
