"""Specification of MXNet's Domain: the factory and category of tasks, frames, counters, markers."""

from __future__ import annotations

import pytest

import profiler
from profiler import Counter, Domain, Frame, Marker, Task


@pytest.mark.parametrize("name", ["Domain", "Task", "Frame", "Event", "Counter", "Marker", "scope"])
def test_every_object_is_importable_from_the_package(name):
    assert name in profiler.__all__


def test_a_domain_makes_objects_that_belong_to_it():
    domain = Domain("rl")
    made = [domain.new_task("t"), domain.new_frame("f"), domain.new_counter("c"), domain.new_marker("m")]
    assert [type(item) for item in made] == [Task, Frame, Counter, Marker]
    assert all(item.domain is domain for item in made)
    assert [str(item) for item in made] == ["t", "f", "c", "m"]


def test_a_counter_made_by_a_domain_takes_its_initial_value():
    assert Domain("rl").new_counter("episodes", 4).value == 4


def test_a_domain_prints_as_its_name():
    assert (str(Domain("rl")), repr(Domain("rl"))) == ("rl", "Domain('rl')")


@pytest.mark.parametrize("name", ["", None, 7])
def test_a_domain_needs_a_name(name):
    with pytest.raises(ValueError, match="Domain: the name must be a non-empty string"):
        Domain(name)
