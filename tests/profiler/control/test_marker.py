"""Specification of MXNet's Marker: instants whose scope maps to the trace format's."""

from __future__ import annotations

import pytest

import profiler
from profiler import Domain, Marker, get_timer_tree


def instants(tree: dict) -> list[list]:
    (trainer,) = tree["timeline"]["processes"]
    return trainer["threads"][0]["instants"]


@pytest.mark.parametrize(
    ("scope", "instant_scope"),
    [("global", "g"), ("process", "p"), ("thread", "t"), ("task", "p"), ("marker", "p")],
)
def test_each_mxnet_scope_maps_to_a_trace_instant_scope(fake_clock, recording, scope, instant_scope):
    Domain("rl").new_marker("checkpoint").mark(scope)
    assert instants(get_timer_tree()) == [["checkpoint", 1000.0, {"cat": "rl", "scope": instant_scope}]]


def test_the_default_scope_is_the_process(fake_clock, recording):
    Marker(Domain("rl"), "checkpoint").mark()
    assert instants(get_timer_tree())[0][2]["scope"] == "p"


def test_an_unknown_scope_is_refused_naming_the_scopes(recording):
    with pytest.raises(ValueError, match="scope must be one of global, process, thread, task, marker, got 'node'"):
        Domain("rl").new_marker("checkpoint").mark("node")


def test_a_paused_profiler_marks_nothing(recording):
    profiler.pause()
    Domain("rl").new_marker("checkpoint").mark()
    profiler.resume()
    assert instants(get_timer_tree()) == []


def test_without_a_recorded_timeline_a_mark_leaves_nothing():
    Domain("rl").new_marker("checkpoint").mark()
    assert "timeline" not in get_timer_tree()
