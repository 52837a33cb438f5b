"""A planted straggler run whose env manager shows the live view itself (``live_view=True``).

``python manager_live_view_training.py MANAGER SECONDS [STOP_FILE [RAY_ADDRESS]]``: MANAGER is
``subprocess`` (a SubprocessEnvManager) or ``ray`` (a RayEnvManager, its actors on the Ray cluster
at RAY_ADDRESS); the run of straggler_training.py. No ``rlprof run``, no
``profiler.live_view.start()``: the manager's argument alone puts the view up. It steps until
SECONDS have passed or the file STOP_FILE exists (a test makes it once it saw what it waited
for), then closes the manager and prints ``closed`` on stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from straggler_training import step_for, straggler_env_fns  # noqa: E402


def build_manager(kind: str, ray_address: str | None) -> object:
    if kind == "ray":
        import ray

        from envmanager import RayEnvManager

        ray.init(address=ray_address, log_to_driver=False)
        return RayEnvManager(straggler_env_fns(), num_cpus=0.25, live_view=True)
    from envmanager.subprocess_env_manager import SubprocessEnvManager

    return SubprocessEnvManager(straggler_env_fns(), live_view=True)


def main(kind: str, seconds: float, stop_file: Path | None, ray_address: str | None) -> None:
    envs = build_manager(kind, ray_address)
    try:
        step_for(envs, seconds, stop_file=stop_file)
    finally:
        envs.close()
    print("closed", flush=True)


if __name__ == "__main__":
    main(
        sys.argv[1],
        float(sys.argv[2]),
        Path(sys.argv[3]) if len(sys.argv) > 3 else None,
        sys.argv[4] if len(sys.argv) > 4 else None,
    )
