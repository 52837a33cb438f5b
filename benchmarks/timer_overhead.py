"""How much does a timer block cost? Nanoseconds per block, measured side by side in one process.

The floor is ``contextlib.nullcontext()``: the cheapest context manager Python offers. Goals
(issues 2, 9 and 27): enabled rlprof, per-call min and max included, within 0.8x of the floor on
the C accelerator and within 1.3x on the pure-Python core (both cores are measured in the same
rounds, switched between cases), disabled (or paused, the same switch) below it, and at least 4x
faster than ML-Agents' ``hierarchical_timer``. The "empty Python context manager" row is what
any block written in Python pays before its own work (the ``with`` and its two method calls), a
bound under the pure-Python core; the two "floor of a Python timer" rows add what any exact
Python timer pays on top (two clock reads; then finding its block in the thread's stack through a
Python call and a ``threading.local``), so that the pure-Python core's rows minus the second floor
row is its own bookkeeping (count, total, shortest and longest call, errors, the open block). The rows below the two "core" pairs run on the
process's own core (the accelerator where it is built; ``RLPROF_PURE_PYTHON=1`` forces Python). The "recording on" row is the price of timeline recording (issue 5), the
"inside a profiler.scope" row the price of noting the scope of each block (issue 9), the
"emit_nvtx" rows the price of an NVTX range per block with the nvtx package and no Nsight attached
(issue 13; no goal: it is on only while profiling under Nsight); with none of these in use the
plain rows are unchanged, as no flag is tested per block. Cases run in turn, round
after round; each figure is a median over rounds, and each ratio the median of per-round ratios,
so machine noise cancels.

    python benchmarks/timer_overhead.py [--rounds 25] [--number 20000] [--cpu-time]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
import timeit
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import profiler  # noqa: E402
from profiler import hierarchical_timer, timed  # noqa: E402
from profiler.recording import events
from profiler.timing import block_hooks, timers  # noqa: E402
from profiler.timing.accelerator import unavailable_reason  # noqa: E402
from profiler.timing.timer_node import COMPILED_ENTER, accelerated  # noqa: E402
from reference_timers import load_mlagents_timers  # noqa: E402


GOAL_ENABLED = 1.3
"""Issues 2 and 9: an enabled block, per-call min and max included, within 1.3x of nullcontext()
on the pure-Python core."""
GOAL_ACCELERATED = 0.8
"""Issue 27: the same block on the C accelerator, within 0.8x of nullcontext()."""
GOAL_DISABLED = 1.0
"""A disabled (or paused) block costs less than nullcontext()."""


_timer: Callable[[], float] = time.perf_counter
"""What the rounds are timed with: wall time, or this thread's CPU time with ``--cpu-time``
(steadier on a machine other work keeps busy: time spent descheduled is not counted)."""


def measure_side_by_side(
    cases: dict[str, Callable[[], None]],
    rounds: int,
    number: int,
    prepare: dict[str, Callable[[], None]] | None = None,
) -> dict[str, tuple[float, float]]:
    """Run every case once per round, in turn, and return (median ns per call, median ratio to
    the first case) for each: a machine that slows down mid-run slows all cases in that round.
    ``prepare[label]``, where given, runs untimed before each timing of that case."""
    samples: dict[str, list[float]] = {label: [] for label in cases}
    for _ in range(rounds):
        for label, body in cases.items():
            if prepare and label in prepare:
                prepare[label]()
            samples[label].append(timeit.timeit(body, timer=_timer, number=number) / number * 1e9)
    floor_samples = next(iter(samples.values()))
    return {
        label: (
            statistics.median(values),
            statistics.median(value / floor for value, floor in zip(values, floor_samples)),
        )
        for label, values in samples.items()
    }


class _EmptyContext:
    """A context manager made once, whose ``__enter__`` and ``__exit__`` do nothing: what any
    block written in Python pays before its own work (the ``with`` and two method calls)."""

    __slots__ = ()

    def __enter__(self) -> _EmptyContext:
        return self

    def __exit__(self, exc_type: object, exc_value: object, traceback: object) -> None:
        return None


class _ClockedContext:
    """A context manager made once that reads the clock as it opens and as it closes and keeps the
    difference: the floor of any exact timer written in Python (two clock reads, two stores)."""

    __slots__ = ("start", "elapsed")

    def __enter__(self) -> _ClockedContext:
        self.start = time.perf_counter()
        return self

    def __exit__(self, exc_type: object, exc_value: object, traceback: object) -> None:
        self.elapsed = time.perf_counter() - self.start


_thread_contexts = threading.local()


def _find_clocked_context(name: str) -> _ClockedContext:
    """What a per-thread timer pays to find its block before timing it: a Python call, the
    thread's ``threading.local`` and a dict lookup, as the pure-Python ``hierarchical_timer``."""
    return _thread_contexts.contexts[name]  # type: ignore[no-any-return]


