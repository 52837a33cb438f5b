"""Small real environments for the envmanager tests (importable by spawned workers too)."""

from __future__ import annotations

import ctypes
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import types
from multiprocessing.connection import Connection
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import psutil
from gymnasium import spaces


class CountingEnv(gym.Env):
    """Observation = steps taken; ends after ``episode_length`` steps; chatty infos on demand.

    ``info_every`` > 0 makes it report infos of several kinds (int, float, array, nested dict,
    object) on some steps only, to exercise the vector-info masks.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self, episode_length: int = 5, info_every: int = 0, delay: float = 0.0, render_mode: str | None = None
    ) -> None:
        self.observation_space = spaces.Box(0, 1000, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(3)
        self.episode_length = episode_length
        self.info_every = info_every
        self.delay = delay
        self.render_mode = render_mode
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t, self.np_random.random()], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if self.delay:
            time.sleep(self.delay)
        self.t = 0
        info = {"reset_value": self.np_random.integers(10)} if self.info_every else {}
        return self._obs(), info

    def step(self, action: Any) -> tuple:
        if self.delay:
            time.sleep(self.delay)
        self.t += 1
        info: dict = {}
        if self.info_every and self.t % self.info_every == 0:
            info = {
                "count": self.t,
                "ratio": self.t / 7,
                "vec": np.full(3, self.t),
                "nested": {"a": int(action)},
                "tag": f"t{self.t}",
            }
        terminated = self.t >= self.episode_length and action == 0
        truncated = self.t >= self.episode_length + 2
        return self._obs(), float(action) + 0.5, terminated, truncated, info

    def render(self) -> np.ndarray:
        return np.full((4, 4, 3), self.t, dtype=np.uint8)


class RaisingEnv(CountingEnv):
    """Raises ``ValueError("Error in reset")`` for seed 1, ``"Error in step with <a>"`` for actions 1 and 2."""

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        if seed == 1:
            raise ValueError("Error in reset")
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple:
        if action in (1, 2):
            raise ValueError(f"Error in step with {action}")
        return super().step(action)


class SuicidalEnv(CountingEnv):
    """Kills its own process with SIGKILL when stepped with action 2, like a segfaulting simulator."""

    def step(self, action: Any) -> tuple:
        if action == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().step(action)


class ForkingEnv(SuicidalEnv):
    """Forks a child on its first reset that sleeps ten minutes (a simulator forked without exec):
    the child holds copies of every descriptor of the worker, its sentinel's and its reply
    pipe's writing ends among them. ``helper_pid`` is the child's. Action 2 kills the worker.
    ``new_session``: the child makes a session of its own (``os.setsid``), leaving the worker's
    process group."""

    helper_pid: int | None = None

    def __init__(self, new_session: bool = False) -> None:
        super().__init__()
        self.new_session = new_session

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        if self.helper_pid is None:
            child = os.fork()
            if child == 0:
                if self.new_session:
                    os.setsid()
                time.sleep(600)
                os._exit(0)
            self.helper_pid = child
        return super().reset(seed=seed, options=options)


def fork_a_child_then_die() -> gym.Env:
    """An env factory that forks a child sleeping ten minutes, then dies by SIGKILL: a simulator
    that crashes while it starts, leaving a child holding copies of its process's descriptors."""
    if os.fork() == 0:
        time.sleep(600)
        os._exit(0)
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")


def fork_a_child_and_report_it(report: Connection) -> None:
    """A process target: fork a child that sleeps a minute holding copies of every descriptor of
    this process (its sentinel's writing end among them), send the child's pid on ``report``,
    and sleep a minute too."""
    child = os.fork()
    if child == 0:
        time.sleep(60)
        os._exit(0)
    report.send(child)
    time.sleep(60)


def start_forked(target: Callable[[Connection], None]) -> tuple[Any, int]:
    """``target(report)`` started in a forked process: the process and the pid it reports."""
    reader, writer = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(target=target, args=(writer,))
    process.start()
    return process, reader.recv()


class SabotagingEnv(CountingEnv):
    """Puts a NaN time into its worker's timers when stepped with action 2, as a broken clock
    would: the payload that carries it is malformed."""

    def step(self, action: Any) -> tuple:
        if action == 2:
            from profiler.timing import timers

            timers.get_timer_root().get_child("sabotaged").add_runs(float("nan"), 1, 0, 0.1, 0.1)
        return super().step(action)


class HangingEnv(CountingEnv):
    """Sleeps for a minute when stepped with action 2: a hung simulator."""

    def step(self, action: Any) -> tuple:
        if action == 2:
            time.sleep(60)
        return super().step(action)


