"""A planted straggler run whose env manager shows the live view itself (``live_view=True``).

``python manager_live_view_training.py MANAGER SECONDS [RAY_ADDRESS]``: MANAGER is ``subprocess``
(a SubprocessEnvManager) or ``ray`` (a RayEnvManager, its actors on the Ray cluster at
RAY_ADDRESS); four envs, worker 3's 6x slower (see verdict_runs.PLANTED_DELAYS), a ``policy.act``
block before each step. No ``rlprof run``, no ``profiler.live_view.start()``: the manager's
argument alone puts the view up. It steps until SECONDS have passed or it is stopped, then closes
the manager and prints ``closed`` on stdout.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import numpy as np  # noqa: E402
from envmanager_testenvs import CountingEnv  # noqa: E402
from verdict_runs import PLANTED_DELAYS  # noqa: E402

import profiler  # noqa: E402


def build_manager(kind: str, ray_address: str | None) -> object:
    env_fns = [functools.partial(CountingEnv, episode_length=10_000, delay=delay) for delay in PLANTED_DELAYS]
    if kind == "ray":
        import ray

        from envmanager import RayEnvManager

        ray.init(address=ray_address, log_to_driver=False)
        return RayEnvManager(env_fns, num_cpus=0.25, live_view=True)
    from envmanager.subprocess_env_manager import SubprocessEnvManager

    return SubprocessEnvManager(env_fns, live_view=True)


def main(kind: str, seconds: float, ray_address: str | None) -> None:
    envs = build_manager(kind, ray_address)
    try:
        envs.reset(seed=0)
        actions = np.zeros(envs.num_envs, dtype=np.int64)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            with profiler.hierarchical_timer("policy.act"):
                time.sleep(0.001)
            envs.step(actions)
    finally:
        envs.close()
    print("closed", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
