"""An RLlib PPO run under ``rlprof run``, unedited: what each env runner and the learner show, and
what profiling them costs.

    pip install --no-deps pandas pyarrow pydantic pydantic-core annotated-types typing-inspection \\
        dm-tree lz4 ormsgpack scipy fsspec python-dateutil tzdata wrapt   # RLlib's needs, see below
    python benchmarks/rllib_run.py [--rounds 3]

The program (``tests/profiler/integrations/ray_programs/rllib_ppo.py``) is RLlib as its users
write it: the new API stack, CartPole, two env runners (Ray actors), one learner on a Ray actor of
its own, one training iteration, a local Ray of 2 CPUs. It runs as a fresh process, in alternating
rounds (who goes first rotates), with ``python`` and under ``python -m profiler run``.

Printed: the median wall time of each and the median of the per-round ratios (the whole run: Ray's
start, RLlib's build, the iteration, the shutdown), then, from the last profiled run's dump, each
Ray worker's entry: its class, its env steps and vector steps, its policy forward passes, and the
learner's update (``backward``, the optimizer's ``step``).

Why this is a script and not in the test extras: ``ray[rllib]`` 2.60 pins ``gymnasium==1.2.2``,
and rlprof needs ``gymnasium>=1.4`` (``envmanager/gymnasium_version.py``), so pip cannot install
``rlprof[test]`` with ``ray[rllib]``: the resolver refuses. RLlib 2.60 runs this PPO with
Gymnasium 1.4 (this script is the evidence); its other dependencies, installed with ``--no-deps``
as above, took 53 s and 421 MB on the development machine (pyarrow 55 MB, pandas 12 MB, scipy).
``tests/profiler/integrations/test_ray_workers_rllib.py`` runs the same program where they are
installed, and skips elsewhere.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = Path(__file__).resolve().parent.parent / "tests" / "profiler" / "integrations" / "ray_programs" / "rllib_ppo.py"
UPDATE_BLOCKS = ("backward", "Adam.step", "Adam.zero_grad")


def _environment() -> dict[str, str]:
    search_path = os.pathsep.join(filter(None, [str(PROGRAM.parent), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": search_path, "RAY_ADDRESS": "local"}  # a Ray of its own


def _timed_run(command: list[str], folder: Path) -> float:
    started = time.perf_counter()
    finished = subprocess.run(command, cwd=folder, env=_environment(), capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if finished.returncode != 0:
        sys.exit(f"rllib_run: {' '.join(command[-2:])} failed:\n{finished.stderr[-3000:]}")
    return elapsed


def _walk(node: dict):
    for entry in node.get("children", ()):
        yield entry
        yield from _walk(entry)


def _count(entry: dict, test) -> tuple[int, float]:
    nodes = [node for node in _walk(entry) if test(node["name"])]
    return sum(node["count"] for node in nodes), sum(node["total"] for node in nodes)


def _print_workers(timers: Path) -> None:
    tree = json.loads(timers.read_text())
    print("\nRay workers in the last profiled run's dump:")
    print(f"{'worker':<10}{'class':<24}{'env.step':>10}{'vector.step':>13}{'forwards':>10}  "
          f"{'update blocks':<42}channel")
    for entry in tree["workers"]:
        if entry.get("manager") != "ray workers":
            continue
        env_steps, env_seconds = _count(entry, lambda name: name == "env.step")
        vector_steps, _ = _count(entry, lambda name: name == "vector.step")
        forwards, _ = _count(entry, lambda name: name.endswith("forward (no grad)"))
        updates = ", ".join(f"{name} {_count(entry, lambda block, name=name: block == name)[0]}"
                            for name in UPDATE_BLOCKS if _count(entry, lambda block, name=name: block == name)[0])
        print(f"{entry['name']:<10}{entry['ray'].get('class', 'task'):<24}"
              f"{env_steps:>10}{vector_steps:>13}{forwards:>10}  {updates or '-':<42}{entry['channel']}"
              + (f"  ({env_seconds * 1e6 / env_steps:.1f} us per env step)" if env_steps else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    try:
        import ray.rllib.algorithms.ppo  # noqa: F401
    except ImportError as error:
        sys.exit(f"rllib_run: RLlib cannot be imported ({error}); install its dependencies as this "
                 "script's docstring says")
    plain, profiled = [], []
    with tempfile.TemporaryDirectory(prefix="rllib-run-") as scratch:
        folder = Path(scratch)
        for round_number in range(arguments.rounds):
            variants = [("plain", [sys.executable, str(PROGRAM)]),
                        ("rlprof", [sys.executable, "-m", "profiler", "run", "--summaries-dir", "out", str(PROGRAM)])]
            if round_number % 2:
                variants.reverse()
            for name, command in variants:
                (plain if name == "plain" else profiled).append(_timed_run(command, folder))
            print(f"round {round_number + 1}: python {plain[-1]:.2f} s, rlprof run {profiled[-1]:.2f} s", flush=True)
        ratios = [rlprof_wall / plain_wall for plain_wall, rlprof_wall in zip(plain, profiled)]
        print(f"\nwall time, median of {arguments.rounds}: python {statistics.median(plain):.2f} s, "
              f"rlprof run {statistics.median(profiled):.2f} s, ratio {statistics.median(ratios):.3f}x "
              "(median of the per-round ratios)")
        _print_workers(folder / "out" / "rllib_ppo_timers.json")


if __name__ == "__main__":
    main()
