"""What memory sampling costs a timer block, measured side by side in one process.

Every case times the same block (``with hierarchical_timer("block")``, with a small list made
inside it, as real blocks allocate) under one memory setting of :mod:`profiler.recording.memory`; the
settings are switched between cases, outside the timing, round after round, and each ratio is the
median of the per-round ratios to "sampling off", so machine noise cancels. Goals (issue 10):

* sampling off, and off again after a start and stop: 1.00x — nothing is installed on the blocks;
* ``sample_rate=N`` (every N blocks): the block cost, plus an observer on each closing block (two
  Python calls, measured by ``sample_rate=1000``), plus one sample (a read of /proc/self/statm on
  Linux, about 5 us) every N blocks;
* a sampler thread every 10 ms: close to 1x (it costs the process, not the block);
* ``uss`` and ``track_allocations`` (tracemalloc) are priced here so the docs can say what they
  cost; neither is on by default.

The last rows price a session (``@profile``) around a call that does nothing: what each entry
costs (recording switched on and off, and sampling when asked).

    python benchmarks/memory_sampling.py [--rounds 15] [--number 20000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import timeit
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiler import Profiler, hierarchical_timer  # noqa: E402
from profiler.recording import memory


def block() -> None:
    with hierarchical_timer("block"):
        [0] * 8


SETTINGS: dict[str, Callable[[], None]] = {
    "sampling off": memory.stop_sampling,
    "off again after start and stop": lambda: (memory.start_sampling(every_blocks=1), memory.stop_sampling()),
    "sample_rate=1000": lambda: memory.start_sampling(every_blocks=1000),
    "sample_rate=100": lambda: memory.start_sampling(every_blocks=100),
    "sample_rate=10": lambda: memory.start_sampling(every_blocks=10),
    "sample_rate=1": lambda: memory.start_sampling(every_blocks=1),
    "sample_rate=100, uss": lambda: memory.start_sampling(every_blocks=100, uss=True),
    "sampler thread, every 10 ms": lambda: memory.start_sampling(interval=0.01),
    "track_allocations": lambda: memory.start_sampling(track_allocations=True),
}


def measure(rounds: int, number: int) -> dict[str, tuple[float, float]]:
    """(median ns per block, median ratio to "sampling off") for each setting."""
    samples: dict[str, list[float]] = {label: [] for label in SETTINGS}
    for _ in range(rounds):
        for label, apply in SETTINGS.items():
            apply()
            samples[label].append(timeit.timeit(block, number=number) / number * 1e9)
            memory.stop_sampling()
            memory.clear_memory()
    off = samples["sampling off"]
    return {
        label: (statistics.median(values), statistics.median(value / base for value, base in zip(values, off)))
        for label, values in samples.items()
    }


def measure_sessions(rounds: int, number: int, directory: str) -> dict[str, tuple[float, float]]:
    """(median ns per call, median ratio to the plain call) of a decorated no-op function."""

    def plain() -> None:
        pass

    cases = {
        "a plain call": plain,
        "@profile(), per call": Profiler(path=directory)(plain),
        "@profile(sample_rate=8), per call": Profiler(path=directory, sample_rate=8)(plain),
    }
    samples: dict[str, list[float]] = {label: [] for label in cases}
    for _ in range(rounds):
        for label, call in cases.items():
            samples[label].append(timeit.timeit(call, number=number) / number * 1e9)
            memory.clear_memory()
    for call in cases.values():
        if hasattr(call, "__profiler__"):
            call.__profiler__.dump()  # now, while the folder exists, not at exit
    base = samples["a plain call"]
    return {
        label: (statistics.median(values), statistics.median(value / floor for value, floor in zip(values, base)))
        for label, values in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=20_000, help="blocks per case per round")
    arguments = parser.parse_args()
    blocks = measure(arguments.rounds, arguments.number)
    print(f"{'memory setting':36} {'ns/block':>9} {'x off':>7}")
    for label, (nanoseconds, ratio) in blocks.items():
        print(f"{label:36} {nanoseconds:9.1f} {ratio:7.2f}")
    with tempfile.TemporaryDirectory() as directory:
        sessions = measure_sessions(arguments.rounds, max(1, arguments.number // 10), directory)
        print(f"\n{'session':36} {'ns/call':>9} {'x plain':>7}")
        for label, (nanoseconds, ratio) in sessions.items():
            print(f"{label:36} {nanoseconds:9.1f} {ratio:7.2f}")


if __name__ == "__main__":
    main()