class MisshapenObservationEnv(CountingEnv):
    """Returns an observation of shape (3,) instead of (2,) when stepped with action 2."""

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = super().step(action)
        if action == 2:
            obs = np.zeros(3, dtype=np.float32)
        return obs, reward, terminated, truncated, info


class BadRewardEnv(CountingEnv):
    """Returns the reward "abc" when stepped with action 2 and a dict with action 1."""

    def step(self, action: Any) -> tuple:
        obs, _, terminated, truncated, info = super().step(action)
        reward = {0: 0.5, 1: {"score": 1}, 2: "abc"}[int(action)]
        return obs, reward, terminated, truncated, info


class BigObservationEnv(CountingEnv):
    """2 MB observations (a 512 x 1024 float32 image): a reply that takes many reads to arrive.

    Every byte is 0x7F, so any 4 of them read as a message header announce a 2 GB message.
    """

    PIXEL = np.frombuffer(b"\x7f" * 4, dtype=np.float32)[0]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.observation_space = spaces.Box(0, np.inf, shape=(512, 1024), dtype=np.float32)

    def _obs(self) -> np.ndarray:
        return np.full((512, 1024), self.PIXEL, dtype=np.float32)


class BigActionEnv(CountingEnv):
    """32 KB actions: a request sent as a separate header and body (over 16 KB), when the actions
    travel in the request (``shared_memory=False``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.action_space = spaces.Box(0, 1, shape=(8192,), dtype=np.float32)

    def step(self, action: Any) -> tuple:
        return super().step(0)


class CtrlCEnv(CountingEnv):
    """At its ``interrupt_at``-th step, once the trainer is blocked waiting for the replies,
    sends it SIGINT (as Ctrl-C in the terminal would), then works ``after`` seconds more before
    answering: the trainer is interrupted while this worker is busy."""

    def __init__(self, interrupt_at: int = 0, after: float = 0.1, **kwargs: Any) -> None:
        super().__init__(episode_length=1000, **kwargs)
        self.interrupt_at = interrupt_at
        self.after = after

    def step(self, action: Any) -> tuple:
        result = super().step(action)
        if self.t == self.interrupt_at:
            trainer = psutil.Process(os.getppid())
            deadline = time.monotonic() + 10
            while trainer.status() != psutil.STATUS_SLEEPING and time.monotonic() < deadline:
                time.sleep(0.001)  # still sending the other workers' requests
            trainer.send_signal(signal.SIGINT)
            time.sleep(self.after)
        return result


class HelperProcessEnv(HangingEnv):
    """Runs an external helper process (``sleep 60``), as an env driving a simulator does.

    The helper starts at the first reset (so the env the manager builds to read the spaces
    starts none) and ``close()`` stops it; stepping with action 2 hangs, like
    ``HangingEnv``.
    """

    helper: subprocess.Popen | None = None
    helper_pid: int | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        if self.helper is None:
            self.helper = subprocess.Popen(["sleep", "60"])
            self.helper_pid = self.helper.pid
        return super().reset(seed=seed, options=options)

    def close(self) -> None:
        if self.helper is not None:
            self.helper.kill()
            self.helper.wait()


class LeakyHelperProcessEnv(HelperProcessEnv):
    """Like ``HelperProcessEnv``, but its ``close()`` forgets to stop the helper."""

    def close(self) -> None:
        pass


class DiesInResetEnv(SuicidalEnv):
    """``SuicidalEnv`` whose reset also kills its process while the file ``countdown`` holds n > 0.

    Each such death writes n - 1 first, so n resets die, then resets work again (a simulator
    that crashes a few times on start-up).
    """

    def __init__(self, countdown: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.countdown = countdown

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        with open(self.countdown) as file:
            remaining = int(file.read() or 0)
        if remaining > 0:
            with open(self.countdown, "w") as file:
                file.write(str(remaining - 1))
            os.kill(os.getpid(), signal.SIGKILL)
        return super().reset(seed=seed, options=options)


class CustomSpace(gym.Space):
    """A space Gymnasium knows nothing about (cannot live in shared memory)."""

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return "sample"

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CustomSpace)


class CustomSpaceEnv(gym.Env):
    """Observations and actions are plain strings, in a custom space."""

    def __init__(self) -> None:
        self.observation_space = CustomSpace()
        self.action_space = CustomSpace()

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return "reset", {}

    def step(self, action: str) -> tuple:
        return f"step({action})", 0.0, False, False, {}


class SequenceSpaceEnv(gym.Env):
    """Observations of varying length (a dynamic-shape ``Sequence`` space)."""

    def __init__(self) -> None:
        self.observation_space = spaces.Sequence(spaces.Discrete(4), stack=True)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return np.arange(2), {}

    def step(self, action: int) -> tuple:
        return np.arange(int(action) + 1), 1.0, False, False, {}


class DictObsEnv(CountingEnv):
    """A ``Dict`` observation, batched through Gymnasium's ``concatenate``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.observation_space = spaces.Dict(
            {"pos": spaces.Box(0, 1000, shape=(2,), dtype=np.float32), "t": spaces.Discrete(1000)}
        )

    def _obs(self) -> dict:
        return {"pos": super()._obs(), "t": self.t}


