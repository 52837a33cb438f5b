"""An env call timed as a block (envmanager.transport.timed_calls): what the step timer does, on
both implementations (the C helper and its Python reference, see tests/envmanager/step_cores.py),
and a property test that drives both with the same random programs and compares what they leave."""

from __future__ import annotations

import gc
import math
import random
import time
from fractions import Fraction

import pytest

from profiler.timing.phased_block import FOLD_AT_RUNS
from profiler.timing.timer_node import TimerNode
from profiler.timing.timer_stack import TimerStack
from envmanager.measurement import env_time
from envmanager.measurement.env_time import CpuSampler
from envmanager.transport import timed_calls
from envmanager.transport.timed_calls import PythonStepTimer, make_step_timer
from step_cores import step_core  # noqa: F401  (an autouse fixture, parametrised by implementation)


class SteppingClock:
    """A fake clock that moves by the next of ``steps`` seconds at each reading."""

    def __init__(self, steps: list, start: float | int | Fraction = 100.0) -> None:
        self.time = start
        self.steps = list(steps)
        self.readings = 0

    def __call__(self) -> float | int | Fraction:
        self.time += self.steps[self.readings % len(self.steps)]
        self.readings += 1
        return self.time


def test_the_implementation_in_force_is_the_one_asked_for(step_core):
    timer = make_step_timer(TimerStack(), "env.step", SteppingClock([1.0]))
    assert isinstance(timer, PythonStepTimer) is (step_core == "python")
    assert timed_calls.compiled() is (step_core == "compiled")


def test_open_makes_the_block_the_open_one_under_the_block_that_was_open():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([1.0]))
    node = timer.open()
    assert stack.current is node
    assert node is stack.root.children["env.step"]
    assert node.parent is stack.root


def test_close_counts_the_run_as_a_with_block_would_and_reopens_the_parent():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([0.5, 2.0, 0.5, 3.0]))
    timer.close(timer.open())  # 2.0 s
    timer.close(timer.open())  # 3.0 s
    node = stack.root.children["env.step"]
    assert stack.current is stack.root
    assert (node.total, node.count, node.errors, node.min, node.max) == (5.0, 2, 0, 2.0, 3.0)


def test_a_failed_call_counts_its_run_and_an_error():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([1.5]))
    timer.fail(timer.open())
    node = stack.root.children["env.step"]
    assert (node.total, node.count, node.errors) == (1.5, 1, 1)
    assert stack.current is stack.root


def test_blocks_opened_inside_nest_under_the_timed_call():
    stack = TimerStack()
    clock = SteppingClock([1.0])
    outer = make_step_timer(stack, "env.step", clock)
    inner = make_step_timer(stack, "physics", clock)
    node = outer.open()
    inner.close(inner.open())
    outer.close(node)
    assert stack.root.children["env.step"].children["physics"].count == 1
    assert stack.current is stack.root


def test_a_slow_call_has_the_sampler_measure_the_next_one():
    sampler = CpuSampler(seed=0)
    sampler.countdown = 7
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([0.002]), sampler, exact_above=0.001)
    timer.close(timer.open())
    assert sampler.countdown == 0


def test_a_fast_call_leaves_the_sampler_countdown_alone():
    sampler = CpuSampler(seed=0)
    sampler.countdown = 7
    timer = make_step_timer(TimerStack(), "env.step", SteppingClock([0.0001]), sampler, exact_above=0.001)
    timer.close(timer.open())
    assert sampler.countdown == 7


def test_a_fake_clock_of_fractions_gives_exact_fractions():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([Fraction(1, 3)], start=Fraction(0)))
    node = timer.open()
    node.total, node.min, node.max = Fraction(0), Fraction(10), Fraction(0)
    timer.close(node)
    assert (node.total, node.min, node.max) == (Fraction(1, 3), Fraction(1, 3), Fraction(1, 3))


