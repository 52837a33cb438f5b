"""Two versions of the timer hot path, side by side in one process: did a change make it cheaper?

Each checkout's ``profiler`` package is imported in turn (its timers module:
``profiler/timing/timers.py``, or ``profiler/timers.py`` before the packages were grouped) and
then taken out of ``sys.modules``, so that the next checkout's loads afresh. Each version's ``with hierarchical_timer("block"): pass`` runs in turn with
``contextlib.nullcontext()``, round after round; each figure is a median over rounds, each ratio
the median of per-round ratios. Measuring both versions in the same rounds makes the comparison
hold on a busy machine, where the ratio of either alone drifts with the load.

    git worktree add /tmp/before <commit>
    python benchmarks/timer_core_versions.py /tmp/before . [--rounds 61] [--number 20000]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import statistics
import sys
import timeit
from pathlib import Path
from types import ModuleType
from typing import Callable


def load_timers(checkout: Path) -> ModuleType:
    """The timers module of ``checkout``'s ``profiler`` package, imported from that checkout."""
    if not (checkout / "profiler" / "__init__.py").is_file():
        raise SystemExit(f"no profiler package under {checkout}")
    sys.path.insert(0, str(checkout.resolve()))
    try:
        for name in ("profiler.timing.timers", "profiler.timers"):
            try:
                return importlib.import_module(name)
            except ModuleNotFoundError:
                continue
        raise SystemExit(f"no timers module in {checkout}'s profiler package")
    finally:
        sys.path.pop(0)
        for name in [name for name in sys.modules if name == "profiler" or name.startswith("profiler.")]:
            del sys.modules[name]


def flat_block(timers: ModuleType) -> Callable[[], None]:
    hierarchical_timer = timers.hierarchical_timer

    def flat() -> None:
        with hierarchical_timer("block"):
            pass

    return flat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkouts", nargs="+", type=Path, help="source trees to compare")
    parser.add_argument("--rounds", type=int, default=61)
    parser.add_argument("--number", type=int, default=20_000, help="calls per case per round")
    arguments = parser.parse_args()

    nullcontext = contextlib.nullcontext

    def floor() -> None:
        with nullcontext():
            pass

    cases: dict[str, Callable[[], None]] = {"nullcontext() (floor)": floor}
    for checkout in arguments.checkouts:
        cases[f"hierarchical_timer of {checkout}"] = flat_block(load_timers(checkout))
    samples: dict[str, list[float]] = {label: [] for label in cases}
    for _ in range(arguments.rounds):
        for label, body in cases.items():
            samples[label].append(timeit.timeit(body, number=arguments.number) / arguments.number * 1e9)
    floor_samples = samples["nullcontext() (floor)"]
    width = max(len(label) for label in cases)
    print(f"{'case':{width}} {'ns/block':>9} {'x floor':>8}")
    for label, values in samples.items():
        ratio = statistics.median(value / base for value, base in zip(values, floor_samples))
        print(f"{label:{width}} {statistics.median(values):9.1f} {ratio:8.2f}")
    print("\ngoal: hierarchical_timer within 1.3x of the floor")


if __name__ == "__main__":
    main()