# multiprocessing's own long-lived helpers, shared by the whole test session, not ours to end.
_HELPERS = ("resource_tracker", "forkserver")
# The local Ray of the Ray tests (ray_cluster): its own processes (GCS, raylet, agents, idle
# workers) live as long as the session. An actor of a RayEnvManager is ours: it shows as this.
_RAY_ACTOR_OF_OURS = "ray::EnvWorkerActor"


def kill_all(processes: list[psutil.Process]) -> None:
    """SIGKILL each of ``processes`` that is still there."""
    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            pass  # gone already


def worker_children() -> list[psutil.Process]:
    """Child processes of the test process, minus multiprocessing's helper processes and the
    processes of the session's Ray (its actors for env workers count)."""
    children = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
        except psutil.Error:
            continue  # it ended while we looked
        if any(helper in cmdline for helper in _HELPERS):
            continue
        if _is_rays_own(cmdline):
            continue
        try:
            if child.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                continue  # ended, its parent (Ray's raylet, say) not yet done reaping it
        except psutil.Error:
            continue
        children.append(child)
    return children


def _is_rays_own(cmdline: str) -> bool:
    if cmdline.startswith(_RAY_ACTOR_OF_OURS):
        return False
    # Its servers and scripts run from Ray's installed package.
    return cmdline.startswith("ray::") or f"site-packages{os.sep}ray{os.sep}" in cmdline


class CpuBurningEnv(CountingEnv):
    """Burns ``cpu_seconds`` of its process's CPU time per step: it can never finish sooner, and
    takes longer on the wall clock whenever it has to share a core."""

    def __init__(self, cpu_seconds: float, episode_length: int = 1000) -> None:
        super().__init__(episode_length=episode_length)
        self.cpu_seconds = cpu_seconds

    def step(self, action: Any) -> tuple:
        end = time.process_time() + self.cpu_seconds
        while time.process_time() < end:
            pass
        return super().step(action)


class JitteryEnv(CountingEnv):
    """Sleeps a random 0 to ``max_delay`` seconds per step, drawn from its own seeded generator:
    identical envs whose slowest one changes from step to step."""

    def __init__(self, max_delay: float, episode_length: int = 1000) -> None:
        super().__init__(episode_length=episode_length)
        self.max_delay = max_delay

    def step(self, action: Any) -> tuple:
        time.sleep(self.np_random.uniform(0.0, self.max_delay))
        return super().step(action)


class EchoEnv(gym.Env):
    """Observes the action it was given (its observation space is its action space) and keeps
    it as ``last_action``; its rewards and flags go through Python and numpy number types."""

    REWARDS = (1, np.float32(0.1), np.int64(-3), True, np.float16(2.5), 2**53 + 1, -0.0, np.uint8(255))
    TERMINATIONS = (False, np.bool_(False), 0, np.int64(0), False, np.True_, False, False)
    TRUNCATIONS = (np.False_, False, 0, False, np.int8(0), False, False, 1)

    def __init__(self, action_space: gym.Space) -> None:
        self.action_space = action_space
        self.observation_space = action_space
        self.last_action: Any = None
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(self.observation_space.shape, dtype=self.observation_space.dtype), {}

    def step(self, action: Any) -> tuple:
        self.last_action = action
        index = self.t % len(self.REWARDS)
        self.t += 1
        observation = np.array(action, dtype=self.observation_space.dtype)
        return observation, self.REWARDS[index], self.TERMINATIONS[index], self.TRUNCATIONS[index], {}


class ActionWritingEnv(CountingEnv):
    """Observes its action, then writes into it (as some envs clip in place)."""

    def __init__(self) -> None:
        super().__init__(episode_length=1000)
        self.action_space = spaces.Box(-10, 10, shape=(2,), dtype=np.float32)

    def step(self, action: Any) -> tuple:
        observation = np.array(action, dtype=np.float32)
        action[:] = -1.0
        return observation, 0.0, False, False, {}


class SlowOnActionTwoEnv(CountingEnv):
    """Takes ``delay`` seconds over a step with action 2: a step the trainer may give up on."""

    def __init__(self, delay: float = 1.0) -> None:
        super().__init__(episode_length=1000)
        self.slow_delay = delay

    def step(self, action: Any) -> tuple:
        if action == 2:
            time.sleep(self.slow_delay)
        return super().step(action)


