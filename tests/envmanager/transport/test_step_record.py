"""The trainer's profiled vector step as one record (envmanager.transport.step_stamps.step_record):
opened, stamped, closed or failed, its runs in the step block's nodes and its whole steps on the
critical path, on both implementations (the C helper's StepRecord and its Python reference, see
tests/envmanager/step_cores.py), and a property test that drives both with the same random steps
and compares the trees and the critical paths they leave."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from profiler import get_timer_tree
from profiler.timing import block_hooks, timers
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
    block = PhasedBlock("env_manager.step", PHASES, lambda runs: critical_path.count_steps(runs[:, 4:]))
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


def test_while_the_timeline_records_a_step_records_the_spans_of_its_with_blocks(fake_clock, recording):
    record, block, critical_path, ready_at = _record(1)
    node = record.open()
    assert node is not None
    fake_clock.advance(2.0)
    record.sent()
    fake_clock.advance(3.0)
    record.waited()
    fake_clock.advance(1.0)
    ready_at[0] = 1e9
    record.close()
    block.fold()
    assert timers.current_thread_stack().timeline.span_rows() == [
        ["send_actions", 1000.0, 1002.0],
        ["wait_for_workers", 1002.0, 1005.0],
        ["receive_results", 1005.0, 1006.0],
        ["env_manager.step", 1000.0, 1006.0],
    ]
    assert (node.count, node.total) == (1, 6.0)
    assert critical_path.vector_steps == [1]


def test_while_the_timeline_records_a_failed_step_records_the_spans_of_the_phases_reached(fake_clock, recording):
    record, _, _, _ = _record(1)
    record.open()
    fake_clock.advance(1.0)
    record.sent()
    fake_clock.advance(4.0)
    record.fail()
    assert list(timers.current_thread_stack().timeline.spans) == [
        ("send_actions", 1000.0, 1001.0),
        ("wait_for_workers", 1001.0, 1005.0),
        ("env_manager.step", 1000.0, 1005.0),
    ]


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


def _run_steps(make_record, program: list[tuple], seed: int, recording: bool = False) -> tuple:
    generator = random.Random(seed)
    clock = SteppingClock([generator.random() * 0.01 for _ in range(7)])
    previous = timers.set_clock(clock)
    timers.reset_timers()
    try:
        stack = timers.current_thread_stack()
        workers = len(program[0][1])
        critical_path = CriticalPath(workers, stack)
        critical_path.count_whole_steps = whole_steps_counter()
        block = PhasedBlock("env_manager.step", PHASES, lambda runs: critical_path.count_steps(runs[:, 4:]))
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
        if recording:
            return _tree(stack.root), critical_path, stack.timeline.span_rows()
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


@pytest.mark.parametrize("step_core", ["compiled"], indirect=True)  # it runs both itself: once is enough
def test_while_the_timeline_records_both_implementations_record_the_same_spans_for_the_same_random_steps(
    step_core, recording
):
    for seed in range(100):
        program = _steps_program(seed)
        compiled_tree, _, compiled_spans = _run_steps(step_record, program, seed, recording=True)
        reference_tree, _, reference_spans = _run_steps(StepRecordInPython, program, seed, recording=True)
        _assert_same_tree(compiled_tree, reference_tree)
        assert compiled_spans == reference_spans, f"seed {seed}"


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


# --- a real manager while the timeline records: the spans of its `with` blocks --------------------

STEPS = 40


def _trainer_spans(tree: dict) -> list[list]:
    """The spans of the trainer's main thread in ``tree``'s timeline."""
    threads = tree["timeline"]["processes"][0]["threads"]
    return next(thread["spans"] for thread in threads if thread["name"] == "MainThread")


def _span_lengths(spans: list[list]) -> dict[tuple[str, ...], list[float]]:
    """Each span's length under its path of enclosing span names (outermost first), the nesting a
    trace viewer draws: spans by start, the enclosing one first, each inside the last still open."""
    lengths: dict[tuple[str, ...], list[float]] = {}
    open_spans: list[tuple[float, tuple[str, ...]]] = []
    for name, start, end, *_ in sorted(spans, key=lambda span: (span[1], -span[2])):
        while open_spans and open_spans[-1][0] <= start and open_spans[-1][0] < end:
            open_spans.pop()
        path = (open_spans[-1][1] if open_spans else ()) + (name,)
        lengths.setdefault(path, []).append(end - start)
        open_spans.append((end, path))
    return lengths


def _span_paths(spans: list[list]) -> Counter:
    """How many spans have each path of enclosing span names."""
    return Counter({path: len(lengths) for path, lengths in _span_lengths(spans).items()})


def _manager_steps(with_blocks: bool, dump_after: int | None = None) -> tuple[dict, bool]:
    """A recorded run of a real two-worker manager's steps: the tree dumped after ``dump_after``
    steps (else after all), and whether the steps went through the phased block. ``with_blocks``
    forces them through ``with`` blocks: a companion that watches every block and does nothing."""
    from envmanager import SubprocessEnvManager
    from envmanager_testenvs import CountingEnv

    timers.reset_timers()
    if with_blocks:
        block_hooks.observe_blocks(lambda node: None, None, companion="test")
    try:
        with SubprocessEnvManager([CountingEnv] * 2) as envs:
            envs.reset(seed=0)
            for step in range(STEPS):
                if step == dump_after:
                    break
                envs.step(np.zeros(2, dtype=np.int64))
            return get_timer_tree(), envs._profiling.step_block.node is not None
    finally:
        block_hooks.observe_blocks(None, None, companion="test")


def test_a_real_managers_phased_steps_record_the_spans_its_with_blocks_record(recording):
    phased_tree, phased = _manager_steps(with_blocks=False)
    with_tree, through_phased_block = _manager_steps(with_blocks=True)
    assert phased and not through_phased_block
    paths = _span_paths(_trainer_spans(phased_tree))
    assert paths == _span_paths(_trainer_spans(with_tree))
    assert paths[("env_manager.step",)] == STEPS
    assert paths[("env_manager.step", "wait_for_workers")] == STEPS


def _marks(tree: dict) -> tuple[Counter, Counter]:
    """How many instants and counter samples of each name the trainer's timeline holds."""
    trainer = tree["timeline"]["processes"][0]
    instants = Counter(instant[0] for thread in trainer["threads"] for instant in thread["instants"])
    return instants, Counter(counter[0] for counter in trainer["counters"])


