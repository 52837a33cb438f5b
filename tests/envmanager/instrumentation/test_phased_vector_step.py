"""Specification of the trainer's timing of a vector step whose envs run in workers: a step through
the class's own ``step`` is one phased block (sending, waiting, receiving stamped, the runs folded
in bulk), and gives the tree, the timeline spans, the failures and the workers' sections that the
``with`` blocks give for the same program.

The program (programs/vector_step_paths.py) steps real ``AsyncVectorEnv``s and SB3
``SubprocVecEnv``s every way a program can: two vector envs alternately (one through a wrapper),
``step_async``/``step_wait`` called by the program, a step from another thread, a vector env
inside another one's step, an env that raises, a worker that dies, a ``step_wait`` that times out.
It runs under ``rlprof run`` twice: as it is, and with a companion watching every block, which
makes rlprof time every vector step with ``with`` blocks (the reference).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

PROGRAM = Path(__file__).parent / "programs" / "vector_step_paths.py"
PHASES = ("vector.send_actions", "vector.wait_for_workers", "vector.receive_results")
STEPS, DIRECT, IN_THREAD, NESTED = 30, 5, 7, 4

# Steps through the class's own step, in the program's thread: the first vector env's (alternate
# steps, one more after the thread's) and the second's where its wrapper calls that step
# (Gymnasium's vector wrappers do; SB3's VecMonitor calls step_async/step_wait itself), the vector
# env stepped inside another's step, and the failing steps that reached their wait.
PHASED_IN_MAIN_THREAD = {"async": 2 * STEPS + 1 + NESTED + 2, "sb3": STEPS + 1 + 1}


def run(folder: Path, vector: str, context: str, with_blocks: bool) -> tuple[dict, dict]:
    """The program's report and the dump of one ``rlprof run``."""
    out = folder / ("with_blocks" if with_blocks else "phased")
    result = subprocess.run(
        [sys.executable, "-m", "profiler", "run", "--summaries-dir", str(out), str(PROGRAM),
         "--vector", vector, "--context", context, *(["--with-blocks"] if with_blocks else [])],
        cwd=folder, capture_output=True, text=True, timeout=240,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1]), json.loads((out / "vector_step_paths_timers.json").read_text())


def run_written(folder: Path, name: str, text: str, *arguments: str) -> dict:
    """The dump of program ``text``, written as ``<name>.py``, run under ``rlprof run``."""
    (folder / f"{name}.py").write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "profiler", "run", "--summaries-dir", "out", f"{name}.py", *arguments],
        cwd=folder, capture_output=True, text=True, timeout=240,
    )
    assert result.returncode == 0, result.stderr
    return json.loads((folder / "out" / f"{name}_timers.json").read_text())


def worker_tops(tree: dict) -> set[str]:
    """The names of the workers' outermost blocks (``env.step``, ``env.reset``)."""
    return {child["name"] for worker in tree.get("workers", ()) for child in worker["children"]}


def is_merged(node: dict, tops: Collection[str]) -> bool:
    """Whether ``node`` is a worker's block merged into the trainer's tree. (Every node of another
    thread's tree is marked parallel too: it ran beside the main thread's.)"""
    return bool(node.get("is_parallel")) and node["name"] in tops


def shape(node: dict, tops: Collection[str] = ()) -> tuple:
    """A node's name, count, errors and children, each child's shape alike (their order left out).
    With ``tops``, the workers' blocks merged into a trainer's tree are left out: where those land
    depends on when they arrive (see worker_blocks)."""
    children = sorted((shape(child, tops) for child in node["children"] if not is_merged(child, tops)), key=repr)
    return node["name"], node["count"], node.get("errors", 0), bool(node.get("is_parallel")), tuple(children)


