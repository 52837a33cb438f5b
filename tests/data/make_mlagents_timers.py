"""Regenerate mlagents_timers.json with Unity ML-Agents' own timers.py (mlagents-envs 1.1.0).

    python tests/data/make_mlagents_timers.py

The worker tree is merged the way ML-Agents' SubprocessEnvManager does it: into the open block,
under ``worker_root``, with ``is_parallel``.
"""

import json
import sys
import time
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parent.parent / "benchmarks"))
from reference_timers import load_mlagents_timers  # noqa: E402

timers = load_mlagents_timers()
if timers is None:
    sys.exit("cannot fetch mlagents-envs")
timers.reset_timers()
with timers.hierarchical_timer("TrainerController.start_learning"):
    for _ in range(3):
        with timers.hierarchical_timer("env_step"):
            time.sleep(0.002)
            worker = timers.TimerStack()
            with timers.hierarchical_timer("UnityEnvironment.step", worker):
                time.sleep(0.001)
            timers.get_timer_root().children["TrainerController.start_learning"].children[
                "env_step"
            ].merge(worker.get_root(), root_name="worker_root", is_parallel=True)
        with timers.hierarchical_timer("trainer_advance"):
            time.sleep(0.001)
    timers.set_gauge("Environment.CumulativeReward.mean", 1.5)
    timers.set_gauge("Environment.CumulativeReward.mean", 2.5)
timers.add_metadata("mlagents_version", "1.1.0")
(here / "mlagents_timers.json").write_text(json.dumps(timers.get_timer_tree(), indent=4))