def test_a_real_managers_phased_steps_mark_the_last_worker_of_each_step_as_its_with_blocks_do(recording):
    phased_tree, phased = _manager_steps(with_blocks=False)
    with_tree, _ = _manager_steps(with_blocks=True)
    assert phased
    instants, counters = _marks(phased_tree)
    with_instants, with_counters = _marks(with_tree)
    assert sum(count for name, count in instants.items() if name.startswith("env_manager.last_to_reply")) == STEPS
    assert counters["env_manager.wait_as_last"] == with_counters["env_manager.wait_as_last"] == STEPS
    assert sum(instants.values()) == sum(with_instants.values())


def test_a_real_managers_phased_steps_record_spans_that_add_up_to_its_tree(recording):
    tree, phased = _manager_steps(with_blocks=False)
    assert phased
    step = next(child for child in tree["children"] if child["name"] == "env_manager.step")
    spans = _span_lengths(_trainer_spans(tree))
    for path, node in [(("env_manager.step",), step)] + [(("env_manager.step", phase["name"]), phase) for phase in step["children"]]:
        lengths = spans[path]
        assert len(lengths) == node["count"] == STEPS
        assert sum(lengths) == pytest.approx(node["total"], rel=1e-9)
        assert (min(lengths), max(lengths)) == (node["min"], node["max"])


def test_a_dump_in_the_middle_of_a_real_managers_run_has_the_spans_of_every_step_so_far(recording):
    tree, phased = _manager_steps(with_blocks=False, dump_after=7)
    assert phased
    assert _span_paths(_trainer_spans(tree))[("env_manager.step",)] == 7
