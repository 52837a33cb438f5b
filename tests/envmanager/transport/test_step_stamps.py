"""The trainer's side of a profiled vector step (envmanager.transport.step_stamps): its step block
opened, and closed with the critical path's stamps, on both implementations (the C helper and its
Python reference, see tests/envmanager/step_cores.py), and a property test that drives both with
the same random steps and compares the trees and the held runs they leave."""

from __future__ import annotations

import random
import threading
from fractions import Fraction

import pytest

from profiler.timing import timers
from profiler.timing.phased_block import FOLD_AT_RUNS, PhasedBlock
from profiler.timing.timer_node import TimerNode
import numpy as np

from envmanager.measurement.critical_path import WAIT_BOUNDS_SECONDS, CriticalPath, whole_steps_in_python
from envmanager.transport import step_stamps, timed_calls
from envmanager.transport.step_stamps import (
    close_step_in_python,
    open_step_in_python,
    step_functions,
    whole_steps_counter,
)
from step_cores import step_core  # noqa: F401  (an autouse fixture, parametrised by implementation)

PHASES = ("send_actions", "wait_for_workers", "receive_results")


class SteppingClock:
    """A fake clock that moves by the next of ``steps`` seconds at each reading."""

    def __init__(self, steps: list, start: float | int | Fraction = 100.0) -> None:
        self.time = start
        self.steps = list(steps)

    def __call__(self) -> float | int | Fraction:
        self.time += self.steps[0]
        self.steps.append(self.steps.pop(0))
        return self.time


def test_the_implementation_in_force_is_the_one_asked_for(step_core):
    open_step, close_step = step_functions()
    assert (open_step is open_step_in_python) is (step_core == "python")
    assert (close_step is close_step_in_python) is (step_core == "python")
    assert (whole_steps_counter() is whole_steps_in_python) is (step_core == "python")


def test_a_step_opened_is_the_open_block_under_the_block_that_was_open(fake_clock):
    open_step, _ = step_functions()
    block = PhasedBlock("env_manager.step", PHASES)
    stack = timers.current_thread_stack()
    clock = open_step(block)
    assert clock is fake_clock
    assert stack.current is block.node is stack.root.children["env_manager.step"]
    assert block.node._start == 1000.0


def test_a_step_closed_keeps_its_stamps_as_a_run_and_reopens_the_parent(fake_clock):
    open_step, close_step = step_functions()
    block = PhasedBlock("env_manager.step", PHASES)
    stack = timers.current_thread_stack()
    clock = open_step(block)
    fake_clock.advance(7.0)
    close_step(block, clock, 1002.0, 1005.0, 1002.5, [1004.0, None])
    assert stack.current is stack.root
    assert block.runs == [(1000.0, 1002.0, 1005.0, 1007.0, 1002.5, 1004.0, None)]


def test_the_held_runs_fold_into_the_nodes_once_there_are_fold_at_runs(fake_clock):
    open_step, close_step = step_functions()
    block = PhasedBlock("env_manager.step", PHASES)
    for _ in range(FOLD_AT_RUNS):
        clock = open_step(block)
        close_step(block, clock, clock(), clock(), 0.0, [])
    assert block.runs == [] and block.node.count == FOLD_AT_RUNS


def test_no_step_is_opened_while_blocks_cannot_be_timed_from_stamps(fake_clock):
    open_step, _ = step_functions()
    block = PhasedBlock("env_manager.step", PHASES)
    timers.disable()
    assert open_step(block) is None
    assert block.node is None and timers.current_thread_stack().current is timers.current_thread_stack().root


def _steps_program(seed: int) -> list[tuple]:
    """Random steps: each its reply stamps (a None: a worker that did not reply), some steps
    nested under another open block, a clock of floats, ints or Fractions."""
    generator = random.Random(seed)
    workers = generator.randrange(1, 4)
    program = []
    for _ in range(generator.randrange(1, 40)):
        ready_at = [None if generator.random() < 0.1 else generator.random() for _ in range(workers)]
        program.append((generator.random() < 0.2, ready_at))
    return program


def _run_steps(open_step, close_step, count_whole_steps, program: list[tuple], seed: int) -> tuple:
    generator = random.Random(seed)
    kind = seed % 3
    steps = [generator.random() * 0.01 for _ in range(7)]
    if kind == 1:
        steps = [generator.randrange(0, 3) for _ in range(7)]
    elif kind == 2:
        steps = [Fraction(generator.randrange(1, 50), 1000) for _ in range(7)]
    clock = SteppingClock(steps, start=100 if kind else 100.0)
    previous = timers.set_clock(clock)
    timers.reset_timers()
    try:
        stack = timers.current_thread_stack()
        critical_path = CriticalPath(len(program[0][1]), stack)
        critical_path.count_whole_steps = count_whole_steps
        block = PhasedBlock("env_manager.step", PHASES, critical_path.count_steps)
        held = []
        for nested, ready_at in program:
            outer = timers.hierarchical_timer("outer") if nested else None
            if outer is not None:
                outer.__enter__()
            step_clock = open_step(block)
            sent = step_clock()
            waited = step_clock()
            close_step(block, step_clock, sent, waited, sent, list(ready_at))
            held.append(list(block.runs))
            if outer is not None:
                outer.__exit__(None, None, None)
        assert stack.current is stack.root
        block.fold()
        return _tree(stack.root), held, critical_path.vector_steps, critical_path.last_to_reply
    finally:
        timers.set_clock(previous)


