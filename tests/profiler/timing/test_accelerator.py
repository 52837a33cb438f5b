"""The C accelerator of the hot path: its clock, forcing it off, falling back without it, and the
same trees from both cores for any program of blocks."""

from __future__ import annotations

import inspect
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import profiler
from block_programs import Block, SteppedClock, programs, run_program
from profiler.recording import events
from profiler.timing import accelerator, block_hooks, timer_node, timers

REPOSITORY = Path(__file__).resolve().parents[3]

needs_accelerator = pytest.mark.skipif(
    accelerator.extension is None, reason=f"C accelerator not loaded: {accelerator.unavailable_reason}"
)


@pytest.fixture
def timer_core() -> str:
    """These tests choose their cores themselves: run once, not once per core (see conftest.py)."""
    return "compiled" if timer_node.accelerated() else "python"


@needs_accelerator
def test_blocks_run_the_accelerator_where_it_is_built():
    assert profiler.timing.accelerated()
    assert timer_node.TimerNode.__enter__ is timer_node.COMPILED_ENTER
    assert timer_node.TimerNode.__exit__ is timer_node.COMPILED_EXIT


@needs_accelerator
def test_while_the_timeline_records_blocks_run_the_accelerators_recording_exit():
    events.start_recording()
    try:
        assert timer_node.TimerNode.__exit__ is timer_node.COMPILED_RECORDING_EXIT
        assert timers.span_blocks
    finally:
        events.stop_recording()
        events.clear_recording()
    assert timer_node.TimerNode.__exit__ is timer_node.COMPILED_EXIT


@needs_accelerator
def test_the_accelerator_reads_the_clock_time_perf_counter_reads():
    assert accelerator.extension.reads_system_clock()
    readers = (time.perf_counter, accelerator.extension.now) * 2000
    readings = [read() for read in readers]
    assert readings == sorted(readings)  # one clock: interleaved readings never go back


@needs_accelerator
def test_set_clock_routes_the_accelerators_readings_through_the_given_clock(fake_clock):
    assert not accelerator.extension.reads_system_clock()
    assert accelerator.extension.now() == fake_clock.time


@needs_accelerator
def test_on_the_accelerator_a_node_binds_its_methods_once_so_a_block_allocates_nothing():
    with timers.hierarchical_timer("block") as node:
        pass
    assert node.__enter__ is node.__enter__ and node.__exit__ is node.__exit__
    with node:
        pass
    assert node.count == 2


@needs_accelerator
def test_the_accelerators_methods_called_through_the_class_time_the_node_given(fake_clock):
    node = timers.current_thread_stack().root.get_child("block")
    timer_node.TimerNode.__enter__(node)
    fake_clock.advance(3.0)
    timer_node.TimerNode.__exit__(node, ValueError, ValueError(), None)
    assert (node.total, node.count, node.errors) == (3.0, 1, 1)
    with pytest.raises(TypeError, match="TimerNode"):
        timer_node.TimerNode.__enter__(object())


@needs_accelerator
def test_on_the_accelerator_hierarchical_timer_is_the_python_function_with_its_common_case_in_c():
    accelerated_function = timers.hierarchical_timer
    assert profiler.hierarchical_timer is accelerated_function
    assert accelerated_function.__wrapped__ is timers.python_hierarchical_timer
    assert inspect.signature(accelerated_function) == inspect.signature(timers.python_hierarchical_timer)
    assert accelerated_function.__doc__ == timers.python_hierarchical_timer.__doc__
    assert pickle.loads(pickle.dumps(accelerated_function)) is accelerated_function


@needs_accelerator
def test_the_compiled_lookup_gives_the_node_the_python_function_gives():
    with timers.hierarchical_timer("outer") as outer:
        with timers.hierarchical_timer("inner"):
            pass
        assert timers.hierarchical_timer("inner") is timers.python_hierarchical_timer("inner")
    assert timers.hierarchical_timer("outer") is outer
    timers.disable()
    assert timers.hierarchical_timer("outer") is timers.python_hierarchical_timer("outer") is not outer


