"""Specification of an env timed in the trainer's process: the env stays the program's own."""

from __future__ import annotations

import copy
import inspect
import pickle
import weakref

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest

from profiler import get_timer_tree
from profiler.recording import events
from profiler.timing import timers

from envmanager.instrumentation.factories import TimedFactory
from envmanager.instrumentation.timed_env import instrument_env, is_instrumented
from step_cores import step_core  # noqa: F401  (both step timers: the C helper, the Python reference)


@pytest.fixture(autouse=True)
def fresh_timers():
    timers.reset_timers()
    yield
    timers.reset_timers()


def block(name: str) -> timers.TimerNode:
    return timers.get_timer_root().children[name]


def rollout(env: gym.Env) -> list:
    """Observations, rewards and ends of a reset and 30 steps (resetting after each end)."""
    results = [env.reset(seed=4)[0]]
    for action in [0, 1, 1, 0, 1] * 6:
        observation, reward, terminated, truncated, _ = env.step(action)
        results += [observation, reward, terminated, truncated]
        if terminated or truncated:
            results.append(env.reset()[0])
    return results


def test_an_instrumented_env_keeps_its_class_and_gives_the_same_results():
    plain = gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))
    timed = gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))
    assert instrument_env(timed, None) is not None
    assert type(timed) is type(plain) and timed.spec == plain.spec
    plain_results, timed_results = rollout(plain), rollout(timed)
    assert len(plain_results) == len(timed_results)
    assert all(np.array_equal(mine, theirs) for mine, theirs in zip(timed_results, plain_results))


def test_its_steps_and_resets_are_blocks_where_they_ran():
    env = gym.make("CartPole-v1")
    instrument_env(env, None)
    with timers.hierarchical_timer("rollout"):
        results = rollout(env)
    assert block("rollout").children["env.step"].count == 30
    assert block("rollout").children["env.reset"].count == len(results) - 4 * 30  # the observations left


def test_while_the_timeline_records_each_step_in_the_trainer_is_a_span_of_its_own(fake_clock):
    class ClockedEnv(gym.Env):
        """Takes a quarter of a second of the fake clock per step."""

        def step(self, action):
            fake_clock.advance(0.25)
            return 0, 0.0, False, False, {}

    env = ClockedEnv()
    instrument_env(env, None)
    events.clear_recording()
    events.start_recording(capacity=100)
    try:
        with timers.hierarchical_timer("vector.step"):
            env.step(0)
            env.step(1)
        timeline = get_timer_tree()["timeline"]
    finally:
        events.stop_recording()
        events.clear_recording()
    (thread,) = [thread for thread in timeline["processes"][0]["threads"] if thread["spans"]]
    assert [span for span in thread["spans"] if span[0] == "env.step"] == [
        ["env.step", 1000.0, 1000.25], ["env.step", 1000.25, 1000.5]]
    assert block("vector.step").children["env.step"].count == 2


def test_an_env_built_inside_an_instrumented_build_is_timed_once():
    inner = gym.make("CartPole-v1")
    instrument_env(inner, None)
    outer = gym.wrappers.RecordEpisodeStatistics(inner)
    assert is_instrumented(outer)
    instrument_env(outer, None)
    rollout(outer)
    assert block("env.step").count == 30 and not block("env.step").children
    assert "step" not in vars(inner)  # the inner env has its own methods back


def test_a_factory_in_the_trainer_returns_the_programs_env_timed():
    factory = TimedFactory(lambda: gym.make("CartPole-v1"), trainer_pid=__import__("os").getpid(), identity=None)
    env = factory()
    env.reset(seed=1)
    env.step(0)
    assert isinstance(env, gym.Env) and block("env.step").count == 1


def test_an_object_that_takes_no_attributes_is_left_alone():
    class Slotted:
        __slots__ = ()

        def step(self, action):
            return action

    assert instrument_env(Slotted(), None) is None