def _tree(node: TimerNode) -> tuple:
    figures = (node.total, node.count, node.errors, node.min, node.max)
    return (node.name, *map(repr, figures), tuple(_tree(child) for child in node.children.values()))


@pytest.mark.parametrize("step_core", ["compiled"], indirect=True)  # it runs both itself: once is enough
def test_both_implementations_leave_the_same_tree_and_runs_for_the_same_random_steps(step_core):
    compiled = (*step_functions(), whole_steps_counter())
    reference = (open_step_in_python, close_step_in_python, whole_steps_in_python)
    for seed in range(150):
        program = _steps_program(seed)
        assert _run_steps(*compiled, program, seed) == _run_steps(*reference, program, seed), f"seed {seed}"


def test_the_c_helper_configured_for_the_steps_is_the_step_timers_own():
    assert step_stamps._extension is timed_calls.extension()


def test_close_step_in_c_refuses_what_is_not_a_phased_block():
    extension = timed_calls.extension()
    if extension is None:
        pytest.skip(timed_calls.unavailable_reason)
    with pytest.raises(TypeError):
        extension.close_step(object(), timers.current_clock(), 1.0, 2.0, 1.0, [])
    with pytest.raises(TypeError):
        extension.close_step(PhasedBlock("b", PHASES), timers.current_clock(), 1.0, 2.0, 1.0, (1.0,))


def _steps_table(seed: int) -> tuple[np.ndarray, int]:
    """A random float64 table of whole steps (the moment the trainer began waiting, then each
    worker's stamp), with equal stamps, replies before the wait began, waits in every bucket, and
    sometimes as a strided view of a wider table, as a fold hands it over."""
    generator = random.Random(seed)
    workers = generator.randrange(1, 6)
    extra = generator.randrange(0, 3)
    choices = [1.0, 1.0 + 3e-5, 1.0 + 1e-3, 1.5, 0.999]
    rows = [
        [generator.choice(choices) if generator.random() < 0.3 else 1.0 + generator.random() * 10 ** -generator.randrange(0, 7)
         for _ in range(1 + workers + extra)]
        for _ in range(generator.randrange(1, 200))
    ]
    table = np.array(rows, dtype=np.float64)
    return (table[:, extra:] if generator.random() < 0.5 else np.ascontiguousarray(table[:, : 1 + workers])), workers


@pytest.mark.parametrize("step_core", ["compiled"], indirect=True)  # it runs both itself: once is enough
def test_both_counts_of_whole_steps_give_the_same_figures_for_the_same_random_tables(step_core):
    count_in_c = whole_steps_counter()
    for seed in range(300):
        table, workers = _steps_table(seed)
        several = workers > 1
        assert count_in_c(table, several, WAIT_BOUNDS_SECONDS, workers) == whole_steps_in_python(
            table, several, WAIT_BOUNDS_SECONDS, workers
        ), f"seed {seed}"


def test_the_count_of_whole_steps_in_c_refuses_a_table_that_is_not_float64_of_the_workers_columns():
    extension = timed_calls.extension()
    if extension is None:
        pytest.skip(timed_calls.unavailable_reason)
    with pytest.raises(TypeError):
        extension.count_whole_steps(np.zeros((3, 3), dtype=np.int64), True, WAIT_BOUNDS_SECONDS, 2)
    with pytest.raises(TypeError):
        extension.count_whole_steps(np.zeros((3, 4)), True, WAIT_BOUNDS_SECONDS, 2)


def test_a_profiled_managers_critical_path_counts_with_the_implementation_in_force(step_core):
    from envmanager import SubprocessEnvManager
    from envmanager_testenvs import CountingEnv

    with SubprocessEnvManager([CountingEnv] * 2) as envs:
        assert envs._profiling.critical_path.count_whole_steps is whole_steps_counter()
        envs.reset(seed=0)
        for _ in range(FOLD_AT_RUNS + 3):
            envs.step(np.zeros(2, dtype=np.int64))
        envs._profiling.step_block.fold()
        assert envs._profiling.critical_path.vector_steps == [FOLD_AT_RUNS + 3] * 2
        assert sum(envs._profiling.critical_path.last_to_reply) == FOLD_AT_RUNS + 3
