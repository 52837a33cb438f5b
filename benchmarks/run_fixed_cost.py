"""What ``rlprof run`` adds to a run whatever its length: its start-up and its exit, apart.

A program that does nothing but what a PyTorch RL trainer imports (``import torch, gymnasium,
numpy``) runs under plain ``python`` and under ``rlprof run`` with no flags, in turn, round after
round (interleaved; the order alternates from round to round). It notes the clock at its first line
and at its last; this script notes it before starting the process and after it ends. So each run
splits into:

- **start-up**: from starting the process to the program's first line (the interpreter, and under
  ``rlprof run`` the command line, rlprof's imports and the instrumentation's set-up);
- **program**: from the first line to the last (the imports of torch, Gymnasium and numpy);
- **exit**: from the last line to the process's end (under ``rlprof run``: the timers file, the
  trace, the report and the analysis of this short run; the exit of a long run also grows with
  its timeline: ``benchmarks/run_parts.py`` measures that part).

``rlprof run``'s fixed cost is its start-up and its exit less plain ``python``'s, medians of the
rounds' differences (noise that slows a whole round cancels). Goal (issue 23): a CleanRL PPO of
about 5 s under ``rlprof run`` within 1.03x of plain ``python``, this fixed cost included.

For figures a shared machine cannot sway, count instructions instead (slow: minutes a run)::

    valgrind --tool=callgrind --callgrind-out-file=python.out python3 PROGRAM.py
    valgrind --tool=callgrind --callgrind-out-file=rlprof.out python3 -m profiler run PROGRAM.py
    callgrind_annotate python.out | grep TOTALS; callgrind_annotate rlprof.out | grep TOTALS

    python3 benchmarks/run_fixed_cost.py [--rounds 9] [--against OTHER_CHECKOUT]

``--against`` adds a third variant, ``rlprof run`` of another checkout of rlprof (say ``git worktree
add /tmp/main main``), in the same rounds: before and after a change, side by side.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from run_overhead import (  # noqa: E402 - shared with the whole-run benchmark
    checkout_environment, child_environment, compile_rlprof)

PROGRAM = """\
import sys, time
first_line = time.time()
import torch, gymnasium, numpy  # noqa: E401,F401 - what a PyTorch RL trainer imports
with open(sys.argv[1], "w") as stamps:
    stamps.write(f"{first_line!r} {time.time()!r}")
"""


def run_once(command: list[str], stamps: Path, environment: dict[str, str]) -> tuple[float, float, float]:
    """(start-up, program, exit) seconds of one process."""
    started = time.time()
    # In the stamps' folder: ``python -m profiler`` puts the working folder first on sys.path, and
    # run from a checkout it would import that checkout's rlprof whatever --against says.
    subprocess.run([*command, str(stamps)], env=environment, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=stamps.parent)
    ended = time.time()
    first_line, last_line = (float(stamp) for stamp in stamps.read_text().split())
    return first_line - started, last_line - first_line, ended - last_line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--against", type=Path, default=None, metavar="CHECKOUT",
                        help="also run rlprof run from this other checkout of rlprof, in the same rounds")
    options = parser.parse_args()
    compile_rlprof()  # an installed rlprof has its bytecode: a run must not compile it (PYTHONDONTWRITEBYTECODE)
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        program = folder / "imports_only.py"
        program.write_text(PROGRAM)
        environment = child_environment(folder)
        rlprof_run = [sys.executable, "-m", "profiler", "run", "--summaries-dir", str(folder / "runs"), str(program)]
        variants = {"python": ([sys.executable, str(program)], environment), "rlprof run": (rlprof_run, environment)}
        if options.against is not None:
            variants[f"rlprof run ({options.against.name})"] = (rlprof_run,
                                                                checkout_environment(environment, options.against))
        for command, variant_environment in variants.values():  # warm the caches, compile the .pyc
            run_once(command, folder / "stamps", variant_environment)
        parts: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
        for round_number in range(options.rounds):
            order = list(variants) if round_number % 2 == 0 else list(reversed(variants))
            for name in order:
                command, variant_environment = variants[name]
                parts[name].append(run_once(command, folder / "stamps", variant_environment))
    print(f"rlprof run's fixed cost, {options.rounds} interleaved rounds, medians (seconds of wall time)")
    print(f"{'':24}{'start-up':>10}{'program':>10}{'exit':>10}{'whole':>10}")
    for name, runs in parts.items():
        columns = [statistics.median(run[index] for run in runs) for index in range(3)]
        whole = statistics.median(sum(run) for run in runs)
        print(f"{name:24}" + "".join(f"{value:10.3f}" for value in (*columns, whole)))
    for name in list(parts)[1:]:
        added = [statistics.median(rlprof[index] - python[index] for rlprof, python in zip(parts[name], parts["python"]))
                 for index in range(3)]
        whole = statistics.median(sum(rlprof) - sum(python) for rlprof, python in zip(parts[name], parts["python"]))
        print(f"added by {name}: start-up {added[0]:.3f} s, exit {added[2]:.3f} s, whole process {whole:.3f} s "
              "(less python's, per round)")


if __name__ == "__main__":
    main()
