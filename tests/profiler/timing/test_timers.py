"""Specification of the hierarchical timers: tree shape, timing, errors, gauges, threads, fork."""

from __future__ import annotations

import gc
import inspect
import math
import multiprocessing
import os
import subprocess
import sys
import threading
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import profiler
from profiler import (
    get_timer_root,
    get_timer_stack_for_thread,
    get_timer_tree,
    hierarchical_timer,
    set_gauge,
    timed,
)
from profiler.multiprocess.merge import TimerMerger
from profiler.timing.timers import TimerNode, TimerStack, all_timer_stacks
from tree_paths import child_names, find


# --- tree shape -------------------------------------------------------------------------------


def test_nested_blocks_build_a_tree(fake_clock):
    with hierarchical_timer("outer"):
        with hierarchical_timer("inner"):
            pass
    tree = get_timer_tree()
    assert child_names(tree) == ["outer"]
    assert child_names(find(tree, "outer")) == ["inner"]


def test_same_name_under_different_parents_is_a_different_node(fake_clock):
    with hierarchical_timer("a"):
        with hierarchical_timer("shared"):
            fake_clock.advance(1.0)
    with hierarchical_timer("b"):
        with hierarchical_timer("shared"):
            fake_clock.advance(2.0)
    tree = get_timer_tree()
    assert find(tree, "a", "shared")["total"] == 1.0
    assert find(tree, "b", "shared")["total"] == 2.0


def test_repeated_entries_accumulate_total_and_count(fake_clock):
    for seconds in (0.5, 1.5, 2.0):
        with hierarchical_timer("step"):
            fake_clock.advance(seconds)
    step = find(get_timer_tree(), "step")
    assert step["total"] == 4.0
    assert step["count"] == 3


def test_recursion_nests_one_node_per_level(fake_clock):
    @timed
    def countdown(depth: int) -> None:
        fake_clock.advance(1.0)
        if depth:
            countdown(depth - 1)

    countdown(2)
    name = countdown.__qualname__
    tree = get_timer_tree()
    assert find(tree, name)["total"] == 3.0
    assert find(tree, name, name)["total"] == 2.0
    assert find(tree, name, name, name)["total"] == 1.0


def test_entering_a_known_block_reuses_its_node():
    with hierarchical_timer("step") as first:
        pass
    with hierarchical_timer("step") as second:
        pass
    assert first is second
    assert first.count == 2


def test_as_gives_the_node_of_the_block(fake_clock):
    with hierarchical_timer("block") as node:
        fake_clock.advance(0.25)
    assert node.name == "block"
    assert node.total == 0.25


def test_blocks_opened_after_a_block_closes_are_siblings(fake_clock):
    with hierarchical_timer("first"):
        pass
    with hierarchical_timer("second"):
        pass
    assert child_names(get_timer_tree()) == ["first", "second"]


# --- times ------------------------------------------------------------------------------------


def test_self_time_excludes_the_children(fake_clock):
    with hierarchical_timer("parent"):
        fake_clock.advance(1.0)
        with hierarchical_timer("child"):
            fake_clock.advance(3.0)
    parent = find(get_timer_tree(), "parent")
    assert parent["total"] == 4.0
    assert parent["self"] == 1.0


def test_self_time_is_never_negative(fake_clock):
    with hierarchical_timer("parent") as parent:
        with hierarchical_timer("child") as child:
            fake_clock.advance(1.0)
    child.total = 1.5  # as clock granularity can make it
    assert parent.self_time == 0.0
    assert find(get_timer_tree(), "parent")["self"] == 0.0


def test_parallel_children_do_not_count_against_self_time(fake_clock):
    with hierarchical_timer("vector step") as step:
        fake_clock.advance(2.0)
    workers = step.get_child("env.step")
    workers.total, workers.count, workers.is_parallel = 7.0, 4, True
    node = find(get_timer_tree(), "vector step")
    assert node["self"] == 2.0
    assert find(node, "env.step")["is_parallel"] is True


def test_is_parallel_is_absent_on_ordinary_blocks(fake_clock):
    with hierarchical_timer("block"):
        pass
    assert "is_parallel" not in find(get_timer_tree(), "block")