def run_python(script: str, cwd: Path | None = None, **environment: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


CORE_REPORT = """
import json, profiler
from profiler.timing import accelerator, block_hooks, timer_node
try:
    block_hooks.use_compiled_core(True)
    refused = ""
except RuntimeError as error:
    refused = str(error)
print(json.dumps({
    "accelerated": profiler.timing.accelerated(),
    "python_methods": timer_node.TimerNode.__enter__ is timer_node.PYTHON_ENTER,
    "metadata": profiler.get_timer_tree()["metadata"]["timer_core"],
    "reason": accelerator.unavailable_reason,
    "refused": refused,
}))
"""


def test_rlprof_pure_python_forces_the_python_core_and_the_dump_says_so():
    report = json.loads(run_python(CORE_REPORT, RLPROF_PURE_PYTHON="1"))
    assert report["accelerated"] is False and report["python_methods"] is True
    assert report["metadata"] == "python"
    assert report["reason"] == "RLPROF_PURE_PYTHON is set"
    assert report["refused"] == "the C accelerator is not loaded: RLPROF_PURE_PYTHON is set"


def test_where_the_accelerator_was_not_built_the_python_core_runs_and_says_why(tmp_path):
    shutil.copytree(REPOSITORY / "profiler", tmp_path / "profiler",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    # From the copy's folder, which comes first on the path: its profiler, not the checkout's.
    report = json.loads(run_python(CORE_REPORT, cwd=tmp_path, PYTHONPATH=str(tmp_path), RLPROF_PURE_PYTHON=""))
    assert report["accelerated"] is False and report["metadata"] == "python"
    assert report["reason"].startswith("the C accelerator was not built here")


def tree_under(compiled: bool, program: list[Block], start, step, record: bool = False) -> str:
    """The tree ``program`` leaves, timed by one core, as text that tells 1 from 1.0; with
    ``record``, timeline recording on, and the spans the blocks recorded too."""
    block_hooks.use_compiled_core(compiled)
    clock = SteppedClock(start, step)
    previous = timers.set_clock(clock)
    if record:
        events.start_recording()
    try:
        timers.reset_timers()
        run_program(program, clock)
        stack = timers.current_thread_stack()
        assert stack.current is stack.root
        if not record:
            return repr(stack.root.to_dict())
        assert timer_node.TimerNode.__exit__ is timer_node.RECORDING_EXIT
        return repr((stack.root.to_dict(), list(stack.timeline.spans), stack.timeline.spans_recorded))
    finally:
        if record:
            events.stop_recording()
            events.clear_recording()
        timers.set_clock(previous)


@needs_accelerator
@settings(max_examples=150, deadline=None)
@given(
    program=programs(),
    clock_start_and_step=st.sampled_from(
        [(1000.0, 0.1), (1000.0, 1e-7), (1000, 1), (Fraction(1000), Fraction(1, 3))]
    ),
)
def test_both_cores_leave_the_same_tree_for_any_program_of_blocks(program, clock_start_and_step):
    start, step = clock_start_and_step
    default = timer_node.accelerated()
    try:
        assert tree_under(True, program, start, step) == tree_under(False, program, start, step)
    finally:
        block_hooks.use_compiled_core(default)


@needs_accelerator
@settings(max_examples=100, deadline=None)
@given(
    program=programs(),
    clock_start_and_step=st.sampled_from([(1000.0, 0.1), (1000, 1), (Fraction(1000), Fraction(1, 3))]),
)
def test_while_the_timeline_records_both_cores_record_the_same_spans_for_any_program_of_blocks(
    program, clock_start_and_step
):
    start, step = clock_start_and_step
    default = timer_node.accelerated()
    try:
        assert (tree_under(True, program, start, step, record=True)
                == tree_under(False, program, start, step, record=True))
    finally:
        block_hooks.use_compiled_core(default)
