"""``rlprof run``'s fixed cost in instructions: start-up, program and exit apart, under callgrind.

``run_fixed_cost.py`` measures the same split in wall time, which a shared machine sways by more
than a change to it saves. Here the program that ``run_fixed_cost.py`` runs (it only imports
torch, Gymnasium and numpy) calls ``math.lgamma(1.0)`` at its first and its last line, and each
process runs under ``valgrind --tool=callgrind --dump-before=math_lgamma``: callgrind writes one
dump up to the first line (**start-up**: the interpreter, and under ``rlprof run`` its command
line, imports and set-up), one up to the last (**program**) and one at the end (**exit**: under
``rlprof run`` the timers file, the trace, the report and the analysis). All threads are counted;
the machine's load does not move a count.

Variants, one process each: ``python`` (the reference), ``rlprof run`` (no flags) and ``rlprof
run --no-stack-sampler`` (the sampler looks by the clock, and valgrind slows the program
fiftyfold: without it the program's part moves less from run to run). ``--against CHECKOUT``
adds the same two ``rlprof run`` variants of another checkout of rlprof (its bytecode compiled
first), for a before and after::

    python3 benchmarks/run_fixed_cost_instructions.py [--against OTHER_CHECKOUT] [--only rlprof]

Each process takes a few minutes under callgrind. The fixed cost is a variant's whole process
less ``python``'s, printed after its row: the parts move between them (rlprof's set-up imports
Gymnasium and numpy before the program does, so its start-up is larger and the program's part
smaller than under ``python``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from run_overhead import (  # noqa: E402 - shared with the whole-run benchmark
    checkout_environment, child_environment, compile_rlprof)

PROGRAM = """\
import math
math.lgamma(1.0)  # callgrind dumps here: the start-up ends
import torch, gymnasium, numpy  # noqa: E401,F401 - what a PyTorch RL trainer imports
math.lgamma(1.0)  # and here: the program ends, the exit follows
"""
PARTS = ("start-up", "program", "exit")


def instructions(dump: Path) -> int:
    """The instructions counted in one callgrind dump (its ``summary:`` or ``totals:`` line)."""
    for line in dump.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise ValueError(f"{dump}: no summary line")


def count(command: list[str], environment: dict[str, str], folder: Path, label: str) -> tuple[int, int, int]:
    """(start-up, program, exit) instructions of one process run under callgrind.

    It runs in ``folder``: ``python -m profiler`` puts the working folder first on ``sys.path``,
    and run from a checkout it would import that checkout's rlprof whatever ``--against`` says.
    """
    prefix = folder / label.replace(" ", "_").replace("(", "").replace(")", "").replace("-", "")
    subprocess.run(
        ["valgrind", "--tool=callgrind", "--dump-before=math_lgamma", f"--callgrind-out-file={prefix}.out",
         *command], env=environment, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder)
    dumps = sorted(folder.glob(f"{prefix.name}.out*"), key=_dump_order)
    figures = [instructions(dump) for dump in dumps]
    if len(figures) != 3:
        raise RuntimeError(f"{label}: {len(figures)} callgrind dumps, expected 3 (one per part)")
    return figures[0], figures[1], figures[2]


def _dump_order(dump: Path) -> int:
    """Callgrind names the dumps ``PREFIX.out.1``, ``.2``, and the last one ``PREFIX.out``."""
    suffix = dump.name.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else 1_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, default=None, metavar="CHECKOUT",
                        help="also count rlprof run of this other checkout of rlprof")
    parser.add_argument("--only", default=None, metavar="TEXT",
                        help="count only the variants whose label holds TEXT (python is always counted)")
    options = parser.parse_args()
    compile_rlprof()
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        program = folder / "imports_only.py"
        program.write_text(PROGRAM)
        environment = {**child_environment(folder), "PYTHONHASHSEED": "0"}
        checkouts = {"": environment}
        if options.against is not None:
            checkouts[f" ({options.against.name})"] = checkout_environment(environment, options.against)
        variants: dict[str, tuple[list[str], dict[str, str]]] = {"python": ([sys.executable, str(program)], environment)}
        for suffix, rlprof_environment in checkouts.items():
            run = [sys.executable, "-m", "profiler", "run", "--summaries-dir", str(folder / "runs")]
            variants[f"rlprof run{suffix}"] = ([*run, str(program)], rlprof_environment)
            variants[f"rlprof run --no-stack-sampler{suffix}"] = (
                [*run, "--no-stack-sampler", str(program)], rlprof_environment)
        for command, variant_environment in variants.values():  # compile the program, warm the caches
            subprocess.run(command, env=variant_environment, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder)
        figures = {label: count(command, variant_environment, folder, label)
                   for label, (command, variant_environment) in variants.items()
                   if label == "python" or options.only is None or options.only in label}
    print("rlprof run's fixed cost, millions of instructions (callgrind, all threads, one run each)")
    print(f"{'':44}" + "".join(f"{part:>10}" for part in (*PARTS, "whole")))
    python = figures["python"]
    for label, parts in figures.items():
        row = "".join(f"{value / 1e6:10.1f}" for value in (*parts, sum(parts)))
        added = "" if label == "python" else f"   +{(sum(parts) - sum(python)) / 1e6:.1f}"
        print(f"{label:44}{row}{added}")


if __name__ == "__main__":
    main()
