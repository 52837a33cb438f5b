"""A trainer that times itself the way Unity ML-Agents' trainer does (mlagents 1.1.0).

The patterns are ML-Agents' own, written against ``mlagents_envs.timers``; only the import below
names ``profiler`` instead (tests/profiler/test_mlagents_api.py runs this same source with the
import switched back to ML-Agents' module, when it is at hand, and compares the trees):

* each environment worker is a process that answers "step" over a pipe with its results, its
  ``get_timer_root()`` and its gauges, then calls ``reset_timers()``;
* the trainer merges every worker root it receives under ``with hierarchical_timer("workers")``
  as ``main_timer_node.merge(root, root_name="worker_root", is_parallel=True)``, and the gauges
  with ``merge_gauges``;
* trainer threads time their own updates; after joining them, the trainer merges each thread's
  stack under ``trainer_threads`` (``root_name="thread_root"``) together with its gauges;
* the timers are written as ``json.dump(get_timer_tree(), ...)``, as ``mlagents-learn`` does.
"""

from __future__ import annotations

import json
import multiprocessing
import queue
import threading
import time
from pathlib import Path

from profiler import (
    add_metadata,
    get_timer_root,
    get_timer_stack_for_thread,
    get_timer_tree,
    hierarchical_timer,
    merge_gauges,
    reset_timers,
    set_gauge,
    timed,
)

STEP_SECONDS = 0.001


@timed
def simulate(worker_id: int) -> float:
    time.sleep(STEP_SECONDS * (1 + worker_id))
    return float(worker_id)


def environment_worker(connection, worker_id: int) -> None:
    """One environment process: step on request, send the timers back with the results."""
    while True:
        command = connection.recv()
        if command == "close":
            connection.close()
            return
        with hierarchical_timer("UnityEnvironment.step"):
            reward = simulate(worker_id)
        set_gauge("Environment.reward", reward)
        gauges = get_timer_stack_for_thread(threading.current_thread()).gauges
        connection.send((reward, get_timer_root(), gauges))
        reset_timers()


class SubprocessEnvManager:
    """Steps every worker, then merges the worker trees into the trainer's open block."""

    def __init__(self, workers: int) -> None:
        context = multiprocessing.get_context("fork")
        self.connections = []
        self.processes = []
        for worker_id in range(workers):
            parent_end, child_end = context.Pipe()
            process = context.Process(target=environment_worker, args=(child_end, worker_id))
            process.start()
            child_end.close()
            self.connections.append(parent_end)
            self.processes.append(process)

    def get_steps(self) -> list[float]:
        for connection in self.connections:
            connection.send("step")
        responses = [connection.recv() for connection in self.connections]
        timer_nodes = [timer_root for _, timer_root, _ in responses if timer_root]
        if timer_nodes:
            with hierarchical_timer("workers") as main_timer_node:
                for worker_timer_node in timer_nodes:
                    main_timer_node.merge(
                        worker_timer_node, root_name="worker_root", is_parallel=True
                    )
        for _, _, gauges in responses:
            merge_gauges(gauges)
        return [reward for reward, _, _ in responses]

    def close(self) -> None:
        for connection in self.connections:
            connection.send("close")
        for process in self.processes:
            process.join(timeout=60)


class TrainerController:
    def __init__(self, env_manager: SubprocessEnvManager, trainer_threads: int) -> None:
        self.env_manager = env_manager
        self.kill_trainers = False
        self.updates: queue.Queue[int] = queue.Queue()
        self.trainer_threads = [
            threading.Thread(target=self.trainer_update_func, name=f"trainer-{index}")
            for index in range(trainer_threads)
        ]

    def trainer_update_func(self) -> None:
        while not self.kill_trainers:
            try:
                steps = self.updates.get(timeout=0.01)
            except queue.Empty:
                continue
            with hierarchical_timer("trainer_advance"):
                set_gauge("Policy.loss", 1.0 / steps)
            self.updates.task_done()

    @timed
    def advance(self) -> int:
        with hierarchical_timer("env_step"):
            rewards = self.env_manager.get_steps()
        self.updates.put(len(rewards))
        return len(rewards)

    @timed
    def start_learning(self, steps: int) -> None:
        for thread in self.trainer_threads:
            thread.start()
        for _ in range(steps):
            self.advance()
        self.join_threads()

    def join_threads(self, timeout_seconds: float = 60.0) -> None:
        self.updates.join()  # every queued update runs, so that the counts are exact
        self.kill_trainers = True
        for thread in self.trainer_threads:
            thread.join(timeout_seconds)
        with hierarchical_timer("trainer_threads") as main_timer_node:
            for trainer_thread in self.trainer_threads:
                thread_timer_stack = get_timer_stack_for_thread(trainer_thread)
                if thread_timer_stack:
                    main_timer_node.merge(
                        thread_timer_stack.root, root_name="thread_root", is_parallel=True
                    )
                    merge_gauges(thread_timer_stack.gauges)


def train(output_dir: Path, *, steps: int, workers: int, trainer_threads: int = 2) -> Path:
    """Run the trainer and write ``timers.json`` as ``mlagents-learn`` does; returns its path."""
    add_metadata("mlagents_version", "1.1.0")
    env_manager = SubprocessEnvManager(workers)
    try:
        TrainerController(env_manager, trainer_threads).start_learning(steps)
    finally:
        env_manager.close()
    timing_path = output_dir / "timers.json"
    with open(timing_path, "w") as file:
        json.dump(get_timer_tree(), file, indent=4)
    return timing_path
