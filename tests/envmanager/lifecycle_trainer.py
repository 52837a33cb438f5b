"""A small trainer that the lifecycle tests run as a process of its own.

The tests need a trainer they can SIGKILL, or leave to exit without ``close()``, and watch
from outside.  Usage::

    python lifecycle_trainer.py SCENARIO START_METHOD [SUMMARIES_DIR]

Once its workers are in the state the scenario asks for, it prints one JSON line with the
pids to watch (``workers``, ``helpers``: the envs' helper processes, ``forked_child``) and
then does what the scenario says:

``hung``           both workers hang inside an env step; the trainer sleeps (to be killed).
``forked-child``   the trainer forks a child that sleeps, then sleeps itself (to be killed).
``thread-built``   as ``hung``, but the manager is built by a thread that has ended (and a
                   step after that thread's end must work).
``never-closed``   the trainer steps a few times and ends without ``close()``; the
                   manager has ``daemon=False`` unless SUMMARIES_DIR is given, then
                   ``daemon=True`` and that ``summaries_dir``.
``child-exits``    the trainer forks a child that ends through ``sys.exit`` (running the
                   interpreter's exit hooks), then steps and closes the manager, and prints
                   ``{"stepped": true}``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from envmanager_testenvs import CountingEnv, HelperProcessEnv  # noqa: E402

from envmanager import SubprocessEnvManager  # noqa: E402

NEVER_CLOSED_STEPS = 7


def _report(**pids: object) -> None:
    print(json.dumps(pids), flush=True)


def _pids(envs: SubprocessEnvManager) -> dict[str, list[int]]:
    """The workers and the envs' helper processes (started by the first reset)."""
    return {
        "workers": [handle.process.pid for handle in envs._pool.workers],
        "helpers": list(envs.get_attr("helper_pid")),
    }


def main(scenario: str, start_method: str, summaries_dir: str | None) -> SubprocessEnvManager:
    if scenario == "hung":
        envs = SubprocessEnvManager([HelperProcessEnv] * 2, context=start_method)
        envs.reset(seed=0)
        pids = _pids(envs)
        envs.step_async(np.array([2, 2]))
        time.sleep(0.5)  # let both workers enter the hung step
        _report(**pids)
        time.sleep(600)
    elif scenario == "thread-built":
        built: list[SubprocessEnvManager] = []
        builder = threading.Thread(
            target=lambda: built.append(SubprocessEnvManager([HelperProcessEnv] * 2, context=start_method))
        )
        builder.start()
        builder.join()
        envs = built[0]
        envs.reset(seed=0)
        envs.step(np.array([0, 0]))
        pids = _pids(envs)
        envs.step_async(np.array([2, 2]))
        time.sleep(0.5)
        _report(**pids)
        time.sleep(600)
    elif scenario == "forked-child":
        envs = SubprocessEnvManager([HelperProcessEnv] * 2, context=start_method)
        envs.reset(seed=0)
        pids = _pids(envs)
        child = os.fork()
        if child == 0:
            time.sleep(600)
            os._exit(0)
        _report(forked_child=child, **pids)
        time.sleep(600)
    elif scenario == "never-closed":
        if summaries_dir is None:
            envs = SubprocessEnvManager([CountingEnv] * 2, context=start_method, daemon=False)
        else:
            envs = SubprocessEnvManager(
                [CountingEnv] * 2, context=start_method, summaries_dir=summaries_dir, run_id="unclosed"
            )
        envs.reset(seed=0)
        for _ in range(NEVER_CLOSED_STEPS):
            envs.step(np.array([1, 1]))
        _report(workers=[handle.process.pid for handle in envs._pool.workers])
    elif scenario == "child-exits":
        envs = SubprocessEnvManager([CountingEnv] * 2, context=start_method)
        envs.reset(seed=0)
        child = os.fork()
        if child == 0:
            sys.exit(0)
        os.waitpid(child, 0)
        envs.step(np.array([1, 1]))
        envs.close()
        _report(stepped=True)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    return envs


if __name__ == "__main__":
    # Held until the interpreter exits, as a manager at a script's top level is.
    envs = main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
