"""Specification: an env worker that unpickles its timed factory (forkserver, spawn) imports the
timed env, not the managers, the transport or what the trainer installs and reads back."""

from __future__ import annotations

import subprocess
import sys

NOT_NEEDED_IN_A_WORKER = ("envmanager.subprocess_env_manager", "envmanager.ray_env_manager",
                          "envmanager.instrumentation.environments", "envmanager.instrumentation.vector_env_record",
                          "profiler.analysis.analyze", "profiler.control.controls")


def test_unpickling_a_timed_factory_imports_only_the_timed_env():
    code = ("import sys\n"
            "import envmanager.instrumentation.factories\n"
            "print(' '.join(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    modules = set(done.stdout.split())
    assert "envmanager.instrumentation.timed_env" in modules
    assert modules.isdisjoint(NOT_NEEDED_IN_A_WORKER)


def test_the_package_names_are_there_when_asked_for():
    code = ("from envmanager import SubprocessEnvManager, RayEnvManager, WorkerError\n"
            "from envmanager.instrumentation import instrument_environments, FINAL_TIMERS_WAIT_SECONDS\n"
            "print(SubprocessEnvManager.__name__, RayEnvManager.__name__, WorkerError.__name__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout == "SubprocessEnvManager RayEnvManager WorkerError\n"


# What rlprof's instrumentation made a spawn worker import, though it needs none of it to time its
# env: the package metadata (for Gymnasium's version, which the imported Gymnasium gives), psutil
# (for memory figures the worker may never take), the import hooks' base classes (for the trainer's
# framework phases) and the recording of PyTorch's operators.
NOT_IMPORTED_FOR_RLPROF_IN_A_WORKER = ("importlib.metadata", "psutil", "importlib.abc", "importlib.resources",
                                       "profiler.gpu.torch_ops", "profiler.gpu.operator_figures")

WORKER_WRITES_ITS_MODULES = """
import os, sys
import gymnasium as gym
import numpy as np


class Probe(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        with open(os.path.join(sys.argv[1], f"modules-{os.getpid()}.txt"), "w") as found:
            found.write(" ".join(sorted(sys.modules)))
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 0.0, False, False, {}


if __name__ == "__main__":
    envs = gym.vector.AsyncVectorEnv([Probe], context="spawn")
    envs.reset(seed=0)
    envs.step(envs.action_space.sample())
    envs.close()
"""


def test_a_spawn_worker_of_rlprof_run_imports_nothing_it_does_not_use(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(WORKER_WRITES_ITS_MODULES)
    done = subprocess.run([sys.executable, "-m", "profiler", "run", "--summaries-dir", str(tmp_path / "out"),
                           str(script), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "AsyncVectorEnv (1 env, in 1 worker process)" in done.stderr
    (found,) = tmp_path.glob("modules-*.txt")
    modules = set(found.read_text().split())
    assert "envmanager.instrumentation.timed_env" in modules  # the env is timed in the worker
    assert sorted(modules.intersection(NOT_IMPORTED_FOR_RLPROF_IN_A_WORKER)) == []


FORKSERVER_PROCESS_FINDS = """
import multiprocessing, sys
import gymnasium as gym


def report(queue):
    queue.put("envmanager.instrumentation.factories" in sys.modules)


if __name__ == "__main__":
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2, context="forkserver")
    envs.reset(seed=0)
    context = multiprocessing.get_context("forkserver")
    queue = context.Queue()
    process = context.Process(target=report, args=(queue,))  # a plain process of the same server
    process.start()
    print("found in a new forkserver process:", queue.get(timeout=60))
    process.join()
    envs.close()
"""


def test_the_forkserver_imports_rlprofs_worker_side_once_for_every_worker_it_forks(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(FORKSERVER_PROCESS_FINDS)
    done = subprocess.run([sys.executable, "-m", "profiler", "run", "--summaries-dir", str(tmp_path / "out"),
                           str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "AsyncVectorEnv (2 envs, in 2 worker processes)" in done.stderr
    # A process whose target is the program's own function got rlprof's worker side from the server.
    assert done.stdout == "found in a new forkserver process: True\n"


def test_a_forkserver_without_rlprof_preloads_only_the_program(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(FORKSERVER_PROCESS_FINDS)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "found in a new forkserver process: False\n"
