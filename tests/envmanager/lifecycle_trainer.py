"""A small trainer that the lifecycle tests run as a process of its own.

The tests need a trainer they can SIGKILL, or leave to exit without ``close()``, and watch
from outside.  Usage::

    python lifecycle_trainer.py SCENARIO START_METHOD [PATH]

Once its workers are in the state the scenario asks for, it prints one JSON line with the
pids to watch (``workers``, ``helpers``: the envs' helper processes, ``forked_child``) and
then does what the scenario says:

``hung``           both workers hang inside an env step, under ``max_concurrency=1`` (the report
                   adds ``semaphore``); the trainer sleeps (to be killed).
``forked-child``   the trainer forks a child that sleeps, then sleeps itself (to be killed).
``thread-built``   as ``hung``, but the manager is built by a thread that has ended (and a
                   step after that thread's end must work).
``never-closed``   the trainer steps a few times and ends without ``close()``; the
                   manager has ``daemon=False`` unless PATH is given, then
                   ``daemon=True`` and PATH as its ``summaries_dir``.
``child-exits``    the trainer forks a child that ends through ``sys.exit`` (running the
                   interpreter's exit hooks), then steps and closes the manager, and prints
                   ``{"stepped": true}``.
``main-thread-ends`` envs whose helpers their ``close()`` forgets, under ``max_concurrency=1``
                   (the report adds ``semaphore``); the trainer's main thread ends while another
                   thread keeps the process alive (as numpy's threads do while a killed trainer
                   dies), to be killed later.
``replying``       envs with 2 MB observations and forgotten helpers; both workers are writing
                   a reply the trainer does not read; the trainer sleeps (to be killed).
``signalled``      as ``replying``, but each worker gets SIGTERM and the parent-death signal as it
                   starts to end its group (``SignalledAtTheEndEnv``: worker i writes the file
                   PATH.i when they are sent).
``starting``       spawned workers announce themselves (``{"worker_starting": pid}``) and take
                   30 s to import this script: the trainer is to get Ctrl-C meanwhile.
``constructing``   the first env, built to read the spaces, starts a helper, prints
                   ``{"helpers": [pid]}`` and hangs: the trainer is killed during construction.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from envmanager_testenvs import (  # noqa: E402
    CountingEnv,
    ForkingEnv,
    HelperAtConstructionEnv,
    HelperProcessEnv,
    LeakyBigObservationEnv,
    LeakyHelperProcessEnv,
    SignalledAtTheEndEnv,
)

from envmanager import SubprocessEnvManager  # noqa: E402

NEVER_CLOSED_STEPS = 7

if __name__ == "__mp_main__" and os.environ.get("LIFECYCLE_SLOW_WORKER_START"):
    # A spawned worker importing the trainer's script: a slow start-up, as a large import makes.
    print(json.dumps({"worker_starting": os.getpid()}), flush=True)
    time.sleep(30)


def _report(**pids: object) -> None:
    print(json.dumps(pids), flush=True)


def _pids(envs: SubprocessEnvManager) -> dict[str, list[int]]:
    """The workers and the envs' helper processes (started by the first reset)."""
    return {
        "workers": [handle.process.pid for handle in envs._pool.workers],
        "helpers": list(envs.get_attr("helper_pid")),
    }


def main(scenario: str, start_method: str, path: str | None) -> SubprocessEnvManager:
    if scenario == "hung":
        envs = SubprocessEnvManager([HelperProcessEnv] * 2, context=start_method, max_concurrency=1)
        envs.reset(seed=0)
        pids = _pids(envs)
        envs.step_async(np.array([2, 2]))
        time.sleep(0.5)  # let both workers enter the hung step (one waits for the permit)
        _report(semaphore=envs._pool.permits.semaphore_id, **pids)
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
    elif scenario == "env-forked-child":
        envs = SubprocessEnvManager([ForkingEnv] * 2, context=start_method)
        envs.reset(seed=0)
        _report(**_pids(envs))
        time.sleep(600)
    elif scenario == "never-closed":
        if path is None:
            envs = SubprocessEnvManager([CountingEnv] * 2, context=start_method, daemon=False)
        else:
            envs = SubprocessEnvManager(
                [CountingEnv] * 2, context=start_method, summaries_dir=path, run_id="unclosed"
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
    elif scenario == "main-thread-ends":
        envs = SubprocessEnvManager([LeakyHelperProcessEnv] * 2, context=start_method, max_concurrency=1)
        envs.reset(seed=0)
        _report(semaphore=envs._pool.permits.semaphore_id, **_pids(envs))
        threading.Thread(target=time.sleep, args=(600,)).start()
        ctypes.CDLL(None).pthread_exit(None)
    elif scenario in ("replying", "signalled"):
        if scenario == "replying":
            env_fns = [LeakyBigObservationEnv] * 2
        else:
            env_fns = [functools.partial(SignalledAtTheEndEnv, mark_file=f"{path}.{index}") for index in range(2)]
        envs = SubprocessEnvManager(env_fns, context=start_method, shared_memory=False)
        envs.reset(seed=0)
        pids = _pids(envs)
        envs.step_async(np.array([0, 0]))
        time.sleep(0.5)  # let both workers fill their reply pipes
        _report(**pids)
        time.sleep(600)
    elif scenario == "starting":
        envs = SubprocessEnvManager([CountingEnv] * 2, context=start_method)
    elif scenario == "constructing":
        envs = SubprocessEnvManager([functools.partial(HelperAtConstructionEnv, hang=True)] * 2, context=start_method)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    return envs


if __name__ == "__main__":
    # Held until the interpreter exits, as a manager at a script's top level is.
    envs = main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
