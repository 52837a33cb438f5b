"""RayEnvManager on one machine: env-steps per second beside SubprocessEnvManager and
AsyncVectorEnv, and what merging the actors' timers costs the driver as actors grow.

    python benchmarks/ray_throughput.py             # both parts (a few minutes)
    python benchmarks/ray_throughput.py --quick     # rough figures, fast
    python benchmarks/ray_throughput.py --merge-only --actors 1 4 16 64

**Throughput.** For CartPole-v1 and an env burning 1 ms of CPU per step, 4 envs, it steps
Gymnasium's AsyncVectorEnv, SubprocessEnvManager, RayEnvManager (profiling on and off, one env
per actor and several), and *bare Ray actors* — a plain actor per env stepping it, one ``ray.get``
per vector step, no rlprof — the floor of Ray's own cost. All variants of a row are alive at
once and measured in alternating rounds; the figure is the median round.

**Merge cost.** For 1 to 64 actors, each running a worker whose env times 10 blocks per step and
ships its timers on every reply (``flush_every=1``, the most a driver can be asked to merge), it
times every ``TimerMerger.merge_payload`` the driver runs (validation included) and prints the
median per payload, the sum per vector step, that sum's share of the vector step, the payload's
pickled size, the size of the dump written at the end, and what the driver spends per actor and
step submitting the calls (``send_actions``) and fetching and decoding their results
(``receive_results``): the figures docs/ray.md scales to 100 machines.

Goals (printed, never asserted: they depend on the machine):
  * RayEnvManager (profiling on) / bare Ray actors, 1 env per actor: >= 0.90 (rlprof's share of a
    Ray step is small; Ray's own round trip is the floor)
  * profiling overhead on Ray (off / on - 1): <= 5 %
  * merge cost per payload: flat as actors grow (within 2x from 1 to 64 actors)
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import ray
from gymnasium.vector import AsyncVectorEnv
from benchmark_envs import BusyEnv
from vector_throughput import measure_variants

from envmanager import RayEnvManager, SubprocessEnvManager
from profiler import hierarchical_timer, load_timing_tree

ENVS: dict[str, Callable[[], gym.Env]] = {
    "CartPole-v1": lambda: gym.make("CartPole-v1"),
    "busy-1ms": lambda: BusyEnv(1e-3),
}
NUM_ENVS = 4
ASYNC, SUBPROCESS, RAY, RAY_OFF, BARE_RAY = "async", "subprocess", "ray", "ray profiling off", "bare ray actors"


class BlockyEnv(BusyEnv):
    """A 50 us env whose step is ten timed blocks: a payload of a realistic size (12 nodes)."""

    def __init__(self) -> None:
        super().__init__(50e-6)

    def step(self, action: Any) -> tuple:
        with hierarchical_timer("simulate"):
            for part in range(9):
                with hierarchical_timer(f"physics.part{part}"):
                    pass
            return super().step(action)


class BareEnvActor:
    """One env in a plain Ray actor, stepped with no rlprof at all."""

    def __init__(self, make: Callable[[], gym.Env]) -> None:
        self.env = make()
        self.env.reset(seed=0)

    def step(self, action: int) -> tuple:
        observation, reward, terminated, truncated, _ = self.env.step(action)
        if terminated or truncated:
            observation, _ = self.env.reset()
        return observation, reward, terminated, truncated


class BareRayVector:
    """The least a vector env on Ray can do: one actor call per env and one ``ray.get`` a step."""

    def __init__(self, env_fns: list, cpus_per_actor: float) -> None:
        actor = ray.remote(BareEnvActor).options(num_cpus=cpus_per_actor)
        self.actors = [actor.remote(make) for make in env_fns]

    def reset(self, seed: int | None = None) -> None:
        ray.get([actor.step.remote(0) for actor in self.actors])

    def step(self, actions: np.ndarray) -> list[tuple]:
        return ray.get([actor.step.remote(int(action)) for actor, action in zip(self.actors, actions)])

    def close(self) -> None:
        for actor in self.actors:
            ray.kill(actor)


def variants(cpus_per_actor: float) -> dict[str, Callable[[list], Any]]:
    per_actor = NUM_ENVS // 2
    return {
        ASYNC: lambda fns: AsyncVectorEnv(fns),
        SUBPROCESS: lambda fns: SubprocessEnvManager(fns),
        BARE_RAY: lambda fns: BareRayVector(fns, cpus_per_actor),
        RAY: lambda fns: RayEnvManager(fns, num_cpus=cpus_per_actor),
        RAY_OFF: lambda fns: RayEnvManager(fns, num_cpus=cpus_per_actor, profiling=False),
        f"ray epw={per_actor}": lambda fns: RayEnvManager(fns, num_cpus=cpus_per_actor, envs_per_worker=per_actor),
    }


def measure_row(env_name: str, steps: int, rounds: int, cpus_per_actor: float) -> dict[str, float]:
    return measure_variants([ENVS[env_name]] * NUM_ENVS, variants(cpus_per_actor), steps, rounds)


def throughput(quick: bool, cpus_per_actor: float) -> list[dict[str, float]]:
    rounds = 3 if quick else 7
    rows = []
    print(f"{'env':<12} {'n':>2}  {'variant':<20} {'steps/s':>9}  {'vs async':>8}  {'vs bare ray':>11}")
    for env_name in ENVS:
        steps = {"CartPole-v1": 1000, "busy-1ms": 100}[env_name] // (4 if quick else 1)
        row = measure_row(env_name, steps, rounds, cpus_per_actor)
        rows.append(row)
        for label, rate in row.items():
            print(f"{env_name:<12} {NUM_ENVS:>2}  {label:<20} {rate:>9.0f}  {rate / row[ASYNC]:>8.2f}"
                  f"  {rate / row[BARE_RAY]:>11.2f}", flush=True)
    return rows


def merge_cost(actors: int, steps: int, cores: int) -> dict[str, float]:
    """Run ``actors`` workers of one BlockyEnv each, flushing every step; time the driver's merges."""
    envs = RayEnvManager([BlockyEnv] * actors, num_cpus=min(1.0, cores / actors), flush_every=1)
    merger = envs.timer_merger
    merge_payload = merger.merge_payload
    merge_seconds: list[float] = []
    sizes: list[int] = []

    def timed_merge(worker_id: int, payload: Any, anchor: Any = None) -> None:
        started = time.perf_counter()
        merge_payload(worker_id, payload, anchor)
        merge_seconds.append(time.perf_counter() - started)
        if len(sizes) < 100:
            sizes.append(len(pickle.dumps(payload, pickle.HIGHEST_PROTOCOL)))

    try:
        actions = np.zeros(actors, dtype=np.int64)
        envs.reset(seed=0)
        for _ in range(10):
            envs.step(actions)
        merger.merge_payload = timed_merge  # this instance only: the manager merges through it
        started = time.perf_counter()
        for _ in range(steps):
            envs.step(actions)
        step_seconds = (time.perf_counter() - started) / steps
        with tempfile.TemporaryDirectory() as directory:
            dump = envs.dump_timers(directory, "merge_cost")
            dump_bytes = dump.stat().st_size
            step_block = next(node for node in load_timing_tree(dump)["children"] if node["name"] == "env_manager.step")
    finally:
        envs.close()
    send, receive = (next(node for node in step_block["children"] if node["name"] == name)
                     for name in ("send_actions", "receive_results"))
    per_payload = statistics.median(merge_seconds)
    per_step = sum(merge_seconds) / steps
    return {
        "per_payload_us": per_payload * 1e6,
        "per_step_us": per_step * 1e6,
        "step_share": per_step / step_seconds,
        "payload_bytes": statistics.median(sizes),
        "dump_bytes": dump_bytes,
        "payloads": len(merge_seconds),
        # What the driver spends per actor and step submitting calls and fetching their results.
        "submit_us": send["total"] / send["count"] / actors * 1e6,
        "fetch_us": receive["total"] / receive["count"] / actors * 1e6,
    }