def test_a_count_past_a_machine_word_keeps_counting_exactly():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([1.0]))
    node = timer.open()
    node.count, node.errors = 2**63 - 1, 2**70
    timer.fail(node)
    assert (node.count, node.errors) == (2**63, 2**70 + 1)


def test_a_node_that_is_not_a_timer_node_is_counted_through_its_attributes():
    class OtherNode(TimerNode):
        __slots__ = ()

    stack = TimerStack()
    other = OtherNode("env.step", stack.root, stack)
    stack.root.children["env.step"] = other
    timer = make_step_timer(stack, "env.step", SteppingClock([1.0]))
    assert timer.open() is other
    timer.close(other)
    assert (other.total, other.count) == (1.0, 1)


def test_a_clock_that_raises_raises_out_of_open():
    def broken_clock() -> float:
        raise OSError("no clock here")

    timer = make_step_timer(TimerStack(), "env.step", broken_clock)
    with pytest.raises(OSError, match="no clock here"):
        timer.open()


class CountingEnv:
    """An env whose step gives back what it was given, and raises for the action "fail"; a step
    timer opened on ``inner`` times a block inside its step, when given."""

    def __init__(self, inner=None) -> None:
        self.inner = inner
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.inner is not None:
            self.inner.close(self.inner.open())
        if action == "fail":
            raise ValueError("the env failed")
        return (action, 1.0, False, False, {})


def test_step_env_steps_the_env_and_counts_the_run_as_a_block():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([0.5, 2.0]))
    assert timer.step_env(CountingEnv(), 3) == (3, 1.0, False, False, {})
    stack.settle()
    node = stack.root.children["env.step"]
    assert (node.total, node.count, node.errors) == (2.0, 1, 0)
    assert stack.current is stack.root


def test_step_env_nests_the_envs_own_blocks_under_its_block():
    stack = TimerStack()
    clock = SteppingClock([1.0])
    timer = make_step_timer(stack, "env.step", clock)
    timer.step_env(CountingEnv(inner=make_step_timer(stack, "physics", clock)), 0)
    assert stack.root.children["env.step"].children["physics"].count == 1


def test_step_env_holds_its_runs_until_a_reader_settles_the_stack():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([0.5, 2.0, 0.5, 3.0]))
    env = CountingEnv()
    timer.step_env(env, 0)
    timer.step_env(env, 0)
    node = stack.root.children["env.step"]
    assert (node.total, node.count) == (0.0, 0)  # held by the timer
    stack.settle()
    assert (node.total, node.count, node.min, node.max) == (5.0, 2, 2.0, 3.0)
    stack.settle()  # nothing held twice
    assert (node.total, node.count) == (5.0, 2)


def test_step_env_folds_its_runs_once_it_holds_fold_at_runs_of_them():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([1.0]))
    env = CountingEnv()
    for _ in range(FOLD_AT_RUNS):
        timer.step_env(env, 0)
    assert stack.root.children["env.step"].count == FOLD_AT_RUNS


def test_a_reset_of_the_stack_drops_the_runs_step_env_held_with_the_tree():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([1.0]))
    timer.step_env(CountingEnv(), 0)
    stack.reset()
    timer.step_env(CountingEnv(), 0)
    stack.settle()
    assert stack.root.children["env.step"].count == 1


def test_a_block_opened_around_step_env_gets_the_runs_after_it_the_earlier_ones_stay_where_they_ran():
    stack = TimerStack()
    clock = SteppingClock([1.0])
    timer = make_step_timer(stack, "env.step", clock)
    around = make_step_timer(stack, "rollout", clock)
    timer.step_env(CountingEnv(), 0)
    node = around.open()
    timer.step_env(CountingEnv(), 0)
    timer.step_env(CountingEnv(), 0)
    around.close(node)
    stack.settle()
    assert stack.root.children["env.step"].count == 1
    assert stack.root.children["rollout"].children["env.step"].count == 2


class EnvSteppingAnother:
    """An env whose step steps an inner env through the same step timer (a wrapper timed twice)."""

    def __init__(self, timer) -> None:
        self.timer = timer

    def step(self, action):
        return self.timer.step_env(CountingEnv(), action)


