"""The README's performance figures, with the C accelerator and without it, from one command.

    python3 setup.py build_ext --inplace          # the accelerator, built in place
    python3 benchmarks/readme_figures.py --quick  # about two minutes on a quiet 16-core machine
    python3 benchmarks/readme_figures.py          # more rounds, closer figures

Run from the repository root with the repository on ``PYTHONPATH`` (or rlprof installed). Every
measurement runs in a fresh subprocess per core: one with the accelerator loaded, one with
``RLPROF_PURE_PYTHON=1``; the two of a measurement run one after the other, so a burst of load
hits both alike. Each figure is a ratio of things measured side by side in that subprocess, in
interleaved rounds (medians), printed next to its goal (issue 27):

* ``hierarchical_timer``, a flat block, against ``with nullcontext():`` (its
  ``benchmarks/timer_overhead.py`` case): goal 0.8x with the accelerator, 1.3x without;
* a 50-node payload from the worker's snapshot to the trainer's merged tree, in ``nullcontext()``
  costs (``benchmarks/snapshot_cores.py``): goal 100;
* the manager's step with one worker and a trivial env against a raw one-byte pipe round trip,
  profiling on and off (``benchmarks/step_floor.py``): goal 1.5x with profiling on;
* profiling on against off on every row of the README's table (CartPole-v1, busy-50us, busy-1ms;
  x2, x4, x8), wall time and the CPU time of trainer and workers per step
  (``benchmarks/profiling_overhead.py``): goal 2% on every row.

The script prints the machine (cores, Python, load) first: figures from a loaded machine say so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS))

CORES = {"C accelerator": "0", "pure Python": "1"}
"""Each core's label and the value of RLPROF_PURE_PYTHON its subprocess runs with."""

GOAL_TIMER = {"C accelerator": 0.8, "pure Python": 1.3}
GOAL_PAYLOAD_COSTS = 100.0
GOAL_STEP_PATH = 1.5
GOAL_PROFILING = 0.02

ROWS = [(env_name, num_envs) for env_name in ("CartPole-v1", "busy-50us", "busy-1ms") for num_envs in (2, 4, 8)]

SETTINGS = {
    # measurement: (quick, full) arguments
    "timer": ({"rounds": 25, "number": 20_000}, {"rounds": 51, "number": 20_000}),
    "payload": ({"rounds": 1500, "nodes": 50}, {"rounds": 4000, "nodes": 50}),
    "step": ({"steps": 2000, "rounds": 7}, {"steps": 5000, "rounds": 11}),
    "rows": ({"rounds": 12}, {"rounds": 24}),
}


# -- the measurements, each run in a subprocess of one core ------------------------------------


def measure_timer(rounds: int, number: int) -> dict[str, Any]:
    """A flat ``hierarchical_timer`` block and a 3-deep one (per block), x ``nullcontext()``."""
    from timer_overhead import make_cases, measure_side_by_side

    cases = make_cases()
    figures = measure_side_by_side(
        {label: cases[label] for label in ("floor", "empty", "clocked_found", "flat", "three_deep")},
        rounds,
        number,
    )
    return {
        "floor_ns": figures["floor"][0],
        "empty": figures["empty"][1],
        "python_timer_floor": figures["clocked_found"][1],
        "flat": figures["flat"][1],
        "three_deep": figures["three_deep"][1] / 3,
    }


def measure_payload(rounds: int, nodes: int) -> dict[str, Any]:
    """A payload from snapshot to merged, in ``nullcontext()`` costs, rows taken by this core."""
    import snapshot_cores
    from profiler.timing import accelerated

    own = "C core" if accelerated() else "Python core"
    floor_ns, figures = snapshot_cores.measure(rounds, nodes)
    snapshot_us, trip_us = figures[own]
    return {"snapshot_us": snapshot_us, "trip_us": trip_us, "costs": trip_us * 1000 / floor_ns}


def measure_step(steps: int, rounds: int) -> dict[str, Any]:
    """The manager's step with one worker against the raw pipe round trip, profiling on and off."""
    from step_floor import FLOOR_VARIANTS, OURS, OURS_OFF, PING_PONG, measure_rounds

    samples = measure_rounds({label: FLOOR_VARIANTS[label] for label in (PING_PONG, OURS, OURS_OFF)}, steps, rounds)
    floor = samples[PING_PONG]

    def ratio(label: str) -> float:
        return statistics.median(mine / reference for mine, reference in zip(samples[label], floor))

    return {"floor_us": statistics.median(floor) * 1e6, "on": ratio(OURS), "off": ratio(OURS_OFF)}


def measure_rows(rounds: int) -> dict[str, Any]:
    """Profiling on vs off on every row: wall and CPU per step, medians of per-round ratios."""
    from profiling_overhead import measure_row, STEPS_PER_ROUND

    rows = {}
    for env_name, num_envs in ROWS:
        figures = measure_row(env_name, num_envs, rounds, STEPS_PER_ROUND[env_name])
        rows[f"{env_name} x{num_envs}"] = {
            "step_off_us": statistics.median(figures.step_seconds_off) * 1e6,
            "wall": statistics.median(figures.wall) - 1,
            "cpu": statistics.median(figures.cpu) - 1 if figures.cpu else None,
        }
    return rows


MEASUREMENTS: dict[str, Callable[..., dict[str, Any]]] = {
    "timer": measure_timer,
    "payload": measure_payload,
    "step": measure_step,
    "rows": measure_rows,
}


def run_measurement(name: str, arguments: dict[str, Any]) -> None:
    """In the subprocess: one measurement on this process's core, printed as one JSON line."""
    from profiler.timing import accelerated

    figures = MEASUREMENTS[name](**arguments)
    print(json.dumps({"accelerated": accelerated(), "figures": figures}))