def make_cases() -> dict[str, Callable[[], None]]:
    nullcontext = contextlib.nullcontext
    empty_context = _EmptyContext()
    clocked_context = _ClockedContext()
    _thread_contexts.contexts = {"block": _ClockedContext()}

    def floor() -> None:
        with nullcontext():
            pass

    def empty() -> None:
        with empty_context:
            pass

    def clocked() -> None:
        with clocked_context:
            pass

    def clocked_found() -> None:
        with _find_clocked_context("block"):
            pass

    def flat() -> None:
        with hierarchical_timer("block"):
            pass

    def three_deep() -> None:
        # Three nested blocks per call: reported per block below.
        with hierarchical_timer("outer"):
            with hierarchical_timer("middle"):
                with hierarchical_timer("inner"):
                    pass

    @timed
    def decorated() -> None:
        pass

    def undecorated() -> None:
        pass

    return {
        "floor": floor,
        "empty": empty,
        "clocked": clocked,
        "clocked_found": clocked_found,
        "flat": flat,
        "three_deep": three_deep,
        "decorated": decorated,
        "undecorated": undecorated,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--number", type=int, default=20_000, help="calls per case per round")
    parser.add_argument("--cpu-time", action="store_true", help="time rounds in thread CPU time, not wall time")
    arguments = parser.parse_args()
    if arguments.cpu_time:
        global _timer
        _timer = time.thread_time
    cases = make_cases()
    mlagents = load_mlagents_timers()
    if mlagents is not None:
        def mlagents_flat() -> None:
            with mlagents.hierarchical_timer("block"):
                pass

        cases["mlagents"] = mlagents_flat

    # The flat and 3-deep blocks on each core, in the same rounds as every other enabled case.
    core_cases, prepare = both_cores(cases)
    default = accelerated()
    try:
        enabled = measure_side_by_side({**cases, **core_cases}, arguments.rounds, arguments.number, prepare)
    finally:
        block_hooks.use_compiled_core(default)
    profiler.disable()
    disabled = measure_side_by_side(
        {"floor": cases["floor"], "flat": cases["flat"]}, arguments.rounds, arguments.number
    )
    profiler.enable()
    # Timeline recording swaps in a recording exit; the plain "flat" row above is what recording
    # off costs, so comparing the two shows the price of each recorded span.
    events.start_recording()
    recording = measure_side_by_side(
        {"floor": cases["floor"], "flat": cases["flat"]}, arguments.rounds, arguments.number
    )
    events.stop_recording()
    events.clear_recording()
    # An open profiler.scope installs an exit hook that notes the scope on every block.
    with profiler.scope("benchmark"):
        scoped = measure_side_by_side(
            {"floor": cases["floor"], "flat": cases["flat"]}, arguments.rounds, arguments.number
        )

    nvtx_rows = measure_emit_nvtx(cases, arguments.rounds, arguments.number)
    decorated_ns = enabled["decorated"][0] - enabled["undecorated"][0]
    rows = [
        ("nullcontext() (floor)", *enabled["floor"]),
        ("an empty Python context manager, made once", *enabled["empty"]),
        ("floor of a Python timer: the same, two clock reads", *enabled["clocked"]),
        ("floor of a Python timer: + found via threading.local", *enabled["clocked_found"]),
        *core_rows(enabled),
        ("@timed (added to a call)", decorated_ns, decorated_ns / enabled["floor"][0]),
        ("hierarchical_timer, disabled", *disabled["flat"]),
        ("hierarchical_timer, timeline recording on", *recording["flat"]),
        ("hierarchical_timer, inside a profiler.scope", *scoped["flat"]),
    ]
    rows.extend(nvtx_rows)
    if mlagents is not None:
        rows.append(("ML-Agents hierarchical_timer, flat", *enabled["mlagents"]))
    core = "the C accelerator" if accelerated() else f"pure Python ({unavailable_reason})"
    print(f"this process's core: {core}; rounds timed in {'thread CPU' if arguments.cpu_time else 'wall'} time")
    width = max(len(label) for label, _, _ in rows)
    print(f"{'case':{width}} {'ns/block':>9} {'x floor':>8}")
    for label, nanoseconds, ratio in rows:
        print(f"{label:{width}} {nanoseconds:9.1f} {ratio:8.2f}")
    print()
    goals = [
        (f"hierarchical_timer, flat, {CORE_LABELS[core]}", enabled[f"flat {core}"][1], goal, "<=")
        for core, goal in (("compiled", GOAL_ACCELERATED), ("python", GOAL_ENABLED))
        if f"flat {core}" in enabled
    ]
    goals.append(("hierarchical_timer, disabled", disabled["flat"][1], GOAL_DISABLED, "<"))
    for label, ratio, goal, comparison in goals:
        met = ratio <= goal if comparison == "<=" else ratio < goal
        print(f"goal: {label} {comparison} {goal:.2f}x floor: {ratio:.2f}x, {'met' if met else 'NOT met'}")
    if mlagents is not None:
        speedup = enabled["mlagents"][1] / enabled["flat"][1]
        print(f"goal: ML-Agents / rlprof (flat, ratio of ratios) >= 4x: {speedup:.2f}x, {'met' if speedup >= 4 else 'NOT met'}")


CORE_LABELS = {"compiled": "C core", "python": "Python core"}


def both_cores(
    cases: dict[str, Callable[[], None]],
) -> tuple[dict[str, Callable[[], None]], dict[str, Callable[[], None]]]:
    """The flat and 3-deep cases once per core (``"flat compiled"``, ``"flat python"``...), and
    what to run, untimed, before each case: switch to that case's core, or back to the
    process's own core for every other case."""
    default = accelerated()
    cores = ("compiled", "python") if COMPILED_ENTER is not None else ("python",)
    if COMPILED_ENTER is None:
        print(f"(C core rows left out: {unavailable_reason})")
    core_cases: dict[str, Callable[[], None]] = {}
    prepare: dict[str, Callable[[], None]] = {
        label: lambda: block_hooks.use_compiled_core(default) for label in cases
    }
    for core in cores:
        shapes = python_core_cases() if core == "python" else cases
        for shape in ("flat", "three_deep"):
            core_cases[f"{shape} {core}"] = shapes[shape]
            prepare[f"{shape} {core}"] = lambda compiled=core == "compiled": block_hooks.use_compiled_core(compiled)
    return core_cases, prepare


def python_core_cases() -> dict[str, Callable[[], None]]:
    """The flat and 3-deep blocks through the Python ``hierarchical_timer`` itself, as a process
    without the accelerator calls it (with the accelerator, ``hierarchical_timer`` switched to
    the Python core would still pass through its C wrapper)."""
    python_timer = timers.python_hierarchical_timer

    def flat() -> None:
        with python_timer("block"):
            pass

    def three_deep() -> None:
        with python_timer("outer"):
            with python_timer("middle"):
                with python_timer("inner"):
                    pass

    return {"flat": flat, "three_deep": three_deep}


def core_rows(enabled: dict[str, tuple[float, float]]) -> list[tuple[str, float, float]]:
    rows = []
    for core, label in CORE_LABELS.items():
        if f"flat {core}" in enabled:
            rows.append((f"hierarchical_timer, flat, {label}", *enabled[f"flat {core}"]))
            nanoseconds, ratio = enabled[f"three_deep {core}"]
            rows.append((f"hierarchical_timer, 3-deep (per block), {label}", nanoseconds / 3, ratio / 3))
    return rows


def measure_emit_nvtx(
    cases: dict[str, Callable[[], None]], rounds: int, number: int
) -> list[tuple[str, float, float]]:
    """The price of profiler.gpu.emit_nvtx with the nvtx package and no Nsight attached (the
    package's calls then do nothing): per block, and per @timed call with record_shapes. With
    emit_nvtx off the plain rows above are unchanged: its observers are taken out."""
    try:
        import nvtx  # noqa: F401
    except ImportError:
        print("(emit_nvtx rows left out: pip install 'rlprof[nvtx]')")
        return []
    from profiler.gpu import emit_nvtx

    chosen = {label: cases[label] for label in ("floor", "flat", "decorated", "undecorated")}
    with emit_nvtx(backend="nvtx"):
        active = measure_side_by_side(chosen, rounds, number)
    with emit_nvtx(record_shapes=True, backend="nvtx"):
        shapes = measure_side_by_side(chosen, rounds, number)
    shapes_ns = shapes["decorated"][0] - shapes["undecorated"][0]
    return [
        ("hierarchical_timer, emit_nvtx active", *active["flat"]),
        ("@timed, emit_nvtx record_shapes (a call)", shapes_ns, shapes_ns / shapes["floor"][0]),
    ]


if __name__ == "__main__":
    main()
