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
