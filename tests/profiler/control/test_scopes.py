"""Specification of MXNet's profiler scope: a nesting name prefix, recorded on the blocks in it."""

from __future__ import annotations

import asyncio

import pytest
from tree_paths import find

from profiler import Domain, get_timer_tree, hierarchical_timer, scope
from profiler.timing import timers
from profiler.timing.timer_node import PLAIN_EXIT
from profiler.control.scopes import DEFAULT_SCOPE, current_scope


def test_scopes_nest_by_appending_their_names():
    with scope("train") as outer:
        with scope("rollout:") as inner:
            assert (outer, inner, current_scope()) == ("train:", "train:rollout:", "train:rollout:")
        with scope("eval", append_mode=False) as alone:
            assert alone == "eval:"
        assert current_scope() == "train:"
    assert current_scope() == DEFAULT_SCOPE


def test_blocks_record_every_scope_they_ran_in():
    for name in ("train", "eval"):
        with scope(name):
            with hierarchical_timer("step"):
                pass
    with hierarchical_timer("step"):
        pass
    assert find(get_timer_tree(), "step")["scopes"] == ["eval:", "train:"]


def test_a_block_outside_any_scope_records_none():
    with hierarchical_timer("step"):
        pass
    assert "scopes" not in find(get_timer_tree(), "step")


def test_a_task_records_its_scope():
    task = Domain("rl").new_task("update")
    with scope("train"):
        with task:
            pass
    assert find(get_timer_tree(), "update")["scopes"] == ["train:"]


def test_with_no_scope_open_the_plain_exit_is_back_in_place():
    with scope("train"):
        assert timers.TimerNode.__exit__ is not PLAIN_EXIT
    assert timers.TimerNode.__exit__ is PLAIN_EXIT


def test_asyncio_tasks_each_see_their_own_scope():
    async def work(name: str) -> str:
        with scope(name):
            await asyncio.sleep(0)
            return current_scope()

    async def both() -> list[str]:
        return list(await asyncio.gather(work("a"), work("b")))

    assert asyncio.run(both()) == ["a:", "b:"]


@pytest.mark.parametrize("name", ["", 3])
def test_a_scope_needs_a_name(name):
    with pytest.raises(ValueError, match="scope: the name must be a non-empty string"):
        with scope(name):
            pass