class ActionSumEnv(CountingEnv):
    """Observes the sum of every action it was given: which actions reached it, in any order."""

    def __init__(self) -> None:
        super().__init__(episode_length=1000)
        self.action_sum = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t, self.action_sum], dtype=np.float32)

    def step(self, action: Any) -> tuple:
        self.action_sum += int(action)
        return super().step(action)


class LeakyBigObservationEnv(LeakyHelperProcessEnv, BigObservationEnv):
    """2 MB observations and a helper process its ``close()`` forgets: a worker still writing its
    reply when the trainer dies must end that helper all the same."""


class SignalledAtTheEndEnv(LeakyBigObservationEnv):
    """``LeakyBigObservationEnv`` whose worker gets both death signals (SIGTERM, as the lifeline
    sends, and the parent-death signal) at the very moment it starts to end its group.

    Its first reset wraps the worker's ending (``_end_if_trainer_gone``, looked up when called):
    the wrapper writes ``mark_file``, arms the worker's own handlers of both signals again (the
    signals that told the worker may have disarmed them) and sends both, so the handlers run in
    the wrapper, before the ending's first line.  The mark shows that the signals were sent.
    """

    def __init__(self, mark_file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mark_file = mark_file

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        from envmanager.transport import worker

        ending = worker._end_if_trainer_gone
        mark_file = self.mark_file

        def signalled_ending(*args: Any) -> None:
            with open(mark_file, "w") as mark:
                mark.write("signalled")
            signal.signal(signal.SIGTERM, worker._on_sigterm)
            signal.signal(worker.PARENT_DEATH_SIGNAL, worker._on_parent_death)
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), worker.PARENT_DEATH_SIGNAL)
            ending(*args)

        worker._end_if_trainer_gone = signalled_ending
        return super().reset(seed=seed, options=options)


class HelperAtConstructionEnv(CountingEnv):
    """Starts a helper process (``sleep 60``) as it is built, and forgets it in ``close()``.

    With ``pid_file`` it appends the helper's pid to that file, one a line.  With ``hang=True``
    it prints ``{"helpers": [pid]}`` once the helper runs, then sleeps: a trainer to be killed
    while it builds its first env.
    """

    def __init__(self, hang: bool = False, pid_file: str | None = None) -> None:
        super().__init__()
        self.helper_pid = subprocess.Popen(["sleep", "60"]).pid
        if pid_file is not None:
            with open(pid_file, "a") as pids:
                pids.write(f"{self.helper_pid}\n")
        if hang:
            print(json.dumps({"helpers": [self.helper_pid]}), flush=True)
            time.sleep(600)


class UnimportableInfoEnv(CountingEnv):
    """Puts in its info, at action 2, an object whose class the trainer cannot import (a module
    that exists only inside the worker's process)."""

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = super().step(action)
        if action == 2:
            module = types.ModuleType("only_in_the_worker")
            exec("class Thing:\n    pass\n", module.__dict__)
            sys.modules["only_in_the_worker"] = module
            info = {"thing": module.Thing()}
        return obs, reward, terminated, truncated, info


class _RefusesToPickle:
    def __reduce__(self) -> Any:
        raise ValueError("this object refuses to be pickled")


class _UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot print this error")


class HostileInfoEnv(CountingEnv):
    """At action 2, the info or the exception a reply carries defeats the worker's pickling or
    printing: ``kind`` says how (``"reduce"``, ``"recursion"``, ``"unprintable"``, ``"ctrl-c"``)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = super().step(action)
        if action == 2:
            if self.kind == "reduce":
                info = {"bad": _RefusesToPickle()}
            elif self.kind == "recursion":
                nested: list = []
                for _ in range(100_000):
                    nested = [nested]
                info = {"deep": nested}
            elif self.kind == "unprintable":
                raise _UnprintableError()
            elif self.kind == "ctrl-c":
                raise KeyboardInterrupt
        return obs, reward, terminated, truncated, info


class NoneRewardEnv(CountingEnv):
    """Returns the reward None when stepped with action 2."""

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, None if action == 2 else reward, terminated, truncated, info


_GETVAL = 12  # semctl: read a System V semaphore's value


def semaphore_exists(semaphore_id: int) -> bool:
    """Whether the System V semaphore (the max_concurrency permits) still exists."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.semctl(semaphore_id, 0, _GETVAL) != -1


class SlowToRebuildEnv(SuicidalEnv):
    """``SuicidalEnv`` that takes ``seconds`` to build while the file ``slow`` exists: a
    restarted worker slow to start (an interpreter and large imports under load)."""

    def __init__(self, slow: str, seconds: float, **kwargs: Any) -> None:
        if os.path.exists(slow):
            time.sleep(seconds)
        super().__init__(**kwargs)