def merge_costs(actor_counts: list[int], steps: int, cores: int) -> list[tuple[int, dict[str, float]]]:
    print()
    print(f"driver merge cost, one BlockyEnv per actor, flush_every=1, {steps} steps")
    print(f"{'actors':>6}  {'us/payload':>10}  {'us/step':>9}  {'of step':>7}  {'payload B':>9}  {'dump KB':>8}"
          f"  {'submit us/actor':>15}  {'fetch us/actor':>14}")
    results = []
    for actors in actor_counts:
        figures = merge_cost(actors, steps, cores)
        results.append((actors, figures))
        print(f"{actors:>6}  {figures['per_payload_us']:>10.1f}  {figures['per_step_us']:>9.0f}  "
              f"{figures['step_share']:>7.1%}  {figures['payload_bytes']:>9.0f}  {figures['dump_bytes'] / 1024:>8.1f}"
              f"  {figures['submit_us']:>15.0f}  {figures['fetch_us']:>14.0f}", flush=True)
    return results


def print_goals(rows: list[dict[str, float]], merges: list[tuple[int, dict[str, float]]]) -> None:
    print()
    if rows:
        versus_bare = statistics.median(row[RAY] / row[BARE_RAY] for row in rows)
        overhead = statistics.median(row[RAY_OFF] / row[RAY] - 1 for row in rows)
        print(f"RayEnvManager / bare Ray actors, median over envs: {versus_bare:.2f}   goal >= 0.90")
        print(f"profiling overhead on Ray (off/on - 1), median:    {overhead:+.1%}   goal <= 5%")
    if len(merges) > 1:
        growth = merges[-1][1]["per_payload_us"] / merges[0][1]["per_payload_us"]
        print(f"merge cost per payload, {merges[-1][0]} actors / {merges[0][0]}:       {growth:.2f}x   goal <= 2x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and rounds: rough figures, fast")
    parser.add_argument("--merge-only", action="store_true", help="only the driver's merge cost")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 4, 16, 64], help="actor counts of the merge cost")
    parser.add_argument("--merge-steps", type=int, default=200, help="vector steps per merge-cost run")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    # Ray's workers import this folder's modules (the envs) by name: they inherit this variable.
    os.environ["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    try:
        print(f"{cores} cores, Ray {ray.__version__}, Python {sys.version.split()[0]}")
        # A row's actors (bare, ray, ray off, ray epw) share the cores' CPUs, so all are placed.
        rows = [] if args.merge_only else throughput(args.quick, cores / (4 * NUM_ENVS))
        steps = args.merge_steps // (4 if args.quick else 1)
        merges = merge_costs(args.actors, steps, cores)
        print_goals(rows, merges)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