def worker_blocks(node: dict, tops: set[str]) -> Counter:
    """The workers' blocks merged anywhere below ``node``, their counts and errors added per path
    below the trainer's block they landed under. A worker ships what it timed every second, and
    the shipment lands under its vector env's step open when it arrives, or the one open last:
    whether one lands under a step from the other thread depends on the machine's load."""
    found: Counter = Counter()

    def add(worker_node: dict, path: tuple) -> None:
        path = (*path, worker_node["name"])
        found[path, "count"] += worker_node["count"]
        found[path, "errors"] += worker_node.get("errors", 0)
        for child in worker_node["children"]:
            add(child, path)

    def visit(trainer_node: dict) -> None:
        for child in trainer_node["children"]:
            if is_merged(child, tops):
                add(child, ())
            else:
                visit(child)

    visit(node)
    return found


def vector_steps(node: dict) -> list[dict]:
    """Every ``vector.step`` block of the trainer (its threads' included), wherever it sits."""
    found = [node] if node["name"] == "vector.step" and not node.get("is_parallel") else []
    return found + [step for child in node["children"] for step in vector_steps(child)]


def threads(tree: dict) -> dict[str, list]:
    """The trainer's spans of vector blocks, per thread."""
    return {thread["name"]: [span for span in thread["spans"] if span[0].startswith("vector.")]
            for thread in tree["timeline"]["processes"][0]["threads"]}


def contiguous_steps(spans: list) -> int:
    """Steps whose sending ended exactly where their waiting began: stamped by one clock read. (A
    step whose replies were all in never blocked: its waiting span is empty, and shares its start
    with its receiving span, so the spans are matched by stamps, not by their order.)"""
    waits_begun = Counter(span[1] for span in spans if span[0] == PHASES[1])
    return sum(min(count, waits_begun[end]) for end, count in
               Counter(span[2] for span in spans if span[0] == PHASES[0]).items())


def phases_inside_steps(spans: list) -> int:
    """The phase spans that lie inside a ``vector.step`` span (the others: the program's own
    ``step_async``/``step_wait``)."""
    steps = [span for span in spans if span[0] == "vector.step"]
    return sum(1 for phase in spans if phase[0] in PHASES
               and any(step[1] <= phase[1] and phase[2] <= step[2] for step in steps))


def worker_figures(tree: dict) -> list[tuple]:
    """Each worker's entries and exact figures; of a worker whose channel did not complete (its
    env failed), what the channel says without its counts, which depend on when it last shipped."""
    return [(worker["manager"], worker["worker_id"], sorted(worker), worker["critical_path"]["vector_steps"],
             worker["env_time"]["calls"], worker["channel"], shape(worker)) if worker["channel"] == "complete"
            else (worker["manager"], worker["worker_id"], worker["channel"].split(" (")[0])
            for worker in tree["workers"]]


