"""Specification of the step an env timed in place gets: whichever way a call is counted (held
and folded while blocks are plain or only the timeline records, a ``with`` block under any other
companion), the tree and the timeline are the same."""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
import pytest

from profiler import get_timer_tree
from profiler.recording import events
from profiler.timing import block_hooks, timers

from envmanager.instrumentation.timed_env import instrument_env
from step_cores import step_core  # noqa: F401  (both step timers: the C helper, the Python reference)


class ClockedEnv(gym.Env):
    """A quarter of a second of the fake clock per step, a block of its own inside, and a
    failure on action 9."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock

    def step(self, action: int) -> tuple:
        with timers.hierarchical_timer("physics"):
            self.clock.advance(0.25)
        if action == 9:
            raise ValueError("bad action")
        return action, 0.0, False, False, {}


def run_steps(clock: Any) -> tuple[list, dict, list]:
    """Three steps and a failing one under ``vector.step``: what they returned, the figures of
    their block, their spans and those of the env's own blocks on the timeline."""
    env = ClockedEnv(clock)
    instrument_env(env, None)
    results = []
    with timers.hierarchical_timer("vector.step"):
        for action in (0, 1, 2):
            results.append(env.step(action))
            clock.advance(0.5)
        with pytest.raises(ValueError, match="bad action"):
            env.step(9)
    tree = get_timer_tree()
    threads = tree["timeline"]["processes"][0]["threads"]
    # As every reader orders a thread's spans: by start, the enclosing span first (held runs add
    # their spans to the ring as they fold, after the env's own blocks inside them).
    spans = sorted((span for thread in threads for span in thread["spans"] if span[0] in ("env.step", "physics")),
                   key=lambda span: (span[1], -span[2]))
    node = timers.get_timer_root().children["vector.step"].children["env.step"]
    figures = {"total": node.total, "count": node.count, "errors": node.errors, "min": node.min, "max": node.max,
               "physics": node.children["physics"].count}
    return results, figures, spans


@pytest.fixture
def recording():
    events.clear_recording()
    events.start_recording(capacity=100)
    yield
    events.stop_recording()
    events.clear_recording()


def test_while_only_the_timeline_records_a_step_is_counted_as_a_with_block_counts_it(fake_clock, recording):
    assert timers.span_blocks  # the step's own frame counts it
    counted_here = run_steps(fake_clock)
    timers.reset_timers()
    events.clear_recording()
    events.start_recording(capacity=100)
    block_hooks.set_exit_hook(lambda node: None)  # another companion: every step is a with block
    try:
        assert not timers.span_blocks
        with_blocks = run_steps(fake_clock)
    finally:
        block_hooks.set_exit_hook(None)
    assert counted_here[0] == with_blocks[0]
    assert counted_here[1] == with_blocks[1]
    assert _shifted(counted_here[2], 2.5) == with_blocks[2]  # the second run began 2.5 s later


def _shifted(spans: list, seconds: float) -> list:
    return [[name, start + seconds, end + seconds, *rest] for name, start, end, *rest in spans]


def test_a_step_counted_in_its_own_frame_has_its_figures_its_span_and_the_envs_blocks_inside(fake_clock, recording):
    _, step_block, spans = run_steps(fake_clock)
    assert step_block["count"] == 4 and step_block["errors"] == 1 and step_block["physics"] == 4
    assert step_block["total"] == 1.0 and step_block["min"] == step_block["max"] == 0.25
    env_spans = [span for span in spans if span[0] == "env.step"]
    assert [span[1:3] for span in env_spans] == [[1000.0, 1000.25], [1000.75, 1001.0], [1001.5, 1001.75],
                                                 [1002.25, 1002.5]]
    assert timers.get_timer_stack_for_thread(threading.current_thread()).current.name == "root"