def test_root_total_is_the_wall_time_since_the_stack_started(fake_clock):
    fake_clock.advance(10.0)
    with hierarchical_timer("block"):
        fake_clock.advance(4.0)
    tree = get_timer_tree()
    assert tree["name"] == "root"
    assert tree["total"] == 14.0
    assert tree["count"] == 1
    assert tree["self"] == 10.0


# --- blocks still open as the process ends ---------------------------------------------------


def test_closing_the_open_blocks_times_each_run_up_to_now_and_leaves_the_root_open(fake_clock):
    stack = get_timer_stack_for_thread(threading.current_thread())
    outer = hierarchical_timer("outer").__enter__()
    fake_clock.advance(1.0)
    hierarchical_timer("inner").__enter__()
    fake_clock.advance(2.0)
    stack.close_open_blocks()
    assert stack.current is stack.root
    tree = get_timer_tree()
    assert (find(tree, "outer")["total"], find(tree, "outer")["count"]) == (3.0, 1)
    assert (find(tree, "outer", "inner")["total"], find(tree, "outer", "inner")["count"]) == (2.0, 1)
    assert outer.errors == 0


def test_closing_the_open_blocks_with_none_open_changes_nothing(fake_clock):
    with hierarchical_timer("closed"):
        fake_clock.advance(1.0)
    stack = get_timer_stack_for_thread(threading.current_thread())
    stack.close_open_blocks()
    assert find(get_timer_tree(), "closed")["count"] == 1


# --- exceptions -------------------------------------------------------------------------------


def test_an_exception_closes_the_block_and_propagates_unchanged(fake_clock):
    error = KeyError("missing")
    with pytest.raises(KeyError) as raised:
        with hierarchical_timer("failing"):
            fake_clock.advance(1.0)
            raise error
    assert raised.value is error
    with hierarchical_timer("after"):
        pass
    tree = get_timer_tree()
    assert child_names(tree) == ["failing", "after"]
    assert find(tree, "failing")["total"] == 1.0


def test_an_exception_is_counted_in_the_blocks_errors(fake_clock):
    for attempt in range(3):
        try:
            with hierarchical_timer("flaky"):
                if attempt != 1:
                    raise RuntimeError("boom")
        except RuntimeError:
            pass
    flaky = find(get_timer_tree(), "flaky")
    assert flaky["count"] == 3
    assert flaky["errors"] == 2


def test_errors_is_absent_when_a_block_never_raised(fake_clock):
    with hierarchical_timer("fine"):
        pass
    assert "errors" not in find(get_timer_tree(), "fine")


# --- per-call min and max --------------------------------------------------------------------


def test_each_block_keeps_its_shortest_and_longest_call(fake_clock):
    for seconds in (0.5, 2.0, 1.0):
        with hierarchical_timer("step"):
            fake_clock.advance(seconds)
    step = find(get_timer_tree(), "step")
    assert (step["min"], step["max"], step["total"], step["count"]) == (0.5, 2.0, 3.5, 3)


def test_a_call_that_raises_counts_in_min_and_max(fake_clock):
    with pytest.raises(RuntimeError):
        with hierarchical_timer("flaky"):
            fake_clock.advance(4.0)
            raise RuntimeError("boom")
    with hierarchical_timer("flaky"):
        fake_clock.advance(1.0)
    flaky = find(get_timer_tree(), "flaky")
    assert (flaky["min"], flaky["max"]) == (1.0, 4.0)


def test_a_block_that_never_completed_a_call_has_no_min_or_max(fake_clock):
    with hierarchical_timer("outer"):
        fake_clock.advance(1.0)
        outer = find(get_timer_tree(), "outer")
    assert outer["count"] == 0
    assert "min" not in outer and "max" not in outer


def test_the_root_min_and_max_are_the_run_itself(fake_clock):
    fake_clock.advance(7.0)
    tree = get_timer_tree()
    assert tree["min"] == tree["max"] == tree["total"] == 7.0


def test_reset_forgets_min_and_max(fake_clock):
    with hierarchical_timer("step"):
        fake_clock.advance(9.0)
    profiler.reset_timers()
    with hierarchical_timer("step"):
        fake_clock.advance(1.0)
    assert find(get_timer_tree(), "step")["max"] == 1.0


def test_threads_blocks_keep_their_own_min_and_max(fake_clock):
    def work() -> None:
        for seconds in (0.25, 0.75):
            with hierarchical_timer("download"):
                fake_clock.advance(seconds)

    run_in_thread(work, name="extremes")
    download = find(get_timer_tree(include_threads=True), "thread:ended:extremes", "download")
    assert (download["min"], download["max"]) == (0.25, 0.75)