@pytest.mark.parametrize("vector, context", [("async", "fork"), ("async", "spawn"), ("sb3", "fork")])
def test_a_phased_step_gives_the_tree_spans_failures_and_workers_that_with_blocks_give(tmp_path, vector, context):
    report, phased = run(tmp_path, vector, context, with_blocks=False)
    reference_report, reference = run(tmp_path, vector, context, with_blocks=True)
    assert report == reference_report
    expected_failures = ({"raise": "ValueError", "send to a worker shut down": "AttributeError", "die": "EOFError",
                          "timeout": "TimeoutError"} if vector == "async"
                         else {"die": "EOFError", "send to a dead worker": "BrokenPipeError"})
    assert report["failures"] == expected_failures

    # The same blocks, counts and errors everywhere: in the program's thread, in the other
    # thread, for the program's own step_async/step_wait (blocks of their own at the root), and
    # the workers' trees merged under the steps.
    tops = worker_tops(phased)
    assert tops == worker_tops(reference) == {"env.step", "env.reset"}
    assert shape(phased, tops) == shape(reference, tops)
    assert worker_blocks(phased, tops) == worker_blocks(reference, tops)
    root = {child["name"]: child for child in phased["children"]}
    assert [root[phase]["count"] for phase in PHASES] == [DIRECT + (vector == "async")] * 3
    assert root["vector.receive_results"].get("errors", 0) == (vector == "async")  # the timeout
    step = root["vector.step"]
    phases = {child["name"]: child for child in step["children"] if not child.get("is_parallel")}
    failed_as_sent, failed_as_received = (1, 2) if vector == "async" else (1, 1)
    assert step["errors"] == failed_as_sent + failed_as_received
    assert phases["vector.send_actions"]["errors"] == failed_as_sent
    assert phases["vector.receive_results"]["errors"] == failed_as_received
    assert phases["vector.wait_for_workers"].get("errors", 0) == 0
    for block in vector_steps(phased):  # the phases add up to no more than their step
        own = [child for child in block["children"] if child["name"] in PHASES]
        assert sum(child["total"] for child in own) <= block["total"] * (1 + 1e-9)

    # The same spans, each phase inside its step; through the class's own step, sending ends
    # where waiting begins (one stamp), which the `with` blocks never give.
    spans, reference_spans = threads(phased), threads(reference)
    assert {name: Counter(span[0] for span in found) for name, found in spans.items()} == {
        name: Counter(span[0] for span in found) for name, found in reference_spans.items()}
    (other_thread,) = [name for name in spans if name != "MainThread"]
    assert contiguous_steps(spans["MainThread"]) == PHASED_IN_MAIN_THREAD[vector]
    assert contiguous_steps(spans[other_thread]) == IN_THREAD
    assert contiguous_steps(reference_spans["MainThread"]) == contiguous_steps(reference_spans[other_thread]) == 0
    for name, found in spans.items():
        assert phases_inside_steps(found) == phases_inside_steps(reference_spans[name])

    # The workers' sections: the same entries, the critical path counting every step exactly.
    assert worker_figures(phased) == worker_figures(reference)
    stepped = [worker for worker in phased["workers"]
               if worker["manager"] in ("AsyncVectorEnv", "AsyncVectorEnv #2", "SubprocVecEnv", "SubprocVecEnv #2")]
    assert [worker["channel"] for worker in stepped] == ["complete"] * 5  # compared in full above
    first = [worker for worker in phased["workers"] if worker["manager"] in ("AsyncVectorEnv", "SubprocVecEnv")]
    assert [worker["critical_path"]["vector_steps"] for worker in first] == [STEPS + DIRECT + IN_THREAD + 1] * 2
    assert sum(worker["critical_path"]["last_to_reply"] for worker in first) == STEPS + DIRECT + IN_THREAD + 1
    second = [worker for worker in phased["workers"] if worker["manager"].endswith("#2")]
    assert [worker["critical_path"]["vector_steps"] for worker in second] == [STEPS] * 3


SENDS_ITSELF = """
import gymnasium as gym
import numpy as np
from gymnasium.vector.async_vector_env import AsyncState

SENT = []


def send(envs, actions):
    # The program's own sending, set on the instance: the class's step calls it, not rlprof's step_async.
    SENT.append(len(actions))
    for pipe, action in zip(envs.parent_pipes, actions):
        pipe.send(("step", action))
    envs._state = AsyncState.WAITING_STEP


if __name__ == "__main__":
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2, context="fork")
    envs.step_async = send.__get__(envs)
    envs.reset(seed=0)
    for _ in range(3):
        envs.step(np.zeros(2, np.int64))
    assert SENT == [2, 2, 2], SENT  # every step sent through the program's own step_async
    envs.close()
"""


def test_a_step_whose_sending_goes_around_rlprofs_step_async_counts_finite_phases(tmp_path):
    # The class's step calls the instance's own step_async, then rlprof's step_wait: the run's
    # sending end is never stamped, its waiting end is. Every figure of the step stays a number.
    tree = run_written(tmp_path, "sends_itself", SENDS_ITSELF)
    (step,) = vector_steps(tree)
    assert step["count"] == 3
    for node in (step, *(child for child in step["children"] if child["name"] in PHASES)):
        assert node["count"] == 3 and all(math.isfinite(node[figure]) for figure in ("total", "min", "max")), node


RESETS_ITS_TIMERS = """
import sys

import gymnasium as gym
import numpy as np
import profiler

if __name__ == "__main__":
    if sys.argv[1:] == ["--with-blocks"]:
        from profiler.timing import block_hooks

        block_hooks.set_exit_hook(lambda node: None)  # a companion that watches every block
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2, context="fork")
    envs.reset(seed=0)
    for step in range(10):
        if step == 6:
            profiler.reset_timers()  # after a warm-up, say: the steps before go with the tree
        envs.step(np.full(2, step % 2))
    envs.close()
"""


