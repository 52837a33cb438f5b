"""The trainer's profiled vector step as one record (envmanager.transport.step_stamps.step_record):
opened, stamped, closed or failed, its runs in the step block's nodes and its whole steps on the
critical path, on both implementations (the C helper's StepRecord and its Python reference, see
tests/envmanager/step_cores.py), and a property test that drives both with the same random steps
and compares the trees and the critical paths they leave."""

from __future__ import annotations

import random

import pytest

from profiler.timing import timers
from profiler.timing.phased_block import FOLD_AT_RUNS, PhasedBlock
from profiler.timing.timer_node import TimerNode

from envmanager.measurement.critical_path import WAIT_BOUNDS_SECONDS, CriticalPath
from envmanager.transport import timed_calls
from envmanager.transport.step_stamps import StepRecordInPython, step_record, whole_steps_counter
from step_cores import step_core  # noqa: F401  (an autouse fixture, parametrised by implementation)

PHASES = ("send_actions", "wait_for_workers", "receive_results")


class SteppingClock:
    """A fake clock that moves by the next of ``steps`` seconds at each reading."""

    def __init__(self, steps: list[float], start: float = 100.0) -> None:
        self.time = start
        self.steps = list(steps)

    def __call__(self) -> float:
        self.time += self.steps[0]
        self.steps.append(self.steps.pop(0))
        return self.time


def _record(workers: int) -> tuple:
    """A step record, its block, its critical path and the list of reply stamps it closes with."""
    stack = timers.current_thread_stack()
    critical_path = CriticalPath(workers, stack)
    critical_path.count_whole_steps = whole_steps_counter()
    block = PhasedBlock("env_manager.step", PHASES, critical_path.count_steps)
    ready_at: list = [None] * workers
    record = step_record(block, ready_at, WAIT_BOUNDS_SECONDS, critical_path.add_whole_steps)
    return record, block, critical_path, ready_at


def _one_step(record, fake_clock, ready_at: list) -> None:
    """A whole step of one worker that took a second and replied as the wait ended."""
    record.open()
    record.sent()
    record.waited()
    fake_clock.advance(1.0)
    ready_at[0] = fake_clock()
    record.close()


def test_the_record_in_force_is_the_one_asked_for(step_core):
    record, block, _, _ = _record(2)
    assert isinstance(record, StepRecordInPython) is (step_core == "python")
    assert (block.accumulator is record) is (step_core == "compiled")


def test_a_step_opened_is_the_open_block_under_the_block_that_was_open(fake_clock):
    record, block, _, _ = _record(1)
    stack = timers.current_thread_stack()
    node = record.open()
    assert stack.current is node is block.node is stack.root.children["env_manager.step"]
    assert node._start == 1000.0


def test_a_step_closed_counts_the_step_and_its_phases_and_reopens_the_parent(fake_clock):
    record, block, critical_path, ready_at = _record(2)
    stack = timers.current_thread_stack()
    node = record.open()
    fake_clock.advance(2.0)
    record.sent()
    fake_clock.advance(3.0)
    record.waited()
    fake_clock.advance(2.0)
    # The trainer began waiting on time.perf_counter (the workers' clock), long before these stamps.
    ready_at[:] = [1e9 + 1.0, 1e9]
    record.close()
    assert stack.current is stack.root
    block.fold()
    assert (node.count, node.total) == (1, 7.0)
    assert [(phase.count, phase.total) for phase in node.children.values()] == [(1, 2.0), (1, 3.0), (1, 2.0)]
    # Worker 0 was last, one second after worker 1: it alone decided that second of the wait.
    assert critical_path.vector_steps == [1, 1] and critical_path.last_to_reply == [1, 0]
    assert critical_path.wait_as_last == [1.0, 0.0]


def test_a_step_some_worker_did_not_reply_in_counts_for_the_others_only(fake_clock):
    record, block, critical_path, ready_at = _record(2)
    record.open()
    record.sent()
    fake_clock.advance(1.0)
    record.waited()
    ready_at[:] = [1000.5, None]
    record.close()
    block.fold()
    assert block.node.count == 1
    assert critical_path.vector_steps == [1, 0] and critical_path.last_to_reply == [1, 0]


def test_the_runs_fold_into_the_nodes_once_there_are_fold_at_runs(fake_clock):
    record, block, critical_path, ready_at = _record(1)
    for _ in range(FOLD_AT_RUNS):
        _one_step(record, fake_clock, ready_at)
    assert block.node.count == FOLD_AT_RUNS and block.runs == []
    assert critical_path.vector_steps == [FOLD_AT_RUNS]


def test_every_reader_of_the_tree_sees_the_steps_not_yet_folded(fake_clock):
    record, block, _, ready_at = _record(1)
    _one_step(record, fake_clock, ready_at)
    assert timers.get_timer_root().children["env_manager.step"].count == 1