def test_a_group_of_ended_threads_keeps_the_shortest_and_longest_thread_run(fake_clock):
    runs = iter([1.0, 3.0, 2.0])

    def work() -> None:
        with hierarchical_timer("load"):
            fake_clock.advance(next(runs))

    run_threads(3, work, "loader-{}")
    group = find(get_timer_tree(include_threads=True), "thread:ended:loader-N")
    assert (group["count"], group["total"], group["min"], group["max"]) == (3, 6.0, 1.0, 3.0)


def test_adding_a_tree_keeps_the_extremes_of_both():
    first, second = TimerStack("a"), TimerStack("b")
    first.root.get_child("step").add_runs(3.0, 2, 0, 1.0, 2.0)
    second.root.get_child("step").add_runs(4.0, 2, 0, 0.5, 3.5)
    first.root.add(second.root)
    step = first.root.children["step"]
    assert (step.total, step.count, step.min, step.max) == (7.0, 4, 0.5, 3.5)


def test_adding_a_block_without_calls_leaves_the_extremes_alone():
    stack = TimerStack("a")
    step = stack.root.get_child("step")
    step.add_runs(3.0, 2, 0, 1.0, 2.0)
    step.add_runs(0.5, 0, 0, 0.0, 0.0)  # e.g. a block flushed while open: time, no call yet
    assert (step.min, step.max) == (1.0, 2.0)


# --- @timed -----------------------------------------------------------------------------------


class Policy:
    @timed
    def act(self, observation: int, *, greedy: bool = True) -> int:
        """Pick an action."""
        return observation + 1


def test_timed_names_the_block_by_qualname():
    Policy().act(1)
    assert child_names(get_timer_tree()) == ["Policy.act"]


def test_timed_returns_the_functions_result():
    assert Policy().act(41) == 42


def test_timed_keeps_name_docstring_and_signature():
    assert Policy.act.__name__ == "act"
    assert Policy.act.__doc__ == "Pick an action."
    assert str(inspect.signature(Policy.act)) == "(self, observation: 'int', *, greedy: 'bool' = True) -> 'int'"


def test_timed_accepts_an_explicit_block_name():
    @timed(name="policy.forward")
    def forward() -> None:
        pass

    forward()
    assert child_names(get_timer_tree()) == ["policy.forward"]


def test_timed_blocks_nest_under_the_open_block():
    with hierarchical_timer("update"):
        Policy().act(0)
    assert child_names(find(get_timer_tree(), "update")) == ["Policy.act"]


# --- gauges and metadata ----------------------------------------------------------------------


def test_gauges_keep_latest_min_max_and_count():
    for value in (3.0, 1.0, 5.0, 2.0):
        set_gauge("episode_length", value)
    assert get_timer_tree()["gauges"] == {
        "episode_length": {"value": 2.0, "min": 1.0, "max": 5.0, "count": 4}
    }


class TensorLike:
    """What a torch scalar tensor offers a gauge: a 0-d shape and ``__float__``."""

    shape = ()

    def __init__(self, value: float) -> None:
        self.value = value

    def __float__(self) -> float:
        return self.value


@pytest.mark.parametrize(
    "reading, stored",
    [
        (np.float64(0.25), 0.25),
        (np.float32(0.5), 0.5),
        (np.int64(7), 7.0),
        (np.array(1.5), 1.5),
        (np.bool_(True), 1.0),
        (True, 1.0),
        (3, 3.0),
        (Fraction(1, 4), 0.25),
        (Decimal("2.5"), 2.5),
        (TensorLike(4.0), 4.0),
    ],
)
def test_a_gauge_accepts_any_real_number_type_and_stores_a_python_float(reading, stored):
    set_gauge("reward", reading)
    gauge = get_timer_tree()["gauges"]["reward"]
    assert gauge == {"value": stored, "min": stored, "max": stored, "count": 1}
    assert type(gauge["value"]) is float


