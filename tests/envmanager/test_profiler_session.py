"""A MegEngine-style ``Profiler`` session around an env manager: the workers' blocks, spans and
memory land in the session's files beside the trainer's."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from envmanager_testenvs import CountingEnv

from envmanager import SubprocessEnvManager
from profiler import Profiler, load_timing_tree

STEPS = 20


def profiled_run(tmp_path, context, **session_options):
    formats = ["timers.json", "chrome_timeline.json", "memory_flow.svg"]
    with Profiler(path=tmp_path, formats=formats, **session_options):
        envs = SubprocessEnvManager([lambda: CountingEnv(episode_length=1000)] * 2, context=context)
        try:
            envs.reset(seed=0)
            for _ in range(STEPS):
                envs.step(np.zeros(2, dtype=np.int64))
        finally:
            envs.close()
    return load_timing_tree(tmp_path / f"{os.getpid()}.timers.json")


@pytest.fixture(scope="module")
def forked_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("session")
    return directory, profiled_run(directory, "fork", sample_rate=2)


def worker_tracks(tree, section):
    return {process["name"]: process for process in tree[section]["processes"] if process["name"] != "trainer"}


def test_the_workers_blocks_are_in_the_sessions_timer_file(forked_run):
    _, tree = forked_run
    steps = [child["count"] for worker in tree["workers"] for child in worker["children"]
             if child["name"] == "env.step"]
    assert steps == [STEPS, STEPS]


def test_the_workers_spans_are_on_the_sessions_timeline(forked_run):
    _, tree = forked_run
    tracks = worker_tracks(tree, "timeline")
    assert sorted(tracks) == ["worker 0", "worker 1"]
    for track in tracks.values():
        spans = [span for thread in track["threads"] for span in thread["spans"] if span[0] == "env.step"]
        assert len(spans) == STEPS


def test_each_worker_sampled_its_own_memory_and_shipped_it(forked_run):
    _, tree = forked_run
    tracks = worker_tracks(tree, "memory")
    assert sorted(tracks) == ["worker 0", "worker 1"]
    worker_pids = {worker["name"]: worker["pid"] for worker in tree["workers"]}
    for name, track in tracks.items():
        assert track["pid"] == worker_pids[name] != os.getpid()
        assert len(track["samples"]) >= STEPS // 2  # every 2 of its blocks


def test_the_chrome_timeline_draws_every_processs_memory(forked_run):
    directory, tree = forked_run
    trace = json.loads((directory / f"{os.getpid()}.chrome_timeline.json").read_text())
    pids = {event["pid"] for event in trace["traceEvents"] if event["name"] == "RSS (MiB)"}
    assert len(pids) == 3  # the trainer and both workers


def test_the_memory_picture_has_a_line_per_process(forked_run):
    directory, _ = forked_run
    picture = (directory / f"{os.getpid()}.memory_flow.svg").read_text()
    assert picture.count("<polyline") == 3


def test_a_spawned_worker_samples_by_time_on_its_own_thread(tmp_path):
    tree = profiled_run(tmp_path, "spawn", memory_interval=0.005)
    tracks = worker_tracks(tree, "memory")
    assert sorted(tracks) == ["worker 0", "worker 1"]
    assert all(track["samples"] for track in tracks.values())
