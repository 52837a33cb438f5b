"""Specification of PhasedBlock: a block and its consecutive phases timed from the caller's clock
stamps leave exactly the tree the nested ``with`` blocks would."""

from __future__ import annotations

import pytest

import profiler
from profiler import events, get_timer_tree, hierarchical_timer, timers
from profiler.timers import PhasedBlock
from tree_paths import child_names, find

PHASES = ("send", "wait", "receive")
DURATIONS = (0.25, 1.5, 0.5)


def run_with_blocks(clock, durations=DURATIONS, failing_phase: int | None = None) -> None:
    """One run of the block as nested ``with`` blocks, each phase lasting its duration."""
    with pytest.raises(RuntimeError) if failing_phase is not None else _nothing():
        with hierarchical_timer("step"):
            for index, (name, seconds) in enumerate(zip(PHASES, durations)):
                with hierarchical_timer(name):
                    clock.advance(seconds)
                    if index == failing_phase:
                        raise RuntimeError("failed in a phase")


def run_phased(block: PhasedBlock, clock, durations=DURATIONS, failing_phase: int | None = None) -> None:
    """The same run timed by ``block`` from stamps, as a hot path does."""
    stamp = block.open()
    assert stamp is not None
    ends: list[float | None] = [None, None]
    for index, seconds in enumerate(durations):
        clock.advance(seconds)
        if index == failing_phase:
            block.fail(*ends)
            return
        if index < 2:
            ends[index] = stamp()
    block.close(*ends)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        return None


def tree_after(run) -> dict:
    timers.reset_timers()
    run()
    tree = get_timer_tree()
    tree.pop("metadata", None)
    return tree


def test_phased_runs_leave_the_tree_of_nested_with_blocks(fake_clock):
    block = PhasedBlock("step", PHASES)

    def with_blocks() -> None:
        for factor in (1.0, 3.0, 0.5):
            run_with_blocks(fake_clock, [seconds * factor for seconds in DURATIONS])

    def phased() -> None:
        for factor in (1.0, 3.0, 0.5):
            run_phased(block, fake_clock, [seconds * factor for seconds in DURATIONS])

    expected = tree_after(with_blocks)
    assert tree_after(phased) == expected
    step = find(expected, "step")
    assert child_names(step) == list(PHASES)
    assert step["count"] == 3 and step["min"] == pytest.approx(1.125) and step["max"] == pytest.approx(6.75)


@pytest.mark.parametrize("failing_phase", [0, 1, 2])
def test_a_failed_run_counts_as_an_exception_leaving_that_phase_would(fake_clock, failing_phase):
    # After a run that succeeded: a phased block makes the nodes of all its phases on its first run.
    block = PhasedBlock("step", PHASES)

    def with_blocks() -> None:
        run_with_blocks(fake_clock)
        run_with_blocks(fake_clock, failing_phase=failing_phase)

    def phased() -> None:
        run_phased(block, fake_clock)
        run_phased(block, fake_clock, failing_phase=failing_phase)

    expected = tree_after(with_blocks)
    assert tree_after(phased) == expected
    assert find(expected, "step", PHASES[failing_phase])["errors"] == 1


def test_blocks_opened_while_it_is_open_nest_under_it(fake_clock):
    block = PhasedBlock("step", PHASES)
    stamp = block.open()
    with hierarchical_timer("inside"):
        fake_clock.advance(1.0)
    sent = stamp()
    block.close(sent, sent)
    tree = get_timer_tree()
    assert find(tree, "step", "inside")["total"] == 1.0
    assert timers.get_timer_root().name == "root"
    with hierarchical_timer("after"):
        pass
    assert child_names(get_timer_tree()) == ["step", "after"]  # the block closed: siblings again


def test_its_nodes_hang_under_whichever_block_is_open_at_each_run(fake_clock):
    block = PhasedBlock("step", PHASES)
    for outer, seconds in (("train", 1.0), ("evaluate", 2.0), ("train", 4.0)):
        with hierarchical_timer(outer):
            run_phased(block, fake_clock, (seconds, 0.0, 0.0))
    tree = get_timer_tree()
    assert find(tree, "train", "step", "send")["total"] == 5.0
    assert find(tree, "evaluate", "step", "send")["total"] == 2.0
    assert block.node is timers.get_timer_root().children["train"].children["step"]


def test_it_is_not_opened_while_timing_is_off():
    block = PhasedBlock("step", PHASES)
    profiler.disable()
    assert block.open() is None
    profiler.enable()
    assert block.open() is not None


def test_it_is_not_opened_while_a_timeline_is_recorded_so_the_caller_uses_with_blocks():
    block = PhasedBlock("step", PHASES)
    events.start_recording()
    try:
        assert not timers.plain_blocks
        assert block.open() is None
    finally:
        events.stop_recording()
        events.clear_recording()
    assert timers.plain_blocks
