"""Regenerate mlagents_nested_timers.json with Unity ML-Agents' own timers.py (mlagents-envs 1.1.0).

    python tests/data/make_mlagents_nested_timers.py

The blocks nest as ML-Agents' trainer nests them: ``TrainerController.advance`` holds
``env_step``, which holds the policy's ``SubprocessEnvManager._take_step`` and the ``workers``
block in which ``SubprocessEnvManager._postprocess_steps`` merges each worker's payload as
``worker_root`` (``is_parallel``). A worker's payload root carries the worker's whole interval
since its previous reply, idle time included (``TimerStack.get_root``), and its env work below.
"""

import json
import sys
import time
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parent.parent / "benchmarks"))
from reference_timers import load_mlagents_timers  # noqa: E402

WORKERS = 2
STEPS = 4

timers = load_mlagents_timers()
if timers is None:
    sys.exit("cannot fetch mlagents-envs")
timers.reset_timers()
with timers.hierarchical_timer("TrainerController.start_learning"):
    for _ in range(STEPS):
        with timers.hierarchical_timer("TrainerController.advance"):
            with timers.hierarchical_timer("env_step"):
                with timers.hierarchical_timer("SubprocessEnvManager._take_step"):
                    with timers.hierarchical_timer("TorchPolicy.evaluate"):
                        time.sleep(0.001)
                payloads = []
                for _worker in range(WORKERS):
                    worker = timers.TimerStack()
                    time.sleep(0.0005)  # the worker waits for its next command
                    with timers.hierarchical_timer("UnityEnvironment.step", worker):
                        with timers.hierarchical_timer("communicator.exchange", worker):
                            time.sleep(0.002)
                    payloads.append(worker.get_root())
                time.sleep(0.0005)  # polling the step queue
                with timers.hierarchical_timer("workers") as main_timer_node:
                    for payload in payloads:
                        main_timer_node.merge(payload, root_name="worker_root", is_parallel=True)
            with timers.hierarchical_timer("trainer_advance"):
                with timers.hierarchical_timer("_update_policy"):
                    time.sleep(0.003)
timers.add_metadata("mlagents_version", "1.1.0")
(here / "mlagents_nested_timers.json").write_text(json.dumps(timers.get_timer_tree(), indent=4))