def plain_and_timed_pair() -> tuple[gym.Env, gym.Env]:
    """The same wrapped CartPole twice, the second instrumented, both reset with the same seed."""
    plain = gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))
    timed = gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))
    assert instrument_env(timed, None) is not None
    plain.reset(seed=3)
    timed.reset(seed=3)
    return plain, timed


COPIES = {
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "pickle": lambda env: pickle.loads(pickle.dumps(env)),
    "cloudpickle of a closure": lambda env: cloudpickle.loads(cloudpickle.dumps(lambda: env))(),
}


@pytest.mark.parametrize("way", COPIES)
def test_a_copy_of_an_instrumented_env_is_the_copy_plain_python_makes(way):
    plain, timed = plain_and_timed_pair()
    plain_copy, timed_copy = COPIES[way](plain), COPIES[way](timed)
    assert not is_instrumented(timed_copy)
    assert {"step", "reset", "close", "_rlprof_timing", "__reduce_ex__"}.isdisjoint(vars(timed_copy))
    assert vars(timed_copy).keys() == vars(plain_copy).keys()
    plain_state, timed_state = plain.unwrapped.state.copy(), timed.unwrapped.state.copy()
    with timers.hierarchical_timer("rollout"):
        copy_results = rollout(timed_copy)
    assert all(np.array_equal(mine, theirs) for mine, theirs in zip(copy_results, rollout(plain_copy), strict=True))
    # The copy stepped itself, or, shallow, the env it shares with the original, as plain python's did.
    assert np.array_equal(timed.unwrapped.state == timed_state, plain.unwrapped.state == plain_state)
    assert "env.step" not in block("rollout").children  # a copy is untimed: docs/run.md says why
    with timers.hierarchical_timer("original"):
        timed.step(0)
    assert block("original").children["env.step"].count == 1  # the original is timed still


def test_pickling_an_instrumented_env_gives_the_bytes_plain_python_gives():
    plain, timed = gym.make("CartPole-v1"), gym.make("CartPole-v1")  # no episode start time to differ
    instrument_env(timed, None)
    plain.reset(seed=3)
    timed.reset(seed=3)
    assert pickle.dumps(timed) == pickle.dumps(plain)


@pytest.mark.parametrize("name", ["step", "reset"])
def test_the_timed_methods_carry_the_envs_own_name_doc_and_signature(name):
    plain, timed = plain_and_timed_pair()
    mine, theirs = getattr(timed, name), getattr(plain, name)
    for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):
        assert getattr(mine, attribute) == getattr(theirs, attribute)
    assert inspect.signature(mine) == inspect.signature(theirs)
    assert mine.__wrapped__ == getattr(type(timed), name).__get__(timed)  # the env's class's own, bound


def test_an_outer_instrumentation_takes_the_inner_envs_copy_hook_away_too():
    inner = gym.make("CartPole-v1")
    instrument_env(inner, None)
    outer = gym.wrappers.RecordEpisodeStatistics(inner)
    instrument_env(outer, None)
    assert {"step", "reset", "_rlprof_timing", "__reduce_ex__"}.isdisjoint(vars(inner))
    assert pickle.dumps(inner) == pickle.dumps(gym.make("CartPole-v1"))


@pytest.mark.parametrize("name", ["step", "reset", "close"])
def test_the_timed_methods_take_weak_references_as_the_envs_bound_methods_do(name):
    plain, timed = plain_and_timed_pair()
    weakref.ref(getattr(plain, name))  # a bound method takes one
    method = getattr(timed, name)
    assert weakref.ref(method)() is method


def test_closing_an_env_leaves_the_methods_the_program_set_on_it_afterwards():
    plain, timed = plain_and_timed_pair()
    for env in (plain, timed):
        env.reset = lambda **options: ("the program's reset", options)
        env.close()
    assert timed.reset(seed=1) == plain.reset(seed=1) == ("the program's reset", {"seed": 1})
    assert not is_instrumented(timed)