@pytest.mark.parametrize(
    "reading, reason",
    [
        ("1.5", "expected a real number, got str"),
        (None, "expected a real number, got NoneType"),
        (1 + 2j, "expected a real number, got complex"),
        (np.complex128(1 + 2j), "expected a real number, got complex128"),
        (np.array([1.0, 2.0]), r"expected one number, got ndarray of shape \(2,\)"),
        (object(), "expected a real number, got object"),
    ],
)
def test_a_gauge_refuses_what_is_not_one_real_number_naming_the_gauge(reading, reason):
    with pytest.raises(TypeError, match=f"gauge 'loss': {reason}"):
        set_gauge("loss", reading)
    assert "loss" not in get_timer_tree()["gauges"]


def test_an_integer_too_large_for_a_float_is_refused_naming_the_gauge():
    with pytest.raises(ValueError, match="gauge 'episodes': int .* too large for a float"):
        set_gauge("episodes", 10**400)


def test_a_nan_reading_becomes_the_value_while_min_and_max_keep_the_range_before_it():
    for reading in (0.5, 0.2, float("nan")):
        set_gauge("loss", reading)
    gauge = get_timer_tree()["gauges"]["loss"]
    assert math.isnan(gauge["value"])
    assert (gauge["min"], gauge["max"], gauge["count"]) == (0.2, 0.5, 3)


def test_min_and_max_are_nan_only_while_every_reading_was():
    set_gauge("loss", float("nan"))
    assert math.isnan(get_timer_tree()["gauges"]["loss"]["min"])
    set_gauge("loss", 2.0)
    assert get_timer_tree()["gauges"]["loss"]["min"] == get_timer_tree()["gauges"]["loss"]["max"] == 2.0


def test_infinities_take_part_in_min_and_max():
    for reading in (1.0, float("inf"), float("-inf")):
        set_gauge("grad_norm", reading)
    gauge = get_timer_tree()["gauges"]["grad_norm"]
    assert (gauge["min"], gauge["max"]) == (float("-inf"), float("inf"))


