"""The floor of one step between two processes, and how near the manager's step comes to it.

    python benchmarks/step_floor.py             # 9 interleaved rounds of 5,000 steps
    python benchmarks/step_floor.py --quick     # 5 rounds of 1,000 steps, rough
    python benchmarks/step_floor.py --oversubscribed   # also: many workers on few cores

A subprocess vector env pays, per step and per worker, one round trip to another process: the
trainer wakes the worker, the worker steps its env and wakes the trainer back.  On most machines
the two wake-ups (a scheduler switch each way) cost far more than anything Python does, so the
floor is measured here, on this machine, beside the manager:

* ``pipe ping-pong``: one byte each way through a ``multiprocessing.Pipe()`` (``send_bytes`` /
  ``recv_bytes``), nothing else; the reference every ratio is against;
* ``one-way pipes ping-pong``: the same through two ``Pipe(duplex=False)``, one per direction,
  as the manager's workers use them: a two-way ``Pipe()`` is a Unix socket pair, and a plain
  pipe wakes the other side sooner;
* ``shared memory + wake-up``: an action written into shared memory, a one-byte wake-up on a
  raw pipe, the other side reads the action, writes a reward back and wakes the first back;
* ``ours``: ``SubprocessEnvManager`` with one worker and an env whose step costs a couple of
  microseconds, at default settings (profiling on), and with profiling off;
* ``async``: Gymnasium's ``AsyncVectorEnv`` with the same env.

Every variant is alive at once and they are measured in alternating rounds, so a burst of noise
from the machine (it is shared) hits all of them alike; each round's ratio is taken against the
ping-pong of the same round, and the figures are medians over rounds.

Goal (printed, never asserted): the manager's per-step cost with one worker, profiling on at
default settings, at most 1.5x the raw pipe ping-pong.

``--oversubscribed`` adds what a worker that waits by spinning would risk: eight workers on
however few cores there are (a 1 ms CPU env and CartPole), ours against ``AsyncVectorEnv``.

The measuring pieces are importable: :func:`measure_rounds` over any of :data:`FLOOR_VARIANTS`
(e.g. ``benchmarks/vector_throughput.py`` shows the ping-pong as a reference row).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv

from envmanager import SubprocessEnvManager

__all__ = [
    "TrivialEnv",
    "PipePingPong",
    "SharedMemoryRoundTrip",
    "VectorEnvSteps",
    "FLOOR_VARIANTS",
    "PING_PONG",
    "measure_rounds",
]


class TrivialEnv(gym.Env):
    """A step that costs a couple of microseconds: what is left is the transport's cost."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self._observation = np.zeros(4, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return self._observation, {}

    def step(self, action: Any) -> tuple:
        return self._observation, 1.0, False, False, {}


def _echo_bytes(requests: Any, replies: Any) -> None:
    """The far end of the ping-pong: answer every message with one byte, until EOF."""
    recv_bytes, send_bytes = requests.recv_bytes, replies.send_bytes
    try:
        while True:
            recv_bytes()
            send_bytes(b"x")
    except (EOFError, OSError):
        return


class PipePingPong:
    """One byte each way through a ``multiprocessing.Pipe()`` (the floor every ratio is against),
    or through two one-way pipes (``duplex=False``)."""

    def __init__(self, context: str | None = None, duplex: bool = True) -> None:
        ctx = multiprocessing.get_context(context)
        if duplex:
            self._requests, child_end = ctx.Pipe()
            self._replies = self._requests
            child_ends: tuple[Any, ...] = (child_end, child_end)
        else:
            requests_reader, self._requests = ctx.Pipe(duplex=False)
            self._replies, replies_writer = ctx.Pipe(duplex=False)
            child_ends = (requests_reader, replies_writer)
        self._process = ctx.Process(target=_echo_bytes, args=child_ends, daemon=True)
        self._process.start()
        for end in set(child_ends):
            end.close()

    def run(self, steps: int) -> float:
        """Seconds for ``steps`` round trips."""
        send_bytes, recv_bytes = self._requests.send_bytes, self._replies.recv_bytes
        started = time.perf_counter()
        for _ in range(steps):
            send_bytes(b"x")
            recv_bytes()
        return time.perf_counter() - started

    def close(self) -> None:
        self._requests.close()  # the other side reads EOF and returns
        self._process.join(5)
        self._replies.close()
        if self._process.is_alive():
            self._process.kill()


def _shared_memory_echo(block: Any, wake_up_reader: int, wake_back_writer: int) -> None:
    """The far end of the shared-memory round trip: read the action, write a reward, wake back."""
    action = np.frombuffer(block, dtype=np.int64, count=1)
    reward = np.frombuffer(block, dtype=np.float64, count=1, offset=8)
    read, write = os.read, os.write
    while read(wake_up_reader, 1):
        reward[0] = float(action[0])
        write(wake_back_writer, b"x")


class SharedMemoryRoundTrip:
    """An action into shared memory, a one-byte wake-up on a raw pipe; a reward back, woken back."""

    def __init__(self, context: str | None = None) -> None:
        ctx = multiprocessing.get_context(context)
        self._block = ctx.RawArray("b", 16)
        self._action = np.frombuffer(self._block, dtype=np.int64, count=1)
        self._reward = np.frombuffer(self._block, dtype=np.float64, count=1, offset=8)
        wake_up_reader, self._wake_up = os.pipe()
        self._woken_back, wake_back_writer = os.pipe()
        self._process = ctx.Process(
            target=_shared_memory_echo, args=(self._block, wake_up_reader, wake_back_writer), daemon=True
        )
        self._process.start()
        os.close(wake_up_reader)
        os.close(wake_back_writer)

    def run(self, steps: int) -> float:
        """Seconds for ``steps`` round trips."""
        action, reward = self._action, self._reward
        read, write, wake_up, woken_back = os.read, os.write, self._wake_up, self._woken_back
        started = time.perf_counter()
        for step in range(steps):
            action[0] = step
            write(wake_up, b"x")
            read(woken_back, 1)
            if reward[0] != step:
                raise RuntimeError("the other side did not answer this round trip")
        return time.perf_counter() - started

    def close(self) -> None:
        os.close(self._wake_up)  # the other side reads EOF and returns
        self._process.join(5)
        if self._process.is_alive():
            self._process.kill()
        os.close(self._woken_back)


