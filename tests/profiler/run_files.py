"""Real timer files for the analysis and CLI tests, timed with the fake clock so figures are exact.

``write_vector_run`` plays a trainer over a vectorized env by the generic naming convention: per
step, ``policy.act`` then ``vector.step`` (send, wait for the slowest worker, receive, a little
bookkeeping), with each worker's ``env.step`` merged under ``vector.step`` as a parallel block and
kept per worker in the ``workers`` section, as the merger writes it. ``names=MANAGER_NAMES`` uses
the block names of rlprof's ``SubprocessEnvManager`` instead. With ``measured=True`` each worker
entry also carries the critical path and env CPU time, and the metadata the cores and busy
processes, in the layout the env manager writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Sequence
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
    worker_step_seconds: Sequence[float] | Sequence[Sequence[float]] = WORKER_STEP_SECONDS,
    steps: int = STEPS,
    policy_seconds: float = POLICY_SECONDS,
    latency_seconds: float = 0.0,
    reply_delays: Sequence[float] | None = None,
    with_workers_section: bool = True,
    names: dict[str, str] = VECTOR_NAMES,
    measured: bool = False,
    env_cpu_fraction: float = 1.0,
    cores: int | None = None,
    busy_processes: int | None = None,
    untimed_seconds: float = 0.0,
    envs_per_worker: Sequence[int] | None = None,
) -> Path:
    """Write a run of ``steps`` vector steps; worker ``i`` takes ``worker_step_seconds[i]`` per step.

    ``worker_step_seconds`` may instead hold one tuple per step, for workers whose times vary.
    ``reply_delays[i]`` makes worker ``i``'s reply ready that much after its compute (sent last,
    woken late) without computing longer. ``latency_seconds`` is added to every wait beyond the
    last reply (the pipe's round trip). ``env_cpu_fraction`` is the share of env compute spent on
    a CPU (the rest descheduled or sleeping). ``untimed_seconds`` passes outside any block.
    ``cores`` and ``busy_processes`` go in the metadata when given, and are absent otherwise.
    ``envs_per_worker[i]`` envs share worker ``i``'s time per step (one each by default).
    """
    plan = _per_step_seconds(worker_step_seconds, steps)
    count = len(plan[0])
    envs = tuple(envs_per_worker) if envs_per_worker is not None else (1,) * count
    delays = tuple(reply_delays) if reply_delays is not None else (0.0,) * count
    workers = [TimerStack(f"worker {index}") for index in range(count)]
    last_to_reply = [0] * count
    wait_as_last = [0.0] * count
    clock.advance(untimed_seconds)
    for step_seconds in plan:
        with hierarchical_timer("train"):
            with hierarchical_timer("policy.act"):
                clock.advance(policy_seconds)
            with hierarchical_timer(names["step"]) as vector_step:
                with hierarchical_timer(names["send"]):
                    clock.advance(SEND_SECONDS)
                with hierarchical_timer(names["wait"]):
                    # The workers run at once, so the trainer waits for the last reply.
                    for stack, seconds, envs_of_worker in zip(workers, step_seconds, envs):
                        each = seconds / envs_of_worker
                        stack.root.get_child("env.step").add_runs(seconds, envs_of_worker, 0, each, each)
                    replies = [seconds + delay for seconds, delay in zip(step_seconds, delays)]
                    last = max(range(count), key=lambda index: replies[index])
                    last_to_reply[last] += 1
                    wait_as_last[last] += replies[last] - max(
                        (reply for index, reply in enumerate(replies) if index != last), default=0.0)
                    clock.advance(max(replies) + latency_seconds)
                with hierarchical_timer(names["receive"]):
                    clock.advance(RECEIVE_SECONDS)
                clock.advance(BOOKKEEPING_SECONDS)
    for stack in workers:
        vector_step.get_child("env.step").add(stack.root.children["env.step"], parallel=True)
    write_timing_tree(path)
    document = json.loads(path.read_text())
    if with_workers_section:
        document["workers"] = [_worker_entry(index, stack) for index, stack in enumerate(workers)]
        if measured:
            for index, entry in enumerate(document["workers"]):
                wall = entry["children"][0]["total"]
                entry["critical_path"] = {
                    "vector_steps": steps, "last_to_reply": last_to_reply[index],
                    "wait_as_last_seconds": wait_as_last[index],
                    "wait_as_last_histogram": {"bounds_seconds": [0.001, 0.01], "counts": [0, 0, 0]},
                }
                entry["env_time"] = {"wall_seconds": wall, "cpu_seconds": wall * env_cpu_fraction,
                                     "calls": steps * envs[index]}
    # The machine's own core count would make the verdicts depend on where the tests run.
    document["metadata"].pop("cores_available", None)
    if cores is not None:
        document["metadata"]["cores_available"] = str(cores)
    if busy_processes is not None:
        document["metadata"]["busy_processes"] = str(busy_processes)
    path.write_text(json.dumps(document))
    return path


def _per_step_seconds(
    worker_step_seconds: Sequence[float] | Sequence[Sequence[float]], steps: int
) -> list[tuple[float, ...]]:
    if isinstance(worker_step_seconds[0], (int, float)):
        return [tuple(worker_step_seconds)] * steps  # type: ignore[arg-type]
    assert len(worker_step_seconds) == steps, "one tuple of worker times per step"
    return [tuple(seconds) for seconds in worker_step_seconds]  # type: ignore[union-attr]


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


def with_waits_in_steps(tree: dict[str, Any], in_blocks: Any) -> dict[str, Any]:
    """``tree`` (loaded) with the trainer's scheduling section saying ``in_blocks``: its waits for a
    core, and time on one, inside the runs of its blocks that ``rlprof run`` read (a fake clock's
    run has no kernel figures of its own)."""
    tree["scheduling"] = {"run_queue_seconds": 0.01, "cpu_seconds": 0.01, "wall_seconds": tree["total"],
                          "involuntary_switches": 0, "since": "timers start", "python_threads": [],
                          "in_blocks": in_blocks}
    return tree
