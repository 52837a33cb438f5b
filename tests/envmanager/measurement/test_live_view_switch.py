"""An env manager's ``live_view=True``: the process's one live view, up while the manager's workers
run (its drawing on a real terminal is specified in tests/envmanager/test_live_view_terminal.py)."""

from __future__ import annotations

import io

import gymnasium as gym
import pytest

import profiler
from envmanager.subprocess_env_manager import SubprocessEnvManager
from profiler.integrations import live_view


def cartpoles(count: int = 2) -> list:
    return [lambda: gym.make("CartPole-v1")] * count


@pytest.fixture(autouse=True)
def no_view_left_up():
    yield
    live_view.stop()


def test_live_view_without_profiling_is_refused_in_one_line():
    with pytest.raises(ValueError, match="needs `profiling=True`"):
        SubprocessEnvManager(cartpoles(), profiling=False, live_view=True)


def test_the_view_is_up_while_the_workers_run_and_goes_at_close():
    envs = SubprocessEnvManager(cartpoles(), live_view=True)
    try:
        assert live_view.is_showing()
    finally:
        envs.close()
    assert not live_view.is_showing()


def test_without_the_option_no_view_goes_up():
    envs = SubprocessEnvManager(cartpoles())
    try:
        assert not live_view.is_showing()
    finally:
        envs.close()


def test_a_view_already_up_is_used_and_left_up_at_close():
    view = live_view.start(stream=io.StringIO(), mode="lines")
    envs = SubprocessEnvManager(cartpoles(), live_view=True)
    envs.close()
    assert live_view.is_showing() and live_view.start() is view


def test_two_managers_share_one_view_that_the_last_one_closed_takes_down():
    first = SubprocessEnvManager(cartpoles(), live_view=True)
    second = SubprocessEnvManager(cartpoles(), live_view=True)
    try:
        first.close()
        assert live_view.is_showing()
    finally:
        second.close()
    assert not live_view.is_showing()


def test_with_profiling_disabled_for_the_process_a_warning_says_no_view_goes_up():
    profiler.disable()
    try:
        with pytest.warns(RuntimeWarning, match="live_view=True shows nothing"):
            envs = SubprocessEnvManager(cartpoles(), live_view=True)
        envs.close()
        assert not live_view.is_showing()
    finally:
        profiler.enable()


def test_a_view_taken_down_by_the_program_is_put_up_again_by_a_later_manager_and_goes_at_its_close():
    first = SubprocessEnvManager(cartpoles(), live_view=True)
    live_view.stop()
    second = SubprocessEnvManager(cartpoles(), live_view=True)
    try:
        assert live_view.is_showing()
        first.close()
        assert live_view.is_showing()  # the first manager's view is gone: it no longer holds this one
    finally:
        second.close()
    assert not live_view.is_showing()