class VectorEnvSteps:
    """A vector env over ``num_envs`` copies of an env, stepped with a constant action."""

    def __init__(self, make: Callable[[list], Any], env_fn: Callable[[], gym.Env] = TrivialEnv, num_envs: int = 1) -> None:
        self.envs = make([env_fn] * num_envs)
        self.envs.reset(seed=0)
        self._actions = np.zeros(num_envs, dtype=self.envs.action_space.dtype)

    def run(self, steps: int) -> float:
        """Seconds for ``steps`` vector steps."""
        step, actions = self.envs.step, self._actions
        started = time.perf_counter()
        for _ in range(steps):
            step(actions)
        return time.perf_counter() - started

    def close(self) -> None:
        self.envs.close()


PING_PONG = "pipe ping-pong"
ONE_WAY_PIPES = "one-way pipes ping-pong"
SHARED_MEMORY = "shared memory + wake-up"
OURS, OURS_OFF, ASYNC = "ours (profiling on)", "ours profiling off", "async"

FLOOR_VARIANTS: dict[str, Callable[[], Any]] = {
    PING_PONG: PipePingPong,
    ONE_WAY_PIPES: lambda: PipePingPong(duplex=False),
    SHARED_MEMORY: SharedMemoryRoundTrip,
    OURS: lambda: VectorEnvSteps(lambda fns: SubprocessEnvManager(fns)),
    OURS_OFF: lambda: VectorEnvSteps(lambda fns: SubprocessEnvManager(fns, profiling=False)),
    ASYNC: lambda: VectorEnvSteps(lambda fns: AsyncVectorEnv(fns)),
}
"""What one run compares, by label: each maker builds an object with ``run(steps) -> seconds``
and ``close()``."""


def measure_rounds(makers: dict[str, Callable[[], Any]], steps: int, rounds: int) -> dict[str, list[float]]:
    """Seconds per step of each variant, one sample per round: all alive at once, measured in
    alternating rounds of ``steps`` steps (who goes first rotates), after a warm-up."""
    built: dict[str, Any] = {}
    try:
        for label, make in makers.items():
            built[label] = make()
        for measured in built.values():
            measured.run(max(10, steps // 10))  # warm up
        labels = list(built)
        samples: dict[str, list[float]] = {label: [] for label in labels}
        for round_index in range(rounds):
            shift = round_index % len(labels)
            for label in labels[shift:] + labels[:shift]:
                samples[label].append(built[label].run(steps) / steps)
        return samples
    finally:
        for measured in built.values():
            measured.close()


def print_floor(steps: int, rounds: int) -> None:
    """The table: per-step microseconds and the ratio to the ping-pong, next to the goal."""
    samples = measure_rounds(FLOOR_VARIANTS, steps, rounds)
    floor = samples[PING_PONG]
    print(f"{rounds} interleaved rounds of {steps} steps, medians; one worker, a ~2 us env step; load {_load()}")
    print(f"{'variant':<26} {'us/step':>8}  {'x ping-pong':>11}  (quartiles of the per-round ratio)")
    for label, seconds in samples.items():
        ratios = [mine / reference for mine, reference in zip(seconds, floor)]
        low, _, high = statistics.quantiles(ratios, n=4)
        goal = "   goal <= 1.50" if label == OURS else ""
        print(
            f"{label:<26} {statistics.median(seconds) * 1e6:8.1f}  {statistics.median(ratios):11.2f}"
            f"  ({low:.2f} .. {high:.2f}){goal}"
        )


def print_oversubscribed(rounds: int) -> None:
    """Eight workers on this machine's cores: ours against AsyncVectorEnv, steps per second."""
    from benchmark_envs import ENVS  # the same envs as the throughput table

    print()
    print(f"oversubscribed: 8 workers on {len(os.sched_getaffinity(0))} cores, {rounds} interleaved rounds, medians")
    for env_name, steps in (("busy-1ms", 50), ("CartPole-v1", 500)):
        makers = {
            OURS: lambda: VectorEnvSteps(lambda fns: SubprocessEnvManager(fns), ENVS[env_name], 8),
            ASYNC: lambda: VectorEnvSteps(lambda fns: AsyncVectorEnv(fns), ENVS[env_name], 8),
        }
        samples = measure_rounds(makers, steps, rounds)
        ratios = [theirs / mine for mine, theirs in zip(samples[OURS], samples[ASYNC])]
        print(
            f"  {env_name:<12} x8  ours {statistics.median(samples[OURS]) * 1e6:8.1f} us/step, "
            f"async {statistics.median(samples[ASYNC]) * 1e6:8.1f} us/step, "
            f"ours {statistics.median(ratios):.2f}x as fast   goal >= 1.00"
        )


def _load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and rounds: rough figures, fast")
    parser.add_argument("--oversubscribed", action="store_true", help="also 8 workers on this machine's cores")
    args = parser.parse_args()
    steps, rounds = (1000, 5) if args.quick else (5000, 9)
    print_floor(steps, rounds)
    if args.oversubscribed:
        print_oversubscribed(rounds)


if __name__ == "__main__":
    main()
