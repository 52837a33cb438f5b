"""Real timer files for the analysis and CLI tests, timed with the fake clock so figures are exact.

``write_vector_run`` plays a trainer over a vectorized env by the generic naming convention: per
step, ``policy.act`` then ``vector.step`` (send, wait for the slowest worker, receive, a little
bookkeeping), with each worker's ``env.step`` merged under ``vector.step`` as a parallel block and
kept per worker in the ``workers`` section, as the merger writes it. ``names=MANAGER_NAMES`` uses
the block names of rlprof's ``SubprocessEnvManager`` instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from profiler import TimerStack, hierarchical_timer, write_timing_tree

WORKER_STEP_SECONDS = (0.004, 0.004, 0.004, 0.010)
STEPS = 10
POLICY_SECONDS = 0.003
SEND_SECONDS = 0.001
RECEIVE_SECONDS = 0.002
BOOKKEEPING_SECONDS = 0.0005

VECTOR_NAMES = {"step": "vector.step", "send": "vector.send_actions",
                "wait": "vector.wait_for_workers", "receive": "vector.receive_results"}
MANAGER_NAMES = {"step": "env_manager.step", "send": "send_actions",
                 "wait": "wait_for_workers", "receive": "receive_results"}


def write_vector_run(
    path: Path,
    clock: Any,
    *,
    worker_step_seconds: tuple[float, ...] = WORKER_STEP_SECONDS,
    steps: int = STEPS,
    policy_seconds: float = POLICY_SECONDS,
    latency_seconds: float = 0.0,
    with_workers_section: bool = True,
    names: dict[str, str] = VECTOR_NAMES,
) -> Path:
    """Write a run of ``steps`` vector steps; worker ``i`` takes ``worker_step_seconds[i]`` per step.

    ``latency_seconds`` is added to every wait beyond the slowest worker (the pipe's round trip).
    """
    workers = [TimerStack(f"worker {index}") for index in range(len(worker_step_seconds))]
    for _ in range(steps):
        with hierarchical_timer("train"):
            with hierarchical_timer("policy.act"):
                clock.advance(policy_seconds)
            with hierarchical_timer(names["step"]) as vector_step:
                with hierarchical_timer(names["send"]):
                    clock.advance(SEND_SECONDS)
                with hierarchical_timer(names["wait"]):
                    # The workers run at once, so the trainer waits as long as the slowest.
                    for stack, seconds in zip(workers, worker_step_seconds):
                        env_step = stack.root.get_child("env.step")
                        env_step.total += seconds
                        env_step.count += 1
                    clock.advance(max(worker_step_seconds) + latency_seconds)
                with hierarchical_timer(names["receive"]):
                    clock.advance(RECEIVE_SECONDS)
                clock.advance(BOOKKEEPING_SECONDS)
    for stack in workers:
        vector_step.get_child("env.step").add(stack.root.children["env.step"], parallel=True)
    write_timing_tree(path)
    if with_workers_section:
        document = json.loads(path.read_text())
        document["workers"] = [_worker_entry(index, stack) for index, stack in enumerate(workers)]
        path.write_text(json.dumps(document))
    return path


def _worker_entry(index: int, stack: TimerStack) -> dict[str, Any]:
    tree = stack.root.to_dict()
    total = sum(child["total"] for child in tree["children"])
    return {**tree, "name": f"worker {index}", "worker_id": index, "pid": 4000 + index,
            "total": total, "count": 1, "self": 0.0, "gauges": {}, "payloads": 1}


def write_plain_run(path: Path, clock: Any) -> Path:
    """A single-process run with no vectorized env: ``load`` then 3 x (``forward``, ``backward``).

    ``forward`` also runs inside ``eval`` once, so aggregating by name has something to sum.
    """
    with hierarchical_timer("load"):
        clock.advance(0.5)
    for _ in range(3):
        with hierarchical_timer("forward"):
            clock.advance(0.25)
        with hierarchical_timer("backward"):
            clock.advance(1.0)
    with hierarchical_timer("eval"):
        with hierarchical_timer("forward"):
            clock.advance(0.75)
    clock.advance(0.25)  # outside any block: wall time the blocks do not cover
    return write_timing_tree(path)
