"""A training loop with a planted straggler, run as a program by the live view's tests.

``python straggler_training.py SECONDS [TIMERS_FOLDER]``: four envs over a SubprocessEnvManager,
worker 3's 6x slower than the others (see verdict_runs.PLANTED_DELAYS); a ``policy.act`` block
before each step. With a folder, the run writes its timers there every half second
(``continuous_dump``), for ``rlprof watch``. It steps until SECONDS have passed or it is stopped.

Other programs of the tests (and docs/images/capture_live_view.py) build the same run from
:func:`straggler_env_fns` and :func:`step_for`.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import numpy as np  # noqa: E402
from envmanager_testenvs import CountingEnv  # noqa: E402
from verdict_runs import PLANTED_DELAYS  # noqa: E402

import profiler  # noqa: E402


def straggler_env_fns() -> list[Callable[[], Any]]:
    """Four envs, the last one six times slower than the others."""
    return [functools.partial(CountingEnv, episode_length=10_000, delay=delay) for delay in PLANTED_DELAYS]


def step_for(
    envs: Any,
    seconds: float,
    after_step: Callable[[], None] | None = None,
    stop_file: Path | None = None,
) -> None:
    """Reset ``envs``, then step them for ``seconds``, a ``policy.act`` block before each step
    (and ``after_step`` after each, where given); sooner if ``stop_file`` appears."""
    envs.reset(seed=0)
    actions = np.zeros(envs.num_envs, dtype=np.int64)
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (stop_file is not None and stop_file.exists()):
        with profiler.hierarchical_timer("policy.act"):
            time.sleep(0.001)
        envs.step(actions)
        if after_step is not None:
            after_step()


def main(seconds: float, timers_folder: str | None) -> None:
    from envmanager.subprocess_env_manager import SubprocessEnvManager

    if timers_folder is not None:
        profiler.set_config(continuous_dump=True, dump_period=0.5, summaries_dir=timers_folder,
                            run_id="straggler", formats=("timers",), timeline=False)
        profiler.set_state("run")  # MXNet's profiler starts stopped
    envs = SubprocessEnvManager(straggler_env_fns())
    try:
        step_for(envs, seconds)
    finally:
        envs.close()


if __name__ == "__main__":
    main(float(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