def test_a_step_env_inside_a_step_env_counts_each_run_in_its_own_node():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([1.0]))
    timer.step_env(EnvSteppingAnother(timer), 0)
    timer.step_env(EnvSteppingAnother(timer), 0)
    stack.settle()
    outer = stack.root.children["env.step"]
    inner = outer.children["env.step"]
    assert (outer.count, outer.total) == (2, 6.0)  # each outer run: 3 readings of 1 s
    assert (inner.count, inner.total) == (2, 2.0)


def test_a_step_timer_that_goes_adds_what_it_held_to_the_tree():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([1.0]))
    timer.step_env(CountingEnv(), 0)
    del timer
    assert stack.root.children["env.step"].count == 1


def test_a_fake_clock_of_ints_counts_step_envs_runs_at_once_as_ints():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([2], start=0))
    timer.step_env(CountingEnv(), 0)
    node = stack.root.children["env.step"]
    assert (node.total, node.count, node.max) == (2, 1, 2)


def test_step_env_counts_a_failed_step_as_an_error_and_raises_the_envs_exception():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", SteppingClock([1.0]))
    with pytest.raises(ValueError, match="the env failed"):
        timer.step_env(CountingEnv(), "fail")
    stack.settle()
    node = stack.root.children["env.step"]
    assert (node.count, node.errors) == (1, 1)
    assert stack.current is stack.root


def test_step_env_lets_calls_pass_unmeasured_while_the_samplers_countdown_runs():
    sampler = CpuSampler(seed=0)
    sampler.countdown = 2
    timer = make_step_timer(TimerStack(), "env.step", SteppingClock([1e-6]), sampler, exact_above=0.001)
    env = CountingEnv()
    timer.step_env(env, 0)
    timer.step_env(env, 0)
    assert (sampler.countdown, sampler.measured_calls) == (0, 0)
    assert timer.step_env(env, 0) == (0, 1.0, False, False, {})  # the countdown is out: measured
    assert sampler.measured_calls == 1 and env.steps == 3


def watched_step_timer(stack: TimerStack, calls: list) -> object:
    """A step timer whose watched call (what a companion's blocks take) notes the action."""
    return make_step_timer(stack, "env.step", SteppingClock([1.0]), None, math.inf,
                           lambda env, action: calls.append(action) or "watched")


def test_step_env_hands_the_call_to_watched_while_a_companion_watches_blocks(monkeypatch):
    from profiler.timing import timers

    calls = []
    stack = TimerStack()
    timer = watched_step_timer(stack, calls)
    monkeypatch.setattr(timers, "plain_blocks", False)
    assert timer.step_env(CountingEnv(), 5) == "watched"
    assert calls == [5] and "env.step" not in stack.root.children


def test_step_env_sees_a_companion_that_comes_between_two_steps(monkeypatch):
    from profiler.timing import timers

    calls = []
    stack = TimerStack()
    timer = watched_step_timer(stack, calls)
    monkeypatch.setattr(timers, "plain_blocks", True)
    timer.step_env(CountingEnv(), 4)  # plain_blocks read (and, in C, remembered) here
    monkeypatch.setattr(timers, "plain_blocks", False)
    assert timer.step_env(CountingEnv(), 5) == "watched"
    monkeypatch.setattr(timers, "plain_blocks", True)
    timer.step_env(CountingEnv(), 6)
    stack.settle()
    assert calls == [5] and stack.root.children["env.step"].count == 2


class SteppedSampler(CpuSampler):
    """A CPU sampler that measures on fake clocks, so which calls it measures next does not
    depend on how loaded the machine is."""

    __slots__ = ("clock",)

    def __init__(self, seed: int, clock: SteppingClock) -> None:
        super().__init__(seed)
        self.clock = clock

    def measure(self, function, *args, **kwargs):
        return super().measure(function, *args, _wall=self.clock, _cpu=self.clock, **kwargs)


