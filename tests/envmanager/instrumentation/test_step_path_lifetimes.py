"""What the env step (``step_path.timed_step``, in C ``_step_core.EnvStep``) holds on to while
Python code runs inside it: the held runs' fold calls the timeline's ``add_packed_spans``, and another
thread (``events.clear_recording()``, ``timers.reset_timers(stack)``) may replace the stack's
timeline or open block meanwhile. Each program runs in a subprocess under Python's debug allocator,
which fills freed memory: a step that kept a pointer to an object that went crashes there."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import gymnasium as gym
import pytest

from profiler.timing import timers

from envmanager.instrumentation.timed_env import instrument_env
from envmanager.transport import timed_calls

_PREAMBLE = """
import threading
import gymnasium as gym
from profiler.recording import events
from profiler.recording.events import ThreadTimeline
from profiler.timing import timers
from profiler.timing.timer_node import TimerNode
from envmanager.instrumentation.timed_env import instrument_env
from envmanager.transport import timed_calls

timed_calls.use_compiled({compiled})


class Env(gym.Env):
    def step(self, action):
        return action


stack = timers.get_timer_stack_for_thread(threading.current_thread())
meanwhile = []


class TimelineOthersChangeMeanwhile(ThreadTimeline):
    \"\"\"A timeline whose add_spans and add_packed_spans let another thread in once: what that
    thread does is in ``meanwhile``.\"\"\"

    def add_spans(self, spans):
        super().add_spans(spans)
        self.let_others_in()

    def add_packed_spans(self, name, runs):
        super().add_packed_spans(name, runs)
        self.let_others_in()

    def let_others_in(self):
        while meanwhile:
            meanwhile.pop()()
"""

_TIMELINE_REPLACED = """
events.start_recording(100)
env = Env()
instrument_env(env, None)
stack.timeline = TimelineOthersChangeMeanwhile(100)
env.step(1)  # held, its span for that timeline
stack.timeline = ThreadTimeline(100)  # only the stack holds this one
# another thread's events.clear_recording(), once its settle() got the fold lock (in Python) or
# found nothing held (in C):
meanwhile.append(lambda: setattr(stack, "timeline", ThreadTimeline(100)))
env.step(2)  # the timeline changed: the held run folds, then the step records on the new timeline
env.step(3)  # ... and the timeline changed again: the run held for it folds into it
stack.settle()
assert stack.root.children["env.step"].count == 3
print("counted")
"""

_OPEN_BLOCK_REPLACED = """
events.start_recording(100)
stack.timeline = TimelineOthersChangeMeanwhile(100)
env = Env()
instrument_env(env, None)
env.step(1)  # held under the root
stack.current = TimerNode("vector.step", None, stack)  # an open block only the stack holds
meanwhile.append(lambda: setattr(stack, "current", stack.root))  # another thread: timers.reset_timers(stack)
env.step(2)  # the open block changed: the held run folds, then the step finds its node under it
env.step(3)
stack.settle()
print("counted")
"""


_FOLDED_AT_MORE_RUNS = """
from profiler.timing.phased_block import FOLD_AT_RUNS
from profiler.timing.timer_stack import TimerStack
from envmanager.measurement.env_time import CpuSampler

core = timed_calls.extension()
env = Env()
instrument_env(env, None)
env.step(0)  # the runs are held from here
core.configure(TimerNode, TimerStack, CpuSampler, timers, FOLD_AT_RUNS * 4)  # held longer from now on
for _ in range(FOLD_AT_RUNS * 3):
    env.step(0)
stack.settle()
core.configure(TimerNode, TimerStack, CpuSampler, timers, FOLD_AT_RUNS)
assert stack.root.children["env.step"].count == FOLD_AT_RUNS * 3 + 1
del env
print("counted")
"""


def _run(program: str, compiled: bool) -> subprocess.CompletedProcess:
    source = textwrap.dedent(_PREAMBLE).format(compiled=compiled) + textwrap.dedent(program)
    return subprocess.run([sys.executable, "-X", "dev", "-c", source], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONMALLOC": "debug"})


@pytest.fixture(params=["python", "compiled"])
def compiled(request) -> bool:
    if request.param == "compiled" and not timed_calls.compiled():
        pytest.skip(f"the step path's C helper is not loaded: {timed_calls.unavailable_reason}")
    return request.param == "compiled"


def test_a_step_survives_another_thread_replacing_the_timeline_while_the_held_runs_fold(compiled):
    done = _run(_TIMELINE_REPLACED, compiled)
    assert (done.returncode, done.stdout.strip()) == (0, "counted"), done.stderr[-2000:]


def test_a_step_survives_another_thread_resetting_the_stack_while_the_held_runs_fold(compiled):
    done = _run(_OPEN_BLOCK_REPLACED, compiled)
    assert (done.returncode, done.stdout.strip()) == (0, "counted"), done.stderr[-2000:]


@pytest.mark.skipif(not timed_calls.compiled(), reason="configure() is the C helper's, which is not loaded")
def test_the_c_step_holds_more_runs_when_configured_to_fold_at_more():
    done = _run(_FOLDED_AT_MORE_RUNS, True)
    assert (done.returncode, done.stdout.strip()) == (0, "counted"), done.stderr[-2000:]


class ClockThatFailsWhenTold:
    """A fake clock whose reading raises once ``failing`` is set."""

    def __init__(self) -> None:
        self.time = 1000.0
        self.failing = False

    def __call__(self) -> float:
        if self.failing:
            raise RuntimeError("the clock failed")
        self.time += 0.25
        return self.time


class EnvWhoseStepBreaksTheClock(gym.Env):
    def __init__(self, clock: ClockThatFailsWhenTold) -> None:
        self.clock = clock

    def step(self, action):
        if action == "fail":
            self.clock.failing = True
            raise ValueError("the env failed")
        return action


def test_a_failed_step_whose_end_cannot_be_read_leaves_the_block_closed(compiled):
    default = timed_calls.compiled()
    timed_calls.use_compiled(compiled)
    clock = ClockThatFailsWhenTold()
    previous = timers.set_clock(clock)
    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    try:
        timers.reset_timers()
        env = EnvWhoseStepBreaksTheClock(clock)
        instrument_env(env, None)
        env.step(0)
        with pytest.raises(RuntimeError, match="the clock failed") as raised:
            env.step("fail")
        # as the reference: the block closed before the clock is read, the env's error the context
        assert isinstance(raised.value.__context__, ValueError)
        assert stack.current is stack.root
    finally:
        timers.set_clock(previous)
        timed_calls.use_compiled(default)
        timers.reset_timers()
