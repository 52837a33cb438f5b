"""A short real run for the report's browser test: ``python report_run_training.py SECONDS``.

The planted straggler of tests/envmanager/straggler_training.py (four worker processes, worker
3's 6x slower), resource gauges sampled, and after each step ``log_progress``, left untimed on
purpose so that the report's flame graph has an untimed part the stack sampler can name.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "envmanager"))

from straggler_training import step_for, straggler_env_fns  # noqa: E402

from envmanager.subprocess_env_manager import SubprocessEnvManager  # noqa: E402


def log_progress() -> None:
    """Untimed work between steps: the place the stack sampler finds."""
    time.sleep(0.004)


def main(seconds: float) -> None:
    envs = SubprocessEnvManager(straggler_env_fns(), resource_interval=0.2)
    try:
        step_for(envs, seconds, after_step=log_progress)
    finally:
        envs.close()


if __name__ == "__main__":
    main(float(sys.argv[1]))