def test_a_failed_step_counts_the_phases_reached_and_an_error(fake_clock):
    record, block, critical_path, _ = _record(1)
    node = record.open()
    fake_clock.advance(1.0)
    record.sent()
    fake_clock.advance(4.0)
    record.fail()
    assert timers.current_thread_stack().current is timers.current_thread_stack().root
    send, wait, receive = node.children.values()
    assert (node.count, node.errors, node.total) == (1, 1, 5.0)
    assert (send.count, send.errors, wait.count, wait.errors, receive.count) == (1, 0, 1, 1, 0)
    assert critical_path.vector_steps == [0]


def test_a_reset_of_the_timers_forgets_the_steps_not_yet_folded(fake_clock):
    record, block, critical_path, ready_at = _record(1)
    _one_step(record, fake_clock, ready_at)
    timers.reset_timers()
    block.fold()
    assert "env_manager.step" not in timers.get_timer_root().children
    assert critical_path.vector_steps == [0]


def test_no_step_is_opened_while_blocks_cannot_be_timed_from_stamps(fake_clock):
    record, block, _, _ = _record(1)
    timers.disable()
    assert record.open() is None
    assert block.node is None


def _steps_program(seed: int) -> list[tuple]:
    """Random steps: each its reply stamps (a None: a worker that did not reply), some steps
    nested under another open block, some failing before or after their wait."""
    generator = random.Random(seed)
    workers = generator.randrange(1, 5)
    program = []
    for _ in range(generator.randrange(1, 60)):
        ready_at = [None if generator.random() < 0.1 else 100.0 + generator.random() for _ in range(workers)]
        fails = generator.choice([None] * 8 + ["sending", "receiving"])
        program.append((generator.random() < 0.2, ready_at, fails))
    return program


def _run_steps(make_record, program: list[tuple], seed: int) -> tuple:
    generator = random.Random(seed)
    clock = SteppingClock([generator.random() * 0.01 for _ in range(7)])
    previous = timers.set_clock(clock)
    timers.reset_timers()
    try:
        stack = timers.current_thread_stack()
        workers = len(program[0][1])
        critical_path = CriticalPath(workers, stack)
        critical_path.count_whole_steps = whole_steps_counter()
        block = PhasedBlock("env_manager.step", PHASES, critical_path.count_steps)
        stamps: list = [None] * workers
        record = make_record(block, stamps, WAIT_BOUNDS_SECONDS, critical_path.add_whole_steps)
        for nested, ready_at, fails in program:
            outer = timers.hierarchical_timer("outer") if nested else None
            if outer is not None:
                outer.__enter__()
            record.open()
            if fails == "sending":
                record.fail()
            else:
                record.sent()
                record.waited()
                if fails == "receiving":
                    record.fail()
                else:
                    stamps[:] = ready_at
                    record.close()
            if outer is not None:
                outer.__exit__(None, None, None)
        assert stack.current is stack.root
        stack.settle()
        return _tree(stack.root), critical_path
    finally:
        timers.set_clock(previous)


def _tree(node: TimerNode) -> tuple:
    return (node.name, node.total, node.count, node.errors, node.min, node.max,
            tuple(_tree(child) for child in node.children.values()))


def _assert_same_tree(compiled: tuple, reference: tuple) -> None:
    """The same nodes with the same counts, errors and extremes; totals summed in another order,
    so equal to the last bits of a double."""
    assert compiled[0] == reference[0]
    assert compiled[1] == pytest.approx(reference[1], rel=1e-12, abs=1e-15)
    assert compiled[2:6] == reference[2:6]
    assert len(compiled[6]) == len(reference[6])
    for mine, theirs in zip(compiled[6], reference[6]):
        _assert_same_tree(mine, theirs)


@pytest.mark.parametrize("step_core", ["compiled"], indirect=True)  # it runs both itself: once is enough
def test_both_implementations_leave_the_same_tree_and_critical_path_for_the_same_random_steps(step_core):
    for seed in range(200):
        program = _steps_program(seed)
        compiled_tree, compiled_path = _run_steps(step_record, program, seed)
        reference_tree, reference_path = _run_steps(StepRecordInPython, program, seed)
        _assert_same_tree(compiled_tree, reference_tree)
        assert compiled_path.vector_steps == reference_path.vector_steps, f"seed {seed}"
        assert compiled_path.histograms == reference_path.histograms, f"seed {seed}"
        assert compiled_path.wait_as_last == pytest.approx(reference_path.wait_as_last, rel=1e-12, abs=1e-15)


def test_the_record_in_c_refuses_what_is_not_a_phased_block_and_a_close_before_its_stamps():
    extension = timed_calls.extension()
    if extension is None:
        pytest.skip(timed_calls.unavailable_reason)
    with pytest.raises(TypeError):
        extension.StepRecord(object(), [None], WAIT_BOUNDS_SECONDS, None)
    with pytest.raises(TypeError):
        extension.StepRecord(PhasedBlock("b", PHASES), (None,), WAIT_BOUNDS_SECONDS, None)
    ready_at = [1.0, 2.0]
    record = extension.StepRecord(PhasedBlock("b", PHASES), ready_at, WAIT_BOUNDS_SECONDS, None)
    record.open()
    with pytest.raises(TypeError):
        record.close()  # neither sent() nor waited()
    record.sent()
    record.waited()
    ready_at.append(3.0)  # a stamp per worker, no more
    with pytest.raises(TypeError):
        record.close()