def test_metadata_always_has_version_times_python_and_command_line():
    metadata = get_timer_tree()["metadata"]
    assert metadata["timer_format_version"] == profiler.timing.timers.TIMER_FORMAT_VERSION
    assert int(metadata["end_time_seconds"]) >= int(metadata["start_time_seconds"]) > 0
    assert metadata["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert metadata["command_line_arguments"] == " ".join(sys.argv)
    assert metadata["rlprof_version"] == profiler.__version__


def test_added_metadata_is_stored_as_strings():
    profiler.add_metadata("seed", 42)
    assert get_timer_tree()["metadata"]["seed"] == "42"


def test_reset_timers_forgets_blocks_gauges_and_metadata():
    with hierarchical_timer("block"):
        pass
    set_gauge("gauge", 1.0)
    profiler.add_metadata("key", "value")
    profiler.reset_timers()
    tree = get_timer_tree()
    assert tree["children"] == [] and tree["gauges"] == {} and "key" not in tree["metadata"]


def test_an_explicit_stack_is_timed_apart_from_the_threads_stack():
    stack = TimerStack()
    with hierarchical_timer("mine", stack):
        pass
    set_gauge("g", 1.0, stack)
    assert child_names(get_timer_tree(stack)) == ["mine"]
    assert get_timer_tree()["children"] == []
    assert get_timer_root(stack).children["mine"].count == 1


# --- threads ----------------------------------------------------------------------------------


def run_in_thread(target, name: str = "helper") -> threading.Thread:
    thread = threading.Thread(target=target, name=name)
    thread.start()
    thread.join()
    return thread


def test_each_thread_times_into_its_own_stack():
    def work() -> None:
        with hierarchical_timer("in thread"):
            pass

    with hierarchical_timer("in main"):
        thread = run_in_thread(work)
    assert child_names(get_timer_tree()) == ["in main"]
    assert child_names(get_timer_tree(get_timer_stack_for_thread(thread))) == ["in thread"]


def test_a_thread_timing_concurrently_never_corrupts_another_threads_tree():
    barrier = threading.Barrier(4)

    def work() -> None:
        barrier.wait()
        for _ in range(2000):
            with hierarchical_timer("outer"):
                with hierarchical_timer("inner"):
                    pass

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    work()
    for thread in threads:
        thread.join()
    for stack in [None] + [get_timer_stack_for_thread(thread) for thread in threads]:
        tree = get_timer_tree(stack)
        assert child_names(tree) == ["outer"]
        assert find(tree, "outer")["count"] == 2000
        assert find(tree, "outer", "inner")["count"] == 2000


def test_include_threads_adds_each_threads_tree_as_a_parallel_node(fake_clock):
    def work() -> None:
        with hierarchical_timer("download"):
            fake_clock.advance(2.0)

    run_in_thread(work, name="loader")
    tree = get_timer_tree(include_threads=True)
    loader = find(tree, "thread:ended:loader")
    assert loader["is_parallel"] is True
    assert loader["total"] == 2.0
    assert find(loader, "download")["is_parallel"] is True
    assert "thread:ended:loader" not in child_names(get_timer_tree())


def test_a_threads_timers_outlive_the_thread(fake_clock):
    def work() -> None:
        with hierarchical_timer("short-lived"):
            fake_clock.advance(1.0)

    thread = run_in_thread(work)
    assert not thread.is_alive()
    ended = find(get_timer_tree(include_threads=True), "thread:ended:helper")
    assert child_names(ended) == ["short-lived"]
    assert find(ended, "short-lived")["total"] == 1.0


# --- threads that end ---------------------------------------------------------------------------


def run_threads(count: int, work, name: str) -> None:
    """Start ``count`` threads named ``name.format(index)`` one after another, each to its end."""
    for index in range(count):
        run_in_thread(work, name=name.format(index))


def test_ended_threads_are_folded_into_one_node_per_name_pattern_losing_nothing(fake_clock):
    def fetch() -> None:
        with hierarchical_timer("download"):
            fake_clock.advance(1.0)
            with hierarchical_timer("parse"):
                fake_clock.advance(0.5)

    run_threads(50, fetch, "Thread-{} (fetch)")
    tree = get_timer_tree(include_threads=True)
    assert [name for name in child_names(tree) if name.startswith("thread:")] == ["thread:ended:Thread-N (fetch)"]
    ended = find(tree, "thread:ended:Thread-N (fetch)")
    assert (ended["count"], ended["total"], ended["is_parallel"]) == (50, 75.0, True)
    assert (find(ended, "download")["count"], find(ended, "download")["total"]) == (50, 75.0)
    assert (find(ended, "download", "parse")["count"], find(ended, "download", "parse")["total"]) == (50, 25.0)


def test_threads_of_different_names_fold_apart(fake_clock):
    def work() -> None:
        with hierarchical_timer("work"):
            fake_clock.advance(1.0)

    run_threads(3, work, "loader-{}")
    run_threads(2, work, "writer-{}")
    tree = get_timer_tree(include_threads=True)
    assert find(tree, "thread:ended:loader-N")["count"] == 3
    assert find(tree, "thread:ended:writer-N")["count"] == 2


def test_a_thread_still_running_keeps_its_own_node(fake_clock):
    started, finish = threading.Event(), threading.Event()

    def work() -> None:
        with hierarchical_timer("poll"):
            fake_clock.advance(1.0)
        started.set()
        finish.wait(timeout=60)

    thread = threading.Thread(target=work, name="monitor")
    thread.start()
    try:
        started.wait(timeout=60)
        assert find(get_timer_tree(include_threads=True), "thread:monitor")["count"] == 1
    finally:
        finish.set()
        thread.join()
    assert find(get_timer_tree(include_threads=True), "thread:ended:monitor")["count"] == 1


def test_the_stacks_of_many_short_threads_are_let_go():
    def work() -> None:
        with hierarchical_timer("task"):
            pass

    stacks_before = stacks_in_memory()
    # Relative to the stacks listed before: threads of earlier tests in this process (named
    # "other", "program"...) are listed too, one stack per name.
    listed_before = len(all_timer_stacks())
    run_threads(2000, work, "Thread-{} (task)")
    assert len(all_timer_stacks()) - listed_before < 20  # 2000 ended threads: one stack, not 2000
    assert stacks_in_memory() - stacks_before < 20
    tree = get_timer_tree(include_threads=True)
    assert find(tree, "thread:ended:Thread-N (task)", "task")["count"] == 2000
    assert sum(1 for name in child_names(tree) if name.startswith("thread:")) == 1


def stacks_in_memory() -> int:
    gc.collect()
    # issubclass of the type, not isinstance: isinstance reads each object's __class__, which a
    # deprecated object of an imported library (torch.distributed.reduce_op) answers with a warning.
    return sum(1 for thing in gc.get_objects() if issubclass(type(thing), TimerStack))


def test_an_ended_threads_stack_is_the_one_its_timers_were_folded_into(fake_clock):
    def work() -> None:
        with hierarchical_timer("work"):
            fake_clock.advance(1.0)

    thread = run_in_thread(work, name="solver")
    get_timer_tree(include_threads=True)  # a dump folds ended threads
    stack = get_timer_stack_for_thread(thread)
    assert (stack.thread_name, stack.ended_threads) == ("ended:solver", 1)
    assert child_names(get_timer_tree(stack)) == ["work"]


def test_the_gauges_of_ended_threads_are_folded_too():
    def work() -> None:
        set_gauge("queue_length", 3.0)

    run_threads(4, work, "feeder-{}")
    (group,) = [stack for stack in all_timer_stacks() if stack.thread_name == "ended:feeder-N"]
    assert group.gauges["queue_length"].count == 4


def test_a_thread_stack_a_merger_dumps_from_is_never_folded():
    def work() -> None:
        TimerMerger()  # attaches to this thread's stack
        with hierarchical_timer("collect"):
            pass

    run_in_thread(work, name="collector")
    assert "thread:collector" in child_names(get_timer_tree(include_threads=True))


def test_a_thread_that_has_not_started_has_no_stack():
    with pytest.raises(RuntimeError, match="has not started"):
        get_timer_stack_for_thread(threading.Thread(target=lambda: None))


# --- processes --------------------------------------------------------------------------------


def report_child_tree(connection) -> None:
    with hierarchical_timer("in child"):
        pass
    connection.send(child_names(get_timer_tree()))
    connection.close()


@pytest.mark.skipif(sys.platform == "win32", reason="fork exists only on POSIX")
def test_a_forked_child_starts_with_an_empty_tree():
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    with hierarchical_timer("in parent"):
        child = context.Process(target=report_child_tree, args=(sender,))
        child.start()
        names = receiver.recv()
        child.join(timeout=30)
    assert names == ["in child"]
    assert child_names(get_timer_tree()) == ["in parent"]


def report_warm_block_counts(connection) -> None:
    with hierarchical_timer("warm"):
        pass
    connection.send([(child["name"], child["count"]) for child in get_timer_tree()["children"]])
    connection.close()


@pytest.mark.skipif(sys.platform == "win32", reason="fork exists only on POSIX")
def test_a_forked_child_times_a_block_its_parent_ran_into_its_own_tree():
    # The parent's warm block is where the compiled lookup would find it, in the stack the child
    # inherited: the child must time into its own.
    with hierarchical_timer("warm"):
        pass
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=report_warm_block_counts, args=(sender,))
    child.start()
    counts = receiver.recv()
    child.join(timeout=30)
    assert counts == [("warm", 1)]
    assert find(get_timer_tree(), "warm")["count"] == 1