@pytest.mark.parametrize("with_blocks", [False, True])
def test_a_timer_reset_mid_run_leaves_the_critical_path_the_steps_the_tree_has(tmp_path, with_blocks):
    # The critical path forgets the steps before a reset, as the tree does: those a phased
    # step held then, and those `with` blocks timed whose windows were not matched yet.
    tree = run_written(tmp_path, "resets_its_timers", RESETS_ITS_TIMERS, *(["--with-blocks"] if with_blocks else []))
    (step,) = vector_steps(tree)
    assert step["count"] == 4
    assert [worker["critical_path"]["vector_steps"] for worker in tree["workers"]] == [4, 4]


STEPS_IN_A_THREAD = """
import sys
import threading
import time

import gymnasium as gym
import numpy as np
import profiler


class Slow(gym.Wrapper):
    def step(self, action):
        time.sleep(0.01)
        return self.env.step(action)


if __name__ == "__main__":
    envs = gym.vector.AsyncVectorEnv([lambda: Slow(gym.make("CartPole-v1"))] * 2, context="fork")
    envs.reset(seed=0)
    # Stepped for 1.5 s from a thread that then ends: a worker ships what it timed every second.
    stepping = threading.Thread(target=lambda: [envs.step(np.zeros(2, np.int64)) for _ in range(150)],
                                name="collector")
    stepping.start()
    stepping.join()
    if sys.argv[1:] == ["--read-first"]:
        profiler.dumps()  # reads every thread's tree, as a live view or a summary written mid-run does
    envs.close()  # the workers' last shipments arrive after the thread ended
"""


@pytest.mark.parametrize("read_first", [False, True])
def test_a_vector_env_stepped_from_a_thread_that_ended_keeps_every_workers_block(tmp_path, read_first):
    # The workers' blocks land under the step of the thread that stepped them, whose tree is
    # folded into its group's once the thread has ended: what arrives before and after, all there.
    tree = run_written(tmp_path, "steps_in_a_thread", STEPS_IN_A_THREAD, *(["--read-first"] if read_first else []))
    group = next(child for child in tree["children"] if child["name"] == "thread:ended:collector")
    (step,) = [child for child in group["children"] if child["name"] == "vector.step"]
    assert step["count"] == 150
    # Each of the 150 vector steps stepped each env or reset it (its episode had ended); the first
    # reset shipped with the steps.
    timed = sum(child["count"] for worker in tree["workers"] for child in worker["children"]
                if child["name"] == "env.step")
    in_the_step = worker_blocks(step, worker_tops(tree))
    assert in_the_step[("env.step",), "count"] == timed
    assert in_the_step[("env.step",), "count"] + in_the_step[("env.reset",), "count"] == 2 * 150 + 2
    assert worker_blocks(tree, worker_tops(tree))[("env.step",), "count"] == timed


def _sends_then_waits_step(self, actions):
    self.step_async(actions)
    return self.step_wait()


def _step_that_also_counts(self, actions):
    self.step_async(actions)
    self.steps_taken += 1
    return self.step_wait()


def _step_that_calls_something_else(self, actions):
    self.step_async(actions)
    log(actions)  # noqa: F821 - never called: only its code is read
    return self.step_wait()


def test_the_phased_run_calls_the_class_parts_itself_only_where_its_step_is_just_those_two():
    # The run calls step_async and step_wait itself only where skipping the class's step skips
    # nothing: a Gymnasium whose step did more keeps its own step, called as it is.
    import gymnasium

    from envmanager.instrumentation.known_classes import sends_then_waits

    assert sends_then_waits(_sends_then_waits_step)
    assert sends_then_waits(gymnasium.vector.AsyncVectorEnv.step)  # the Gymnasium installed here
    assert not sends_then_waits(_step_that_also_counts)
    assert not sends_then_waits(_step_that_calls_something_else)
    assert not sends_then_waits(len)  # no code to read
