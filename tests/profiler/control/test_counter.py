"""Specification of MXNet's Counter: a gauge in the dump and a counter track on the timeline."""

from __future__ import annotations

import pytest

import profiler
from profiler import Counter, Domain, get_timer_tree


def test_a_counter_is_a_gauge_named_by_its_domain():
    episodes = Domain("rl").new_counter("episodes", value=3)
    episodes.increment()
    episodes += 2
    episodes -= 1
    episodes.decrement(4)
    gauge = get_timer_tree()["gauges"]["rl.episodes"]
    assert episodes.value == 1
    assert gauge == {"value": 1.0, "min": 1.0, "max": 6.0, "count": 5}


def test_set_value_sets_the_counter():
    queue = Counter(Domain("rl"), "queue")
    queue.set_value(7)
    assert (queue.value, get_timer_tree()["gauges"]["rl.queue"]["value"]) == (7, 7.0)


def test_a_counter_without_a_value_records_nothing_until_set():
    Domain("rl").new_counter("episodes")
    assert get_timer_tree()["gauges"] == {}


def test_every_change_is_a_sample_on_the_counter_track_in_the_domains_category(fake_clock, recording):
    steps = Domain("rl").new_counter("steps", value=0)
    fake_clock.advance(1.0)
    steps += 10
    (trainer,) = get_timer_tree()["timeline"]["processes"]
    assert trainer["counters"] == [["rl.steps", 1000.0, 0.0, {"cat": "rl"}],
                                   ["rl.steps", 1001.0, 10.0, {"cat": "rl"}]]


def test_a_paused_counter_keeps_counting_but_records_nothing():
    steps = Domain("rl").new_counter("steps", value=1)
    profiler.pause()
    steps += 1
    profiler.resume()
    assert steps.value == 2
    assert get_timer_tree()["gauges"]["rl.steps"]["count"] == 1


def test_a_value_that_is_not_a_number_is_refused_and_not_kept():
    steps = Domain("rl").new_counter("steps", value=1)
    with pytest.raises(TypeError, match="rl.steps"):
        steps.set_value("many")
    assert steps.value == 1