# --- switching off ----------------------------------------------------------------------------


def test_disabled_blocks_run_and_record_nothing():
    profiler.disable()
    with hierarchical_timer("ignored") as node:
        node.merge(TimerNode("worker"), root_name="worker_root")
        node.add_time(1.0)
    assert not isinstance(node, TimerNode)
    assert get_timer_tree()["children"] == []


def test_disabled_timed_functions_still_return_their_result():
    profiler.disable()
    assert Policy().act(1) == 2
    assert get_timer_tree()["children"] == []


def test_disabled_gauges_record_nothing():
    profiler.disable()
    set_gauge("ignored", 1.0)
    assert get_timer_tree()["gauges"] == {}


def test_enable_turns_timing_back_on():
    profiler.disable()
    profiler.enable()
    with hierarchical_timer("counted"):
        pass
    assert profiler.is_enabled()
    assert child_names(get_timer_tree()) == ["counted"]


def test_the_environment_variable_disables_profiling_at_import():
    script = (
        "import profiler\n"
        "with profiler.hierarchical_timer('x'): pass\n"
        "print(profiler.is_enabled(), len(profiler.get_timer_tree()['children']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "RLPROF_DISABLE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.split() == ["False", "0"]


# --- clock ------------------------------------------------------------------------------------


def test_set_clock_returns_the_previous_clock(fake_clock):
    previous = profiler.timing.timers.set_clock(fake_clock)
    assert previous is fake_clock
    assert profiler.timing.timers.now() == fake_clock.time