# -- the parent: a subprocess per measurement and core, then the tables ------------------------


def in_subprocess(name: str, arguments: dict[str, Any], pure_python: str) -> dict[str, Any] | str:
    """One measurement in a fresh interpreter on one core: its figures, or why there are none."""
    environment = {**os.environ, "RLPROF_PURE_PYTHON": pure_python}
    command = [sys.executable, str(Path(__file__).resolve()), "--measure", name, json.dumps(arguments)]
    finished = subprocess.run(command, env=environment, capture_output=True, text=True)
    if finished.returncode != 0:
        last = (finished.stderr.strip().splitlines() or ["no output"])[-1]
        return f"failed: {last}"
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    if result["accelerated"] != (pure_python == "0"):
        return "the accelerator is not built here: python3 setup.py build_ext --inplace"
    return result["figures"]


def measure_all(quick: bool) -> dict[str, dict[str, dict[str, Any] | str]]:
    results: dict[str, dict[str, dict[str, Any] | str]] = {}
    for name, (quick_arguments, full_arguments) in SETTINGS.items():
        results[name] = {}
        for core, pure_python in CORES.items():
            started = time.perf_counter()
            results[name][core] = in_subprocess(name, quick_arguments if quick else full_arguments, pure_python)
            print(f"  ({name}, {core}: {time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    return results


def _met(value: float, goal: float) -> str:
    return "met" if value <= goal else "NOT met"


def print_figures(results: dict[str, dict[str, dict[str, Any] | str]]) -> None:
    cores = list(CORES)
    print(f"{'figure':<52} " + " ".join(f"{core:>24}" for core in cores))

    def line(label: str, cell: Callable[[str, dict[str, Any]], str], measurement: str) -> None:
        cells = []
        for core in cores:
            figures = results[measurement][core]
            cells.append(f"{figures[:24] if isinstance(figures, str) else cell(core, figures):>24}")
        print(f"{label:<52} " + " ".join(cells))

    line(
        "hierarchical_timer, flat, x nullcontext()",
        lambda core, f: f"{f['flat']:.2f}x (goal {GOAL_TIMER[core]}: {_met(f['flat'], GOAL_TIMER[core])})",
        "timer",
    )
    line("hierarchical_timer, 3-deep per block, x nullcontext()", lambda core, f: f"{f['three_deep']:.2f}x", "timer")
    line("an empty Python context manager, x nullcontext()", lambda core, f: f"{f['empty']:.2f}x", "timer")
    line(
        "floor of a per-thread Python timer, x nullcontext()",
        lambda core, f: f"{f['python_timer_floor']:.2f}x",
        "timer",
    )
    line("nullcontext() block", lambda core, f: f"{f['floor_ns']:.0f} ns", "timer")
    line(
        "50-node payload, snapshot to merged, nullcontext() costs",
        lambda core, f: f"{f['costs']:.0f} (goal 100: {_met(f['costs'], GOAL_PAYLOAD_COSTS)})",
        "payload",
    )
    line("  of which the snapshot / the whole trip", lambda core, f: f"{f['snapshot_us']:.1f} / {f['trip_us']:.1f} us", "payload")
    line(
        "step, 1 worker, profiling on, x pipe round trip",
        lambda core, f: f"{f['on']:.2f}x (goal 1.5: {_met(f['on'], GOAL_STEP_PATH)})",
        "step",
    )
    line("step, 1 worker, profiling off, x pipe round trip", lambda core, f: f"{f['off']:.2f}x", "step")
    line("pipe round trip", lambda core, f: f"{f['floor_us']:.1f} us", "step")

    print()
    print("profiling on vs off, per row: wall / CPU of trainer and workers per step, medians (goal <= 2% each)")
    print(f"{'row':<16} " + " ".join(f"{core + ': step off, wall, CPU':>38}" for core in cores))
    for env_name, num_envs in ROWS:
        key = f"{env_name} x{num_envs}"
        cells = []
        for core in cores:
            figures = results["rows"][core]
            if isinstance(figures, str):
                cells.append(f"{figures[:38]:>38}")
                continue
            row = figures[key]
            cpu = "n/a" if row["cpu"] is None else f"{row['cpu']:+.1%}"
            cells.append(f"{row['step_off_us']:9.0f} us {row['wall']:+8.1%} {cpu:>8}")
            cells[-1] = f"{cells[-1]:>38}"
        print(f"{key:<16} " + " ".join(cells))
    for core in cores:
        figures = results["rows"][core]
        if isinstance(figures, str):
            continue
        worst_key = max(figures, key=lambda key: figures[key]["wall"])
        worst_cpu = max((row["cpu"] for row in figures.values() if row["cpu"] is not None), default=None)
        cpu = "n/a" if worst_cpu is None else f"{worst_cpu:+.1%}"
        print(
            f"{core}: worst row, wall: {worst_key} {figures[worst_key]['wall']:+.1%}; worst CPU {cpu}   "
            f"goal <= {GOAL_PROFILING:.0%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds: about two minutes on 16 cores")
    parser.add_argument("--measure", nargs=2, metavar=("NAME", "ARGUMENTS"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.measure is not None:
        run_measurement(arguments.measure[0], json.loads(arguments.measure[1]))
        return
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"{os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), Python {platform.python_version()}, "
        f"load {load} at the start; {'--quick' if arguments.quick else 'full'} rounds"
    )
    started = time.perf_counter()
    results = measure_all(arguments.quick)
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"measured in {time.perf_counter() - started:.0f} s; load {load} at the end\n")
    print_figures(results)


if __name__ == "__main__":
    main()
