"""Specification of the speedscope export: the file format's required fields, valid frame
indices, one profile per process, weights that add up to the tree's times."""

from __future__ import annotations

import pytest

from profiler.export.speedscope import SPEEDSCOPE_SCHEMA, to_speedscope


def assert_follows_the_schema(document):
    assert document["$schema"] == SPEEDSCOPE_SCHEMA
    frames = document["shared"]["frames"]
    assert all(isinstance(frame["name"], str) for frame in frames)
    assert len({frame["name"] for frame in frames}) == len(frames), "a name is listed twice"
    assert document["profiles"]
    for profile in document["profiles"]:
        assert profile["unit"] == "seconds"
        assert isinstance(profile["name"], str)
        assert profile["startValue"] <= profile["endValue"]
        if profile["type"] == "sampled":
            assert len(profile["samples"]) == len(profile["weights"])
            assert all(weight > 0 for weight in profile["weights"])
            indices = [index for stack in profile["samples"] for index in stack]
        else:
            assert profile["type"] == "evented"
            indices = [event["frame"] for event in profile["events"]]
        assert all(0 <= index < len(frames) for index in indices)


def assert_events_nest(profile):
    """Opens and closes pair up like a call stack, in time order, within the profile's range."""
    open_frames = []
    last = profile["startValue"]
    for event in profile["events"]:
        assert profile["startValue"] <= event["at"] <= profile["endValue"]
        assert event["at"] >= last
        last = event["at"]
        if event["type"] == "O":
            open_frames.append(event["frame"])
        else:
            assert open_frames.pop() == event["frame"]
    assert open_frames == []


@pytest.mark.parametrize("run", ["trainer_tree", "run_with_workers", "run_with_timeline", "mlagents_tree"])
def test_every_run_follows_the_file_format(run, request):
    assert_follows_the_schema(to_speedscope(request.getfixturevalue(run)))


def test_without_spans_the_trainer_is_a_sampled_profile_weighted_by_self_time(trainer_tree):
    (profile,) = to_speedscope(trainer_tree)["profiles"]
    assert (profile["type"], profile["name"]) == ("sampled", "trainer")
    assert sum(profile["weights"]) == pytest.approx(trainer_tree["total"])


def test_a_sample_is_the_stack_from_the_root_down_to_its_block(trainer_tree):
    document = to_speedscope(trainer_tree)
    names = [frame["name"] for frame in document["shared"]["frames"]]
    (profile,) = document["profiles"]
    stacks = {tuple(names[index] for index in stack): weight for stack, weight in zip(profile["samples"], profile["weights"])}
    assert stacks[("root", "train", "vector.step", "wait")] == pytest.approx(0.012)


def test_each_process_gets_its_own_profile(run_with_workers):
    names = [profile["name"] for profile in to_speedscope(run_with_workers)["profiles"]]
    assert names == ["trainer", "parallel: train › vector.step › worker_root", "worker 0", "worker 1", "worker 2"]


def test_a_worker_profile_weighs_exactly_that_worker_s_time(run_with_workers):
    profiles = to_speedscope(run_with_workers)["profiles"]
    worker_2 = next(profile for profile in profiles if profile["name"] == "worker 2")
    assert sum(worker_2["weights"]) == pytest.approx(4 * (0.009 + 0.0005))


def test_the_trainer_profile_leaves_out_time_that_ran_in_parallel(run_with_workers):
    trainer = to_speedscope(run_with_workers)["profiles"][0]
    assert sum(trainer["weights"]) == pytest.approx(run_with_workers["total"])


def test_with_a_timeline_each_thread_is_an_evented_profile(run_with_timeline):
    profiles = to_speedscope(run_with_timeline)["profiles"]
    assert [(profile["type"], profile["name"]) for profile in profiles] == [
        ("evented", "trainer / MainThread"),
        ("evented", "trainer / logger"),
        ("evented", "worker 0"),
    ]


def test_evented_profiles_open_and_close_like_a_call_stack(run_with_timeline):
    for profile in to_speedscope(run_with_timeline)["profiles"]:
        assert_events_nest(profile)


def test_an_evented_child_outliving_its_parent_closes_with_it(run_with_timeline):
    thread = run_with_timeline["timeline"]["processes"][0]["threads"][0]
    thread["spans"].append(["late", 12.000800, 12.001500])
    profile = to_speedscope(run_with_timeline)["profiles"][0]
    assert_events_nest(profile)
    assert profile["endValue"] == pytest.approx(12.000900)