def _stepped(timer_class, seed: int, on_the_real_clock: bool = False) -> tuple:
    """Random env steps through ``step_env`` (a tenth failing, some with a block inside, the
    sampler measuring some), on fake clocks; the tree, the results and the sampler's figures.

    ``on_the_real_clock``: on ``time.perf_counter`` and a plain CpuSampler instead (the C helper's
    short path), no run slow enough to have the next measured; the trees' shapes then (names,
    counts, errors), their figures checked for what any clock leaves (see _check_figures)."""
    generator = random.Random(seed)
    if on_the_real_clock:
        clock = time.perf_counter
        sampler = CpuSampler(seed)
        exact_above = math.inf
    else:
        clock = SteppingClock([generator.random() * 0.002 for _ in range(16)])
        sampler = SteppedSampler(seed, SteppingClock([generator.random() * 0.002 for _ in range(16)]))
        exact_above = 0.001
    stack = TimerStack()
    timer = timer_class(stack, "env.step", clock, sampler, exact_above)
    envs = [CountingEnv(), CountingEnv(inner=timer_class(stack, "physics", clock))]
    around = timer_class(stack, "rollout", clock)
    around_node = None  # the block "rollout", while the steps run inside it
    outcomes = []
    for step in range(generator.randrange(1, 80)):
        action = "fail" if generator.random() < 0.1 else step
        try:
            outcomes.append(timer.step_env(generator.choice(envs), action))
        except ValueError as error:
            outcomes.append(str(error))
        outcomes.append(sampler.countdown)
        draw = generator.random()
        if draw < 0.05:  # a reader
            stack.settle()
        elif draw < 0.1:  # the steps go on inside a block, or outside it again
            if around_node is None:
                around_node = around.open()
            else:
                around.close(around_node)
                around_node = None
    if around_node is not None:
        around.close(around_node)
    assert stack.current is stack.root
    if on_the_real_clock:
        before_settling = _shape(stack.root)
        stack.settle()
        _check_figures(stack.root)
        return before_settling, _shape(stack.root), outcomes, sampler.take()[2]
    before_settling = _tree(stack.root)
    stack.settle()
    return before_settling, _tree(stack.root), outcomes, sampler.take(), clock.readings


@pytest.mark.parametrize("step_core", ["compiled"], indirect=True)  # it runs both itself: once is enough
def test_both_implementations_step_envs_alike_for_the_same_random_steps(step_core):
    for seed in range(200):
        assert _stepped(make_step_timer, seed) == _stepped(PythonStepTimer, seed), f"seed {seed}"


@pytest.mark.parametrize("step_core", ["compiled"], indirect=True)  # it runs both itself: once is enough
def test_both_implementations_step_envs_alike_on_the_real_clock_for_the_same_random_steps(step_core, monkeypatch):
    # a measured call is never slow here, so which calls are measured does not hang on the load
    monkeypatch.setattr(env_time, "EXACT_ABOVE_SECONDS", math.inf)
    for seed in range(200):
        compiled = _stepped(make_step_timer, seed, on_the_real_clock=True)
        assert compiled == _stepped(PythonStepTimer, seed, on_the_real_clock=True), f"seed {seed}"


def _shape(node: TimerNode) -> tuple:
    """The node's name, count and errors, and its children's: what a real clock leaves alike."""
    return (node.name, node.count, node.errors, tuple(_shape(child) for child in node.children.values()))


def _check_figures(node: TimerNode) -> None:
    """What any clock leaves: a counted block took time, its shortest run no longer than its
    longest, and its total between count times each."""
    if node.count:
        assert node.total > 0.0 and node.min <= node.max, node.name
        slack = 1e-9 * node.count
        assert node.min * node.count - slack <= node.total <= node.max * node.count + slack, node.name
    for child in node.children.values():
        _check_figures(child)


