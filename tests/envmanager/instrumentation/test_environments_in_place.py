"""Specification of ``rlprof run`` with no flags: the program's envs timed where they run.

Every test runs an unmodified program (programs/) as a real subprocess, once with ``python`` and
once under ``rlprof run``, with real Gymnasium vector envs, real Stable-Baselines3 and real torch
(CPU), real worker processes (fork and spawn), and reads the files it wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import psutil
import pytest

PROGRAMS = Path(__file__).parent / "programs"
ROLLOUT = PROGRAMS / "vector_rollout.py"
SB3_PPO = PROGRAMS / "sb3_ppo.py"
ENVS, STEPS = 3, 120
SB3_ENVS, SB3_STEPS_PER_ENV = 2, 128  # PPO's 256 timesteps: 4 rollouts of 32 steps in 2 envs


def run_plain(folder: Path, program: Path, *arguments: str) -> None:
    result = subprocess.run([sys.executable, str(program), *arguments], cwd=folder,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def run_rlprof(folder: Path, program: Path, *arguments: str, options: tuple[str, ...] = (),
               environment: dict[str, str] | None = None) -> tuple[dict, str]:
    result = subprocess.run(
        [sys.executable, "-m", "profiler", "run", *options, "--summaries-dir", "out", str(program), *arguments],
        cwd=folder, capture_output=True, text=True, timeout=120, env=environment,
    )
    assert result.returncode == 0, result.stderr
    tree = json.loads((folder / "out" / f"{program.stem}_timers.json").read_text())
    return tree, result.stderr


def counts(node: dict, name: str) -> int:
    own = node["count"] if node["name"] == name else 0
    return own + sum(counts(child, name) for child in node["children"])


def only_block(tree: dict, name: str) -> dict:
    """The one trainer block of that name, wherever it sits (under the program's own blocks too)."""
    found, pending = [], list(tree["children"])
    while pending:
        node = pending.pop()
        if node["name"] == name and not node.get("is_parallel"):
            found.append(node)
        pending.extend(node["children"])
    (node,) = found
    return node


def same_results(plain: Path, timed: Path) -> bool:
    if plain.suffix == ".npy":
        return np.array_equal(np.load(plain), np.load(timed))
    a, b = np.load(plain), np.load(timed)
    return a.files == b.files and all(np.array_equal(a[key], b[key]) for key in a.files)


def rollout_resets(saved: Path) -> list[int]:
    """Each env's resets: the first, then one after every episode that ended before the last step
    (next-step autoreset: the step after an episode's end is a reset)."""
    results = np.load(saved)
    ended = results["terminations"] | results["truncations"]
    return (1 + ended[:-1].sum(axis=0)).tolist()


@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_async_vector_env_workers_are_timed_in_place_with_identical_results(tmp_path, context):
    arguments = ("--vector", "async", "--context", context, "--envs", str(ENVS), "--steps", str(STEPS))
    run_plain(tmp_path, ROLLOUT, "plain.npz", *arguments)
    tree, stderr = run_rlprof(tmp_path, ROLLOUT, "timed.npz", *arguments)
    assert same_results(tmp_path / "plain.npz", tmp_path / "timed.npz")
    resets = rollout_resets(tmp_path / "timed.npz")
    workers = tree["workers"]
    assert [worker["worker_id"] for worker in workers] == list(range(ENVS))
    for worker, env_resets in zip(workers, resets):  # nothing lost: every call the worker made
        assert worker["manager"] == "AsyncVectorEnv"
        assert counts(worker, "env.reset") == env_resets
        assert counts(worker, "env.step") == STEPS - (env_resets - 1)
        assert worker["channel"] == "complete"
        assert worker["critical_path"]["vector_steps"] == STEPS
        assert worker["env_time"]["calls"] == STEPS + 1
    assert sum(worker["critical_path"]["last_to_reply"] for worker in workers) == STEPS
    assert tree["metadata"]["vector_envs_in_place"] == "AsyncVectorEnv"  # the verdicts advise in its terms
    assert tree["metadata"]["busy_processes"] == str(ENVS + 1)  # metadata values are strings
    assert "environments timed where they ran: AsyncVectorEnv (3 envs, in 3 worker processes)" in stderr
    assert "Per worker (env.step)" in stderr


@pytest.mark.parametrize("option, said", [((), "True"), (("--no-shared-memory",), "False")])
def test_the_dump_says_whether_an_async_vector_env_put_observations_in_shared_memory(tmp_path, option, said):
    tree, _ = run_rlprof(tmp_path, ROLLOUT, "timed.npz", "--vector", "async", "--envs", "2", "--steps", "5", *option)
    assert tree["metadata"]["shared_memory"] == said  # the transport verdict advises it only where it was off


def test_the_trainer_tells_sending_waiting_and_receiving_apart(tmp_path):
    tree, _ = run_rlprof(tmp_path, ROLLOUT, "timed.npz", "--vector", "async", "--envs", "2", "--steps", "50")
    step = only_block(tree, "vector.step")
    own = {child["name"]: child["count"] for child in step["children"] if not child.get("is_parallel")}
    assert own == {"vector.send_actions": 50, "vector.wait_for_workers": 50, "vector.receive_results": 50}
    merged = {child["name"] for child in step["children"] if child.get("is_parallel")}
    assert "env.step" in merged


def test_sync_vector_env_steps_its_envs_in_the_trainer_with_identical_results(tmp_path):
    arguments = ("--vector", "sync", "--envs", str(ENVS), "--steps", str(STEPS))
    run_plain(tmp_path, ROLLOUT, "plain.npz", *arguments)
    tree, stderr = run_rlprof(tmp_path, ROLLOUT, "timed.npz", *arguments)
    assert same_results(tmp_path / "plain.npz", tmp_path / "timed.npz")
    step = only_block(tree, "vector.step")
    resets = rollout_resets(tmp_path / "timed.npz")
    assert step["count"] == STEPS
    assert counts(step, "env.step") == ENVS * STEPS - sum(resets) + ENVS  # each env call timed once
    assert not tree.get("workers")
    assert "SyncVectorEnv (3 envs, in this process)" in stderr


def test_a_vector_env_left_open_is_closed_at_the_end_and_its_last_timers_kept(tmp_path):
    tree, _ = run_rlprof(tmp_path, ROLLOUT, "timed.npz", "--vector", "async", "--envs", "2", "--steps", "40",
                         "--leave-open")
    resets = rollout_resets(tmp_path / "timed.npz")
    for worker, env_resets in zip(tree["workers"], resets):
        assert counts(worker, "env.step") + counts(worker, "env.reset") == 40 + 1
        assert worker["channel"] == "complete"


def test_a_vector_env_dropped_open_has_its_workers_terminated_as_under_python_and_the_dump_says_so(tmp_path):
    # Gymnasium's __del__ closes it with terminate=True: its workers die by SIGTERM before they ship
    # their last timers, under rlprof run as under python.
    _, stderr = run_rlprof(tmp_path, ROLLOUT, "timed.npz", "--vector", "async", "--envs", "2", "--steps", "40",
                           "--drop-open")
    assert "_Terminated" not in stderr and "Traceback" not in stderr
    for index in range(2):
        assert (f"rlprof: AsyncVectorEnv worker {index}: its channel ended before its last timers: the dump lacks "
                "what it timed since its last shipment (") in stderr


@pytest.mark.parametrize("start_method, wrapped", [("fork", ()), ("spawn", ()), ("fork", ("--normalize",))])
def test_sb3_ppo_over_subproc_vec_env_gets_per_worker_trees_and_the_same_policy(tmp_path, start_method, wrapped):
    arguments = ("--vec", "subproc", "--start-method", start_method, "--envs", str(SB3_ENVS), *wrapped)
    run_plain(tmp_path, SB3_PPO, "plain.npy", *arguments)
    tree, stderr = run_rlprof(tmp_path, SB3_PPO, "timed.npy", *arguments)
    assert same_results(tmp_path / "plain.npy", tmp_path / "timed.npy")
    workers = tree["workers"]
    assert [worker["manager"] for worker in workers] == ["SubprocVecEnv"] * SB3_ENVS
    for worker in workers:
        assert counts(worker, "env.step") == SB3_STEPS_PER_ENV
        assert worker["critical_path"]["vector_steps"] == SB3_STEPS_PER_ENV
        assert worker["channel"] == "complete"
    step = only_block(tree, "vector.step")  # VecNormalize's step, when it wraps the SubprocVecEnv
    assert step["count"] == SB3_STEPS_PER_ENV and counts(step, "env.step") == SB3_ENVS * SB3_STEPS_PER_ENV
    assert "SubprocVecEnv (2 envs, in 2 worker processes)" in stderr


def test_sb3_ppo_over_dummy_vec_env_times_its_envs_in_the_trainer_with_the_same_policy(tmp_path):
    run_plain(tmp_path, SB3_PPO, "plain.npy", "--vec", "dummy")
    tree, stderr = run_rlprof(tmp_path, SB3_PPO, "timed.npy", "--vec", "dummy")
    assert same_results(tmp_path / "plain.npy", tmp_path / "timed.npy")
    assert counts(tree, "vector.step") == SB3_STEPS_PER_ENV
    assert counts(tree, "env.step") == SB3_ENVS * SB3_STEPS_PER_ENV
    assert "DummyVecEnv (2 envs, in this process)" in stderr


def test_a_program_that_builds_no_env_is_told_so_and_what_to_do(tmp_path):
    program = tmp_path / "no_env.py"
    program.write_text("print(sum(range(10)))\n")
    _, stderr = run_rlprof(tmp_path, program)
    (line,) = [line for line in stderr.splitlines() if "environment" in line]
    assert line.startswith("rlprof: no environment was instrumented")
    assert "hierarchical_timer" in line and "--vector-env" in line


def test_an_env_from_gymnasium_make_is_timed_in_the_trainer(tmp_path):
    program = tmp_path / "single_env.py"
    program.write_text(
        "import gymnasium as gym\n"
        "env = gym.make('CartPole-v1')\n"
        "env.reset(seed=1)\n"
        "for _ in range(25):\n"
        "    env.step(0)\n"
        "    env.reset()\n"
    )
    tree, stderr = run_rlprof(tmp_path, program)
    assert counts(tree, "env.step") == 25 and counts(tree, "env.reset") == 26
    assert "1 env from gymnasium.make (in this process)" in stderr


def test_an_env_made_inside_another_make_is_timed_by_the_outer_one_its_wrappers_included(tmp_path):
    program = tmp_path / "registered_env.py"
    program.write_text(
        "import time\n"
        "import gymnasium as gym\n"
        "class Slower(gym.Wrapper):\n"
        "    def step(self, action):\n"
        "        end = time.perf_counter() + 0.002\n"
        "        while time.perf_counter() < end:\n"
        "            pass\n"
        "        return self.env.step(action)\n"
        "gym.register('SlowerCartPole-v1', entry_point=lambda: Slower(gym.make('CartPole-v1')))\n"
        "env = gym.make('SlowerCartPole-v1')\n"
        "env.reset(seed=1)\n"
        "for _ in range(10):\n"
        "    env.step(0)\n"
    )
    tree, stderr = run_rlprof(tmp_path, program)
    step = only_block(tree, "env.step")
    assert step["count"] == 10 and step["total"] >= 10 * 0.002  # the wrapper's busy step is inside it
    assert "1 env from gymnasium.make (in this process)" in stderr


NATIVELY_VECTORIZED = """
import sys
import gymnasium as gym
import numpy as np

envs = gym.make_vec("CartPole-v1", num_envs=3)  # CartPoleVectorEnv: one call steps all three
observation, _ = envs.reset(seed=4)
seen = [observation]
for _ in range(40):
    observation, *_ = envs.step((observation[:, 2] > 0).astype(np.int64))
    seen.append(observation)
envs.close()
np.save(sys.argv[1], np.stack(seen))
print(type(envs).__name__)
"""


def test_a_natively_vectorized_env_from_make_vec_is_timed_in_the_trainer_with_identical_results(tmp_path):
    program = tmp_path / "native.py"
    program.write_text(NATIVELY_VECTORIZED)
    run_plain(tmp_path, program, "plain.npy")
    tree, stderr = run_rlprof(tmp_path, program, "timed.npy")
    assert same_results(tmp_path / "plain.npy", tmp_path / "timed.npy")
    (step,) = [child for child in tree["children"] if child["name"] == "vector.step"]
    assert step["count"] == 40
    assert [(child["name"], child["count"]) for child in step["children"]] == [("env.step (vectorized)", 40)]
    assert "rlprof: environments timed where they ran: CartPoleVectorEnv (3 envs, in this process, stepped in " \
           "one call)" in stderr


@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_a_lost_channel_leaves_training_alone_and_the_dump_says_what_was_lost(tmp_path, context):
    # AsyncVectorEnv builds its first env in the trainer before it starts its workers: there the
    # program removes rlprof's channel, so no worker can reach it.
    program = tmp_path / "lost_channel.py"
    program.write_text(
        "import glob, os, tempfile\n"
        "import gymnasium as gym\n"
        "def make():\n"
        "    if os.environ.get('TRAINER') == str(os.getpid()):\n"
        "        for path in glob.glob(os.path.join(tempfile.gettempdir(), 'rlprof-envs-*', 'channel')):\n"
        "            os.unlink(path)\n"
        "    return gym.make('CartPole-v1')\n"
        "if __name__ == '__main__':\n"
        "    os.environ['TRAINER'] = str(os.getpid())\n"
        f"    envs = gym.vector.AsyncVectorEnv([make, make], context={context!r})\n"
        "    envs.reset(seed=1)\n"
        "    for _ in range(30):\n"
        "        envs.step(envs.action_space.sample())\n"
        "    envs.close()\n"
        "    print('trained')\n"
    )
    # In a temporary folder of its own: the program removes every rlprof channel it finds there,
    # and in the shared one those were the channels of the rlprof runs of the tests beside it (an
    # SB3 run's four workers then never connected, one CI run in three).
    own_temporary = tempfile.mkdtemp(prefix="rlprof-lost-")  # short: a socket's path has 108 bytes
    try:
        tree, stderr = run_rlprof(tmp_path, program, environment={**os.environ, "TMPDIR": own_temporary})
    finally:
        shutil.rmtree(own_temporary, ignore_errors=True)
    assert [worker["channel"] for worker in tree["workers"]] == [
        "never connected to rlprof's channel: this worker's timers are lost"] * 2
    assert counts(tree, "vector.step") == 30  # the trainer's own blocks are all there
    assert "rlprof: AsyncVectorEnv worker 1: never connected" in stderr


def test_vector_env_substitution_names_the_class_it_replaced(tmp_path):
    tree, stderr = run_rlprof(tmp_path, ROLLOUT, "timed.npz", "--vector", "sync", "--envs", "2", "--steps", "20",
                              options=("--vector-env=all",))
    assert ("rlprof: --vector-env replaced SyncVectorEnv by SubprocessEnvManager (1 built): its env workers, "
            "pipes and transport are rlprof's substitution, not your program's") in stderr
    assert tree["metadata"]["vector_env_substitution"] == "SyncVectorEnv"


def test_a_run_stopped_by_sigterm_keeps_every_workers_timers_and_leaves_no_worker_behind(tmp_path):
    program = tmp_path / "terminated.py"
    program.write_text(
        "import os, signal\n"
        "import gymnasium as gym\n"
        "envs = gym.vector.AsyncVectorEnv([lambda: gym.make('CartPole-v1')] * 2, context='fork')\n"
        "open('workers.txt', 'w').write(' '.join(str(process.pid) for process in envs.processes))\n"
        "envs.reset(seed=1)\n"
        "for step in range(50):\n"
        "    envs.step(envs.action_space.sample())\n"
        "    if step == 29:\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
    )
    result = subprocess.run([sys.executable, "-m", "profiler", "run", "--summaries-dir", "out", str(program)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == -signal.SIGTERM
    tree = json.loads((tmp_path / "out" / "terminated_timers.json").read_text())
    assert [(worker["channel"], worker["critical_path"]["vector_steps"]) for worker in tree["workers"]] == [
        ("complete", 30)] * 2
    assert not [pid for pid in map(int, (tmp_path / "workers.txt").read_text().split()) if psutil.pid_exists(pid)]


def test_workers_sample_their_memory_when_the_program_samples_its_own(tmp_path):
    program = tmp_path / "sampled.py"
    program.write_text(
        "import gymnasium as gym\n"
        "from profiler.recording import memory\n"
        "memory.start_sampling(every_blocks=20)\n"
        "envs = gym.vector.AsyncVectorEnv([lambda: gym.make('CartPole-v1')] * 2, context='fork')\n"
        "envs.reset(seed=1)\n"
        "for _ in range(100):\n"
        "    envs.step(envs.action_space.sample())\n"
        "envs.close()\n"
    )
    tree, _ = run_rlprof(tmp_path, program)
    processes = {process["name"]: process for process in tree["memory"]["processes"]}
    assert {"trainer", "worker 0", "worker 1"} <= set(processes)
    assert all(processes[f"worker {index}"]["samples"] for index in (0, 1))
