"""Specification of MXNet's Task, Frame and Event: timer blocks with a domain, and timeline spans."""

from __future__ import annotations

import threading

import pytest
from tree_paths import child_names, find

import profiler
from profiler import Domain, Event, Frame, Task, get_timer_tree, hierarchical_timer


def spans(tree: dict) -> list[list]:
    (trainer, *_) = tree["timeline"]["processes"]
    return trainer["threads"][0]["spans"]


def test_a_task_is_a_block_labelled_with_its_domain_and_type(fake_clock):
    task = Domain("rl").new_task("rollout")
    task.start()
    fake_clock.advance(2.0)
    task.stop()
    rollout = find(get_timer_tree(), "rollout")
    assert (rollout["total"], rollout["count"], rollout["domain"], rollout["object_type"]) == (2.0, 1, "rl", "task")


def test_every_run_adds_to_the_one_block_with_per_call_extremes(fake_clock):
    task = Task(Domain("rl"), "update")
    for seconds in (1.0, 3.0):
        task.start()
        fake_clock.advance(seconds)
        task.stop()
    update = find(get_timer_tree(), "update")
    assert (update["count"], update["total"], update["min"], update["max"]) == (2, 4.0, 1.0, 3.0)


def test_blocks_opened_while_a_task_runs_nest_inside_it(fake_clock):
    task = Domain("rl").new_task("rollout")
    task.start()
    with hierarchical_timer("policy"):
        fake_clock.advance(1.0)
    task.stop()
    with hierarchical_timer("log"):
        pass
    tree = get_timer_tree()
    assert child_names(tree) == ["rollout", "log"]
    assert child_names(find(tree, "rollout")) == ["policy"]


def test_start_and_stop_may_be_called_from_different_functions(fake_clock):
    task = Domain("rl").new_task("episode")

    def begin_episode() -> None:
        task.start()

    def end_episode() -> None:
        task.stop()

    begin_episode()
    fake_clock.advance(1.5)
    end_episode()
    assert find(get_timer_tree(), "episode")["total"] == 1.5


def test_tasks_that_overlap_without_nesting_are_each_timed_whole(fake_clock):
    domain = Domain("rl")
    first, second = domain.new_task("first"), domain.new_task("second")
    first.start()
    fake_clock.advance(1.0)
    second.start()
    fake_clock.advance(1.0)
    first.stop()  # before the task started inside it
    fake_clock.advance(1.0)
    second.stop()
    with hierarchical_timer("after"):
        pass
    tree = get_timer_tree()
    assert find(tree, "first")["total"] == 2.0
    assert find(tree, "first", "second")["total"] == 2.0  # it started inside, outlived it
    assert child_names(tree) == ["first", "after"]  # nothing opens inside a stopped task


def test_a_with_block_left_open_by_a_stopped_task_closes_to_the_tasks_parent(fake_clock):
    task = Domain("rl").new_task("rollout")
    with hierarchical_timer("train"):
        task.start()
        with hierarchical_timer("step"):
            task.stop()
            fake_clock.advance(1.0)
        with hierarchical_timer("log"):
            pass
        task.start()
        with hierarchical_timer("step"):
            fake_clock.advance(1.0)
        task.stop()
    train = find(get_timer_tree(), "train")
    assert child_names(train) == ["rollout", "log"]
    assert find(train, "rollout", "step")["count"] == 2  # the second run nests normally again


def test_a_task_as_a_with_block_counts_an_exception_and_lets_it_through(fake_clock):
    task = Domain("rl").new_task("update")
    with pytest.raises(RuntimeError, match="diverged"):
        with task:
            raise RuntimeError("diverged")
    update = find(get_timer_tree(), "update")
    assert (update["count"], update["errors"]) == (1, 1)


@pytest.mark.parametrize(
    ("calls", "message"),
    [
        (lambda task: task.stop(), "Task 'update' was not started"),
        (lambda task: (task.start(), task.start()), "Task 'update' is already started"),
    ],
)
def test_start_and_stop_out_of_turn_raise_clearly(calls, message):
    with pytest.raises(RuntimeError, match=message):
        calls(Domain("rl").new_task("update"))


def test_a_task_must_be_stopped_in_the_thread_that_started_it():
    task = Domain("rl").new_task("update")
    task.start()
    failures = []

    def stop_elsewhere() -> None:
        try:
            task.stop()
        except RuntimeError as error:
            failures.append(str(error))

    thread = threading.Thread(target=stop_elsewhere, name="helper")
    thread.start()
    thread.join()
    assert failures == ["Task 'update' was started in thread 'MainThread': stop it there "
                        "(each thread has its own open blocks)"]
    task.stop()


def test_a_run_started_while_paused_records_nothing_even_if_it_stops_after_resume(fake_clock):
    task = Domain("rl").new_task("update")
    profiler.pause()
    task.start()
    profiler.resume()
    fake_clock.advance(1.0)
    task.stop()
    assert child_names(get_timer_tree()) == []


def test_a_run_started_before_a_pause_is_recorded_whole(fake_clock):
    task = Domain("rl").new_task("update")
    task.start()
    profiler.pause()
    fake_clock.advance(1.0)
    task.stop()
    profiler.resume()
    assert find(get_timer_tree(), "update")["total"] == 1.0


def test_a_recorded_task_span_carries_its_domain_as_category(fake_clock, recording):
    task = Domain("rl").new_task("rollout")
    with task:
        fake_clock.advance(0.5)
    assert spans(get_timer_tree()) == [["rollout", 1000.0, 1000.5, {"cat": "rl", "object_type": "task"}]]


def test_frames_are_numbered_from_one(fake_clock, recording):
    frame = Domain("game").new_frame("frame")
    for _ in range(3):
        with frame:
            fake_clock.advance(0.1)
    numbers = [span[3]["frame"] for span in spans(get_timer_tree())]
    assert numbers == [1, 2, 3]
    assert frame.frames == 3
    assert find(get_timer_tree(), "frame")["object_type"] == "frame"


def test_an_event_belongs_to_no_domain(fake_clock, recording):
    with Event("load checkpoint"):
        fake_clock.advance(2.0)
    tree = get_timer_tree()
    block = find(tree, "load checkpoint")
    assert (block["object_type"], "domain" in block) == ("event", False)
    assert spans(tree) == [["load checkpoint", 1000.0, 1002.0, {"object_type": "event"}]]


@pytest.mark.parametrize("make", [lambda: Task(Domain("rl"), ""), lambda: Event(3), lambda: Frame(Domain("rl"), None)])
def test_a_nameless_object_is_refused(make):
    with pytest.raises(ValueError, match="the name must be a non-empty string"):
        make()