def _program(seed: int) -> list[tuple]:
    """A random program of timed calls: nested opens, closes and failures."""
    generator = random.Random(seed)
    operations: list[tuple] = []
    depth = 0
    for _ in range(generator.randrange(1, 60)):
        if depth and generator.random() < 0.5:
            operations.append(("fail" if generator.random() < 0.2 else "close",))
            depth -= 1
        else:
            operations.append(("open", generator.choice(["env.step", "physics", "render"])))
            depth += 1
    operations.extend([("close",)] * depth)
    return operations


def _run(timer_class, operations: list[tuple], seed: int) -> tuple:
    """Run the program with random run lengths on a fake clock (floats, or for a quarter of the
    seeds ints), a sampler watching for calls over 1 ms; the tree, the sampler's countdowns and
    the clock readings it left."""
    generator = random.Random(seed)
    if seed % 4 == 0:  # a fake clock of ints, as tests set: the figures stay ints
        clock = SteppingClock([generator.randrange(0, 3) for _ in range(16)], start=100)
    else:
        clock = SteppingClock([generator.random() * 0.002 for _ in range(16)])
    stack = TimerStack()
    sampler = CpuSampler(seed=0)
    sampler.countdown = 5
    timers: dict[str, object] = {}
    open_nodes: list = []
    countdowns = []
    for operation in operations:
        if operation[0] == "open":
            name = operation[1]
            if name not in timers:
                timers[name] = timer_class(stack, name, clock, sampler, 0.001)
            timer = timers[name]
            open_nodes.append((timer, timer.open()))
        else:
            timer, node = open_nodes.pop()
            getattr(timer, operation[0])(node)
            countdowns.append(sampler.countdown)
            if sampler.countdown == 0:  # measured, as CpuSampler.measure would set it again
                sampler.countdown = 3
    assert stack.current is stack.root
    return _tree(stack.root), countdowns, clock.readings


def _tree(node: TimerNode) -> tuple:
    """The node's figures as their reprs, so that a type differing (an int made a float) shows."""
    figures = (node.total, node.count, node.errors, node.min, node.max)
    return (node.name, *map(repr, figures), tuple(_tree(child) for child in node.children.values()))


@pytest.mark.parametrize("step_core", ["compiled"], indirect=True)  # it runs both itself: once is enough
def test_both_implementations_leave_the_same_tree_for_the_same_random_programs(step_core):
    for seed in range(200):
        operations = _program(seed)
        compiled = _run(make_step_timer, operations, seed)
        reference = _run(PythonStepTimer, operations, seed)
        assert compiled == reference, f"seed {seed}: {operations}"


def test_the_python_reference_is_what_make_step_timer_gives_when_forced(step_core):
    timer = make_step_timer(TimerStack(), "env.step", SteppingClock([1.0]), None, math.inf)
    assert (type(timer) is PythonStepTimer) is (step_core == "python")


# On the real clock (time.perf_counter) and a plain CpuSampler or none, the C helper takes its
# short path for a step whose open block is the one it last found its node under; a fake clock or
# a CpuSampler subclass takes the general one. These tests run the short path; the property test
# below runs both implementations on it too.


class EnvResettingTheStack:
    """An env whose step, given "reset", resets the stack and steps an inner env through the same
    timer (which finds its node again, under the new root), then has the collector free what the
    reset dropped and the allocator reuse its memory."""

    def __init__(self, timer, stack: TimerStack) -> None:
        self.timer = timer
        self.stack = stack

    def step(self, action):
        if action == "reset":
            self.stack.reset()
            self.timer.step_env(CountingEnv(), 0)
            gc.collect()
            reuse = [float(number) + 0.5 for number in range(100_000)]
            del reuse
        return action


def test_step_env_on_the_real_clock_survives_an_env_that_resets_the_stack_and_steps_again():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", time.perf_counter, None, 0.001)
    env = EnvResettingTheStack(timer, stack)
    timer.step_env(env, 0)
    timer.step_env(env, 0)
    assert timer.step_env(env, "reset") == "reset"
    # the outer run closed into the dropped tree (its root open again, as the reference leaves it)
    assert stack.current is not stack.root
    stack.settle()
    node = stack.root.children["env.step"]
    assert (node.count, node.errors, list(node.children)) == (1, 0, [])


