"""Env-steps per second: SubprocessEnvManager beside every Python vector env, and the pipe floor.

    python benchmarks/vector_throughput.py            # the full table (several minutes)
    python benchmarks/vector_throughput.py --quick    # a rough table in a couple of minutes
    python benchmarks/vector_throughput.py --overhead # profiling on vs off, every row, closely
    python benchmarks/vector_throughput.py --envs sleep-1ms   # other envs (see ENVS)

For CartPole-v1 and a synthetic env doing ~50 us and ~1 ms of CPU work per step, with 2, 4
and 8 envs, each row measures:

* ``sync``: Gymnasium's SyncVectorEnv (every env in this process, no pipe at all);
* ``async``: Gymnasium's AsyncVectorEnv (one process per env), the reference of the ratios;
* ``sb3 subproc``: Stable-Baselines3's SubprocVecEnv, where it is installed (a note says when
  it is not: ``pip install stable-baselines3`` brings it);
* ``ours``: SubprocessEnvManager at default settings (profiling on);
* ``ours profiling off``: the same with ``profiling=False``;
* ``ours auto``/``ours epw=1``: the other candidate for the default of ``envs_per_worker``;
* ``pipe floor``: a raw one-byte ``Pipe`` ping-pong per vector step carrying every env of the
  row for free (``benchmarks/step_floor.py``): what no subprocess vector env that makes a round
  trip per step can beat.

All variants of one row are alive at once and measured in alternating rounds (who goes first
rotates), so a burst of noise from the machine hits every variant alike.  A rate is the median
round; a ratio is the median of the per-round ratios (each round's pair measured side by side).

Goals (issue 12; printed next to the figures, never asserted, since they depend on the machine):
  * CartPole-v1 x8, ``envs_per_worker="auto"``: >= 3x AsyncVectorEnv;
  * busy-1ms x8 (a 1 ms CPU env): never slower than AsyncVectorEnv (ratio >= 1.0);
  * profiling on vs off at default settings: <= 2 % on every row (printed per row and the worst).

``--overhead`` measures the profiling cost closely on every row (``benchmarks/profiling_overhead.py``):
only the two managers, on and off, in many short interleaved rounds; the figure is the median of
the per-round ratios, for the wall time and for the CPU time of the trainer and workers.  It then
breaks what profiling adds to a step into its parts, each timed alone in this process and set
against the rows' vector steps with profiling off.
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
from typing import Any, Callable

import numpy as np
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from benchmark_envs import ENVS, steps_per_second

from envmanager import SubprocessEnvManager
from profiler.recording.cpu_cores import cores_available


TABLE_ENVS = ("CartPole-v1", "busy-50us", "busy-1ms")
"""The rows of the table by default: the envs issue 12 sets goals for."""
STEPS_PER_ROUND = {"CartPole-v1": 400, "busy-50us": 200, "busy-1ms": 25, "sleep-1ms": 25}
"""Short rounds, many of them: on a shared machine a burst of load then hits few rounds, and
the variants of a round run close together in time."""

ROUNDS_PER_BUILD = 5
"""Every variant of a row is built afresh after this many rounds (see :func:`measure_rounds`)."""

SYNC, ASYNC, SB3, OURS, OURS_OFF, FLOOR = (
    "sync", "async", "sb3 subproc", "ours", "ours profiling off", "pipe floor"
)
OURS_AUTO, OURS_ONE = "ours auto", "ours epw=1"
DEFAULT_ENVS_PER_WORKER = inspect.signature(SubprocessEnvManager).parameters["envs_per_worker"].default


class Sb3Steps:
    """Stable-Baselines3's SubprocVecEnv behind the calls the rounds make (its ``reset`` takes
    no seed; its ``seed`` does)."""

    def __init__(self, env_fns: list) -> None:
        from stable_baselines3.common.vec_env import SubprocVecEnv

        self.envs = SubprocVecEnv(env_fns)

    def reset(self, seed: int) -> None:
        self.envs.seed(seed)
        self.envs.reset()

    def step(self, actions: np.ndarray) -> Any:
        return self.envs.step(actions)

    def close(self) -> None:
        self.envs.close()


class PipeFloorSteps:
    """One raw one-byte Pipe round trip per vector step, the envs free: the floor of any vector
    env that makes a round trip per step (``benchmarks/step_floor.py``'s ping-pong)."""

    def __init__(self, env_fns: list) -> None:
        from step_floor import PipePingPong

        self.ping_pong = PipePingPong()

    def reset(self, seed: int) -> None:
        pass

    def step(self, actions: np.ndarray) -> None:
        self.ping_pong.run(1)

    def close(self) -> None:
        self.ping_pong.close()


def variants(num_envs: int) -> dict[str, Callable[[list], Any]]:
    """The vector envs compared in one row, by label; ``ours`` at default settings.

    Stable-Baselines3 and the pipe floor are left out, with a note printed once, where they
    cannot be imported."""
    makers: dict[str, Callable[[list], Any]] = {
        SYNC: lambda fns: SyncVectorEnv(fns),
        ASYNC: lambda fns: AsyncVectorEnv(fns),
    }
    if _importable("stable_baselines3", "the sb3 subproc rows (pip install stable-baselines3)"):
        makers[SB3] = Sb3Steps
    makers[OURS] = lambda fns: SubprocessEnvManager(fns)
    makers[OURS_OFF] = lambda fns: SubprocessEnvManager(fns, profiling=False)
    if DEFAULT_ENVS_PER_WORKER == "auto":
        makers[OURS_ONE] = lambda fns: SubprocessEnvManager(fns, envs_per_worker=1)
    else:
        makers[OURS_AUTO] = lambda fns: SubprocessEnvManager(fns, envs_per_worker="auto")
    if _importable("step_floor", "the pipe floor rows (benchmarks/step_floor.py)"):
        makers[FLOOR] = PipeFloorSteps
    return makers


_notes_printed: set[str] = set()


def _importable(module: str, what: str) -> bool:
    try:
        __import__(module)
    except ImportError as error:
        if module not in _notes_printed:
            _notes_printed.add(module)
            print(f"note: {what} are skipped: {error}", flush=True)
        return False
    return True


def measure_row(env_name: str, num_envs: int, steps: int, rounds: int) -> dict[str, list[float]]:
    """The rounds of every variant of one row (see :func:`measure_rounds`)."""
    return measure_rounds([ENVS[env_name]] * num_envs, variants(num_envs), steps, rounds, ROUNDS_PER_BUILD)


def measure_variants(
    env_fns: list, makers: dict[str, Callable[[list], Any]], steps: int, rounds: int
) -> dict[str, float]:
    """Env-steps per second of each vector env ``makers`` builds over ``env_fns``: all alive at
    once, measured in alternating rounds of ``steps`` steps; the median round, by label."""
    samples = measure_rounds(env_fns, makers, steps, rounds)
    return {label: statistics.median(values) for label, values in samples.items()}


def measure_rounds(
    env_fns: list,
    makers: dict[str, Callable[[list], Any]],
    steps: int,
    rounds: int,
    rounds_per_build: int | None = None,
) -> dict[str, list[float]]:
    """Env-steps per second of each vector env ``makers`` builds over ``env_fns``, one figure
    per round: all alive at once, measured in alternating rounds of ``steps`` steps after a
    warm-up (see :func:`round_order`), so round ``i`` of two variants ran side by side.

    With ``rounds_per_build``, every variant is built afresh that often: on a machine with
    fewer cores than processes, where the scheduler happens to place one vector env's workers
    can make it faster or slower for its whole life, so a ratio must come from several builds.
    """
    samples: dict[str, list[float]] = {label: [] for label in makers}
    per_build = rounds_per_build or rounds
    for first_round in range(0, rounds, per_build):
        _measure_one_build(env_fns, makers, steps, range(first_round, min(rounds, first_round + per_build)), samples)
    return samples


def _measure_one_build(
    env_fns: list,
    makers: dict[str, Callable[[list], Any]],
    steps: int,
    round_indices: range,
    samples: dict[str, list[float]],
) -> None:
    num_envs = len(env_fns)
    built: dict[str, Any] = {}
    try:
        for label, make in makers.items():
            built[label] = make(env_fns)
        for envs in built.values():
            envs.reset(seed=0)
            steps_per_second(envs, num_envs, max(10, steps // 10))  # warm up
        for round_index in round_indices:
            for label in round_order(list(built), round_index):
                samples[label].append(steps_per_second(built[label], num_envs, steps))
    finally:
        for envs in built.values():
            envs.close()


def round_order(labels: list[str], round_index: int) -> list[str]:
    """The order of one round: who goes first rotates, so no variant always runs right after the
    same neighbour; ours with profiling on and off run back to back (their order alternating),
    since their ratio is the finest figure the table gives."""
    units = [[label] for label in labels if label != OURS_OFF]
    if OURS in labels and OURS_OFF in labels:
        pair = [OURS, OURS_OFF] if round_index % 2 else [OURS_OFF, OURS]
        units[next(i for i, unit in enumerate(units) if unit == [OURS])] = pair
    shift = round_index % len(units)
    return [label for unit in units[shift:] + units[:shift] for label in unit]


def paired_ratio(samples: dict[str, list[float]], label: str, reference: str) -> float:
    """The median over rounds of ``label``'s rate over ``reference``'s in the same round."""
    return statistics.median(mine / theirs for mine, theirs in zip(samples[label], samples[reference]))


def measure_overhead(rounds: int | None) -> None:
    """Profiling on vs off on every row, then the trainer's share in place, then what profiling
    adds part by part: ``benchmarks/profiling_overhead.py``, which ``--overhead`` runs
    (``rounds`` per row)."""
    import profiling_overhead

    profiling_overhead.main([] if rounds is None else ["--rounds", str(rounds)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and rounds: rough figures, fast")
    parser.add_argument(
        "--overhead", action="store_true", help="only profiling on vs off, closely, on every row"
    )
    parser.add_argument("--rounds", type=int, default=None, help="rounds per row of --overhead")
    parser.add_argument(
        "--envs", nargs="+", choices=list(ENVS), default=list(TABLE_ENVS), help="the envs of the table's rows"
    )
    parser.add_argument("--sizes", nargs="+", type=int, default=[2, 4, 8], help="numbers of envs of the rows")
    args = parser.parse_args()
    if args.overhead:
        measure_overhead(args.rounds)
        return
    print_table(args.envs, args.sizes, quick=args.quick)


def print_table(env_names: list[str], sizes: list[int], quick: bool) -> None:
    """Every row: each variant's rate and its ratios to async and sync, profiling's cost; then
    the goals."""
    rounds = 6 if quick else 15
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"{rounds} interleaved rounds per row, every variant built afresh every {ROUNDS_PER_BUILD}; rates: median round; ratios: median of per-round ratios; "
        f"{cores_available()} cores usable; load {load}; default envs_per_worker={DEFAULT_ENVS_PER_WORKER!r}"
    )
    rows = []
    print(f"{'env':<12} {'n':>2}  {'variant':<20} {'steps/s':>9}  {'vs async':>8}  {'vs sync':>8}")
    for env_name in env_names:
        steps = STEPS_PER_ROUND[env_name] // (2 if quick else 1)
        for num_envs in sizes:
            samples = measure_row(env_name, num_envs, steps, rounds)
            rows.append((env_name, num_envs, samples))
            for label, rates in samples.items():
                print(
                    f"{env_name:<12} {num_envs:>2}  {label:<20} {statistics.median(rates):>9.0f}"
                    f"  {paired_ratio(samples, label, ASYNC):>8.2f}  {paired_ratio(samples, label, SYNC):>8.2f}",
                    flush=True,
                )
            low, _, high = statistics.quantiles(profiling_costs_per_round(samples), n=4)
            print(
                f"{'':<16}profiling on vs off: {profiling_cost(samples):+.1%}   goal <= 2%"
                f"   (quartiles of the rounds {low:+.1%} .. {high:+.1%})",
                flush=True,
            )
    print_goals(rows)


def profiling_cost(samples: dict[str, list[float]]) -> float:
    """What profiling costs ours at default settings: the rate with it off over on, minus 1
    (the median over rounds)."""
    return statistics.median(profiling_costs_per_round(samples))


def profiling_costs_per_round(samples: dict[str, list[float]]) -> list[float]:
    return [off / on - 1 for on, off in zip(samples[OURS], samples[OURS_OFF])]


def print_goals(rows: list[tuple[str, int, dict[str, list[float]]]]) -> None:
    """Issue 12's goals, as measured in this run, where the table has their rows."""
    by_row = {(env_name, num_envs): samples for env_name, num_envs, samples in rows}
    auto = OURS if DEFAULT_ENVS_PER_WORKER == "auto" else OURS_AUTO
    print()
    cartpole = by_row.get(("CartPole-v1", 8))
    if cartpole is not None:
        print(f"CartPole-v1 x8, envs_per_worker='auto' / async:   {paired_ratio(cartpole, auto, ASYNC):5.2f}   goal >= 3.00")
    busy = by_row.get(("busy-1ms", 8))
    if busy is not None:
        print(f"busy-1ms x8, ours (default) / async:               {paired_ratio(busy, OURS, ASYNC):5.2f}   goal >= 1.00")
        if auto != OURS:
            print(f"busy-1ms x8, envs_per_worker='auto' / async:       {paired_ratio(busy, auto, ASYNC):5.2f}   goal >= 1.00")
    costs = {(env_name, num_envs): profiling_cost(samples) for env_name, num_envs, samples in rows}
    (worst_env, worst_size), worst = max(costs.items(), key=lambda item: item[1])
    print(f"profiling on vs off, worst row ({worst_env} x{worst_size}):{'':<{max(0, 12 - len(worst_env))}} {worst:+6.1%}   goal <= 2%")
    print(
        f"ours (default) / async, median over rows:          "
        f"{statistics.median(paired_ratio(samples, OURS, ASYNC) for *_, samples in rows):5.2f}"
    )


if __name__ == "__main__":
    main()
