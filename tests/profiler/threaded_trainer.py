"""A trainer whose env workers are threads of its own process, as a user's thread pool (or a
trainer written after ML-Agents' patterns with threads for workers) runs them.

Run as a program: ``python threaded_trainer.py OUT.json (compute|sleep) (alive|ended) [mlagents]``.
Each worker thread steps its env when told to, in an ``env.step`` block of its own: ``compute``
envs run pure Python (they hold the GIL), ``sleep`` envs sleep (they release it). The trainer times
each vector step (``env_step``), and writes its timer tree while the worker threads are still
``alive``, or once they have ``ended`` (joined, as a trainer closes its envs before its last
dump), with their trees as ``thread:<name>`` nodes. With ``mlagents``, ML-Agents' layout instead:
each worker thread replies with its timer root and resets its timers, and the trainer merges the
roots under its step (``merge(root, root_name="worker_root")``) and dumps its own tree alone.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time

from profiler import get_timer_root, get_timer_tree, hierarchical_timer, reset_timers

STEP_SECONDS = 0.003
STEPS = 120


def compute_step() -> None:
    end = time.thread_time() + STEP_SECONDS
    while time.thread_time() < end:
        pass


def sleep_step() -> None:
    time.sleep(STEP_SECONDS)


def worker(requests: queue.Queue, replies: queue.Queue, step, send_timers: bool) -> None:
    while requests.get() is not None:
        with hierarchical_timer("env.step"):
            step()
        if send_timers:  # ML-Agents' worker: its timers go with each reply, then start afresh
            replies.put(get_timer_root())
            reset_timers()
        else:
            replies.put(True)


THREADS = 3


def main(out: str, kind: str, when: str, layout: str = "threads") -> None:
    step = compute_step if kind == "compute" else sleep_step
    merged = layout == "mlagents"
    channels = [(queue.Queue(), queue.Queue()) for _ in range(THREADS)]
    threads = [threading.Thread(target=worker, args=(*channel, step, merged), name=f"env-worker-{index}")
               for index, channel in enumerate(channels)]
    for thread in threads:
        thread.start()
    for _ in range(STEPS):
        with hierarchical_timer("env_step") as step_node:
            for requests, _ in channels:
                requests.put(True)
            for _, replies in channels:
                reply = replies.get()
                if merged:
                    step_node.merge(reply, root_name="worker_root", is_parallel=True)
    if when == "alive":
        dump(out, not merged)
    for requests, _ in channels:
        requests.put(None)
    for thread in threads:
        thread.join()
    if when == "ended":
        dump(out, not merged)


def dump(out: str, include_threads: bool) -> None:
    with open(out, "w") as file:
        json.dump(get_timer_tree(include_threads=include_threads), file)


if __name__ == "__main__":
    main(*sys.argv[1:5])