@pytest.mark.parametrize("step_core", ["compiled"], indirect=True)  # the C helper's own allocation
def test_step_env_on_the_real_clock_raises_when_the_countdown_cannot_be_made_and_steps_nothing(step_core):
    testcapi = pytest.importorskip("_testcapi")
    stack = TimerStack()
    sampler = CpuSampler(seed=0)
    sampler.countdown = 1000  # past the ints Python caches: the next countdown is made afresh
    timer = make_step_timer(stack, "env.step", time.perf_counter, sampler, 0.001)
    env = CountingEnv()
    timer.step_env(env, 0)
    timer.step_env(env, 0)
    with pytest.raises(MemoryError):
        testcapi.set_nomemory(0, 1)  # the next allocation fails: the countdown's int
        try:
            timer.step_env(env, 0)
        finally:
            testcapi.remove_mem_hooks()
    # as the reference's ``sampler.countdown -= 1`` raising in its try: a failed run, no step
    assert (env.steps, sampler.countdown, stack.current is stack.root) == (2, 998, True)
    stack.settle()
    node = stack.root.children["env.step"]
    assert (node.count, node.errors) == (3, 1)


def test_step_env_on_the_real_clock_takes_the_countdown_down_and_measures_the_step_it_runs_out_at():
    sampler = CpuSampler(seed=0)
    sampler.countdown = 3
    timer = make_step_timer(TimerStack(), "env.step", time.perf_counter, sampler, math.inf)
    env = CountingEnv()
    seen = []
    for _ in range(4):
        timer.step_env(env, 0)
        seen.append((sampler.countdown, sampler.measured_calls))
    assert seen[:3] == [(2, 0), (1, 0), (0, 0)]
    # Measured, and the next gap drawn; unless the measured step took a millisecond or more on
    # the real clock (its process waited for a core), after which the next one is measured too.
    slow = sampler.measured_wall >= env_time.EXACT_ABOVE_SECONDS
    assert seen[3] == (0 if slow else sampler._gaps[1], 1)
    assert env.steps == 4


def test_a_slow_step_on_the_real_clock_has_the_sampler_measure_the_next_one():
    stack = TimerStack()
    sampler = CpuSampler(seed=0)
    timer = make_step_timer(stack, "env.step", time.perf_counter, sampler, 0.0)  # every run slow
    env = CountingEnv()
    timer.step_env(env, 0)  # the first step finds its node (and is measured)
    sampler.countdown = 5
    timer.step_env(env, 0)
    assert (sampler.countdown, sampler.measured_calls) == (0, 1)
    timer.step_env(env, 0)
    assert sampler.measured_calls == 2


def test_step_env_on_the_real_clock_counts_a_failed_step_as_an_error_and_raises_the_envs_exception():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", time.perf_counter, None, 0.001)
    env = CountingEnv()
    timer.step_env(env, 0)
    with pytest.raises(ValueError, match="the env failed"):
        timer.step_env(env, "fail")
    assert stack.current is stack.root
    timer.step_env(env, 0)
    stack.settle()
    node = stack.root.children["env.step"]
    assert (node.count, node.errors, env.steps) == (3, 1, 3)
    _check_figures(stack.root)


def test_step_env_on_the_real_clock_leaves_a_start_held_elsewhere_as_it_was():
    stack = TimerStack()
    timer = make_step_timer(stack, "env.step", time.perf_counter, None, 0.001)
    env = CountingEnv()
    timer.step_env(env, 0)
    timer.step_env(env, 0)
    node = stack.root.children["env.step"]
    held = node._start  # a second holder of the node's start: the next start is a new float
    value = float(held)
    timer.step_env(env, 0)
    assert held == value and node._start is not held and node._start > value
