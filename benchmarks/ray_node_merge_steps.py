"""What ``RayEnvManager(merge_per_node=True)`` costs and saves a real run, against payloads merged
on the replies (the default), on one machine's Ray.

Two managers of the same envs are alive at once, one with each setting, and step in alternating
rounds; each round is timed as a whole and by the manager's own blocks: ``receive_results`` (the
driver decoding the replies and merging the payloads, or taking the node's payload) and
``wait_for_workers`` (the workers' steps, and per node their wait for the aggregator to merge a
payload). Medians over the rounds, the first left out (actors warming up).

    python benchmarks/ray_node_merge_steps.py                     # 4 workers, a flush every step
    python benchmarks/ray_node_merge_steps.py --flush-every 0     # the default one-second flush

On one machine every worker shares the driver's node, so the per-node variant has one aggregator
for all of them: the driver merges one payload where it merged ``--workers``. What it cannot show
is the network a multi-node run saves; ``benchmarks/node_merge_cost.py`` measures the driver's
merging alone for up to 1,000 workers over 32 nodes.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import gymnasium as gym
import numpy as np

from profiler import get_timer_tree, hierarchical_timer, reset_timers

VARIANTS = ("on replies", "per node")


def block(node: dict, *path: str) -> dict | None:
    for name in path:
        node = next((child for child in node.get("children", ()) if child["name"] == name), None)
        if node is None:
            return None
    return node


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=200, help="vector steps per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--flush-every", type=int, default=1, help="0: the default one-second flush")
    arguments = parser.parse_args()

    import ray

    from envmanager import RayEnvManager

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    flush_every = arguments.flush_every or None
    managers = {
        variant: RayEnvManager([lambda: gym.make("CartPole-v1")] * arguments.workers, num_cpus=0.1,
                               flush_every=flush_every, merge_per_node=variant == "per node")
        for variant in VARIANTS
    }
    actions = np.zeros(arguments.workers, dtype=np.int64)
    folder = tempfile.mkdtemp()
    figures: dict[str, list[tuple[float, float, float]]] = {variant: [] for variant in VARIANTS}
    for envs in managers.values():
        envs.reset(seed=0)
    for round_index in range(arguments.rounds):
        for variant in VARIANTS if round_index % 2 == 0 else reversed(VARIANTS):
            envs = managers[variant]
            reset_timers()
            started = time.perf_counter()
            with hierarchical_timer(variant):
                for _ in range(arguments.steps):
                    envs.step(actions)
            wall = time.perf_counter() - started
            envs.dump_timers(folder, "ray_node_merge_steps")  # brings the node payloads home too
            step = block(get_timer_tree(), variant, "env_manager.step")
            receive = block(step, "receive_results")["total"]
            wait = block(step, "wait_for_workers")["total"]
            if round_index:
                figures[variant].append(tuple(value / arguments.steps * 1e6 for value in (wall, receive, wait)))
    for envs in managers.values():
        envs.close()
    ray.shutdown()

    flush = f"a flush every {flush_every} step(s)" if flush_every else "the default one-second flush"
    print(f"{arguments.workers} workers on one node, CartPole, {flush}, {arguments.steps} steps a round, "
          f"medians of {arguments.rounds - 1} rounds (µs per vector step)")
    print("| variant | step | receive_results (decode + merge) | wait_for_workers |")
    print("| --- | --- | --- | --- |")
    medians = {variant: [statistics.median(column) for column in zip(*figures[variant])] for variant in VARIANTS}
    for variant in VARIANTS:
        print(f"| {variant} | " + " | ".join(f"{value:,.0f}" for value in medians[variant]) + " |")
    ratios = [per_node / on_replies for per_node, on_replies in zip(medians["per node"], medians["on replies"])]
    print("| per node / on replies | " + " | ".join(f"{ratio:.2f}x" for ratio in ratios) + " |")


if __name__ == "__main__":
    main()
