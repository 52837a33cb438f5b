"""Specification of the timer JSON file: atomic writes, our layout, ML-Agents' layout, bad files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from profiler import (
    TimerFileError,
    hierarchical_timer,
    load_timing_tree,
    set_gauge,
    timers_json_path,
    write_timing_tree,
)
from profiler.recording import events
from profiler.tree.atomic_file import write_atomically
from profiler.tree.timer_json import MAX_FILE_DEPTH
from profiler.timing.timers import FOLDED_BLOCK_NAME, MAX_DEPTH

MLAGENTS_FILE = Path(__file__).parents[2] / "data" / "mlagents_timers.json"


@pytest.fixture(autouse=True, params=["C helper", "pure Python"])
def timeline_core(request, monkeypatch):
    """Every test on both paths: the timeline's spans written by the C helper where it was built,
    and by the JSON encoder, the reference."""
    from profiler.tree import timer_json

    if request.param == "C helper" and timer_json._timeline_text is None:  # noqa: SLF001
        pytest.skip("the timers file's C helper was not built here (no compiler, or RLPROF_PURE_PYTHON=1)")
    if request.param == "pure Python":
        monkeypatch.setattr(timer_json, "_timeline_text", None)
    return request.param


def write_json(path: Path, document) -> Path:
    path.write_text(json.dumps(document))
    return path


def test_the_run_file_is_named_after_the_run(tmp_path):
    assert timers_json_path(tmp_path, "ppo-7") == tmp_path / "ppo-7_timers.json"


def test_a_written_tree_loads_back_unchanged(tmp_path, fake_clock):
    with hierarchical_timer("step"):
        fake_clock.advance(2.0)
        with hierarchical_timer("policy"):
            fake_clock.advance(1.0)
    set_gauge("reward", 3.0)
    path = write_timing_tree(tmp_path / "run_timers.json")
    written = json.loads(path.read_text())
    assert load_timing_tree(path) == written
    assert written["children"][0] == {
        "name": "step",
        "total": 3.0,
        "count": 1,
        "self": 2.0,
        "min": 3.0,
        "max": 3.0,
        "children": [
            {"name": "policy", "total": 1.0, "count": 1, "self": 1.0, "min": 1.0, "max": 1.0,
             "children": []}
        ],
    }
    assert written["gauges"]["reward"]["value"] == 3.0


def test_writing_creates_missing_folders(tmp_path):
    path = write_timing_tree(timers_json_path(tmp_path / "runs" / "a", "a"))
    assert path.exists()


def test_a_failed_write_leaves_the_previous_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "timers.json"
    target.write_text("previous")

    with pytest.raises(TypeError):
        write_atomically(target, 12345)  # type: ignore[arg-type]
    assert target.read_text() == "previous"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["timers.json"]


def test_a_rename_onto_a_folder_fails_without_leaving_a_temporary_file(tmp_path):
    (tmp_path / "occupied").mkdir()
    with pytest.raises(OSError):
        write_atomically(tmp_path / "occupied", "data")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["occupied"]


def test_the_mlagents_layout_loads_with_named_child_lists():
    tree = load_timing_tree(MLAGENTS_FILE)
    learning = tree["children"][0]
    assert learning["name"] == "TrainerController.start_learning"
    assert [child["name"] for child in learning["children"]] == ["env_step", "trainer_advance"]
    env_step = learning["children"][0]
    assert env_step["count"] == 3
    worker_root = env_step["children"][0]
    assert worker_root["name"] == "worker_root" and worker_root["is_parallel"] is True
    assert worker_root["children"][0]["name"] == "UnityEnvironment.step"
    assert tree["gauges"]["Environment.CumulativeReward.mean"]["max"] == 2.5
    assert tree["metadata"]["mlagents_version"] == "1.1.0"


def test_leaves_without_children_load_with_an_empty_list():
    tree = load_timing_tree(MLAGENTS_FILE)
    assert tree["children"][0]["children"][1]["children"] == []


def test_a_missing_self_is_computed_from_the_children(tmp_path):
    path = write_json(tmp_path / "t.json", {
        "total": 5.0, "count": 1,
        "children": {"a": {"total": 3.0, "count": 2}, "w": {"total": 9.0, "count": 1, "is_parallel": True}},
    })
    assert load_timing_tree(path)["self"] == 2.0


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "top level is a list"),
        ('{"hello": 1}', "neither 'total' nor 'children'"),
        ('{"total": -1.0, "count": 1}', "root.total: must be a finite time >= 0"),
        ('{"total": 1.0, "count": 1.5}', "root.count: must be a whole number"),
        ('{"total": 1.0, "children": 3}', "root.children: must be a list or an object"),
        ('{"total": 1.0, "children": [{"total": 1}]}', "children[0]: a child must be an object with a 'name'"),
        ('{"total": 1.0, "children": {"a": {"total": "fast"}}}', "root/a.total: must be a number"),
        ('{"total": 1.0, "gauges": {"g": {"value": 1}}}', "gauges/g.min: must be a number"),
        ('{"total": 1.0, "workers": {}}', "'workers' must be a list"),
    ],
)
def test_a_file_that_is_not_a_timer_tree_is_refused_with_its_reason(tmp_path, content, reason):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TimerFileError, match=reason.replace("[", r"\[").replace("]", r"\]")) as raised:
        load_timing_tree(path)
    assert str(raised.value).startswith(str(path))


def test_a_missing_file_is_refused_by_name(tmp_path):
    with pytest.raises(TimerFileError, match="no such file"):
        load_timing_tree(tmp_path / "absent.json")


def test_timer_file_errors_are_value_errors():
    assert issubclass(TimerFileError, ValueError)


# --- NaN and infinite readings ------------------------------------------------------------------


def test_a_nan_gauge_is_written_as_strict_json_and_loads_back_as_nan(tmp_path, strict_json):
    set_gauge("loss", 0.5)
    set_gauge("loss", float("nan"))
    set_gauge("grad_norm", float("inf"))
    path = write_timing_tree(tmp_path / "run_timers.json")
    written = strict_json(path.read_text())
    assert written["gauges"]["loss"] == {"value": "NaN", "min": 0.5, "max": 0.5, "count": 2}
    assert written["gauges"]["grad_norm"]["value"] == "Infinity"
    loaded = load_timing_tree(path)
    assert math.isnan(loaded["gauges"]["loss"]["value"])
    assert loaded["gauges"]["grad_norm"]["max"] == math.inf


def test_a_recorded_nan_counter_is_written_by_name_and_loads_back(tmp_path, strict_json):
    events.start_recording()
    try:
        with hierarchical_timer("update"):
            set_gauge("loss", float("nan"))
        path = write_timing_tree(tmp_path / "run_timers.json")
    finally:
        events.stop_recording()
        events.clear_recording()
    (trainer,) = strict_json(path.read_text())["timeline"]["processes"]
    assert [counter[2] for counter in trainer["counters"]] == ["NaN"]
    (loaded,) = load_timing_tree(path)["timeline"]["processes"]
    assert math.isnan(loaded["counters"][0][2])


def test_the_file_is_indented_but_its_timeline_is_one_compact_line_and_loads_back(tmp_path, fake_clock):
    events.start_recording()
    try:
        for _ in range(3):
            with hierarchical_timer("step"):
                fake_clock.advance(0.5)
        path = write_timing_tree(tmp_path / "run_timers.json")
    finally:
        events.stop_recording()
        events.clear_recording()
    lines = path.read_text().splitlines()
    assert '  "name": "root",' in lines
    (timeline_line,) = [line for line in lines if line.startswith('  "timeline": ')]
    assert timeline_line == lines[-2]  # the last section, on one line of its own
    assert json.loads(timeline_line.removeprefix('  "timeline": '))["processes"]
    (trainer,) = load_timing_tree(path)["timeline"]["processes"]
    assert [span[0] for span in trainer["threads"][0]["spans"]] == ["step"] * 3


def test_numpy_gauges_of_the_trainer_are_dumped(tmp_path):
    set_gauge("loss", np.float32(0.25))
    path = write_timing_tree(tmp_path / "run_timers.json")
    assert load_timing_tree(path)["gauges"]["loss"]["value"] == 0.25


def test_a_reading_that_is_neither_a_number_nor_a_name_is_refused(tmp_path):
    path = write_json(tmp_path / "t.json", {"total": 1.0, "gauges": {"g": {"value": "nan", "min": 1, "max": 1, "count": 1}}})
    with pytest.raises(TimerFileError, match=r'gauges/g.value: must be a number \(or "NaN"'):
        load_timing_tree(path)


# --- names, depth and size limits ---------------------------------------------------------------


def test_a_block_name_with_a_lone_surrogate_is_written_as_its_escape_and_loads(tmp_path):
    with hierarchical_timer("load /data/\udcff.bin"):
        pass
    loaded = load_timing_tree(write_timing_tree(tmp_path / "run_timers.json"))
    assert loaded["children"][0]["name"] == "load /data/\\udcff.bin"


def test_a_file_with_a_lone_surrogate_in_a_name_is_refused_naming_the_node(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"total": 1.0, "children": [{"name": "step", "children": [{"name": "bad\\ud800"}]}]}')
    with pytest.raises(TimerFileError, match=r"root/step/bad\\ud800.name: name 'bad\\ud800' is not valid Unicode"):
        load_timing_tree(path)


def nested(depth: int) -> dict:
    node: dict = {"name": "leaf", "total": 0.0, "count": 1}
    for _ in range(depth):
        node = {"name": "level", "total": 0.0, "count": 1, "children": [node]}
    return node


@pytest.mark.parametrize("depth", [MAX_FILE_DEPTH + 1, 600, 5000])
def test_a_file_nested_too_deeply_is_refused_in_one_line(tmp_path, depth):
    path = tmp_path / "deep.json"
    text = '{"total": 1.0, "children": ' + '[{"name": "a", "children": ' * depth + "[]" + "}]" * depth + "}"
    path.write_text(text)
    with pytest.raises(TimerFileError, match="nested") as raised:
        load_timing_tree(path)
    assert "\n" not in str(raised.value)


def test_a_tree_as_deep_as_rlprof_writes_loads(tmp_path):
    path = write_json(tmp_path / "t.json", nested(MAX_FILE_DEPTH - 1))
    assert load_timing_tree(path)["name"] == "level"


def test_a_deep_recursion_is_dumped_folded_below_the_depth_limit(tmp_path, fake_clock):
    def recurse(levels: int) -> None:
        with hierarchical_timer("recurse"):
            fake_clock.advance(1.0)
            if levels > 1:
                recurse(levels - 1)

    recurse(150)
    node = load_timing_tree(write_timing_tree(tmp_path / "run_timers.json", include_threads=False))
    for _ in range(MAX_DEPTH - 1):
        (node,) = node["children"]
    assert node["name"] == "recurse"
    (folded,) = node["children"]
    assert folded["name"] == FOLDED_BLOCK_NAME
    # The fold holds the 51 levels below the limit: their total and the calls that entered them.
    assert (folded["total"], folded["count"], folded["children"]) == (51.0, 1, [])
    assert node["self"] == 1.0


@pytest.mark.parametrize(
    "content, reason",
    [
        ('{"total": 1.0, "count": ' + "9" * 400 + "}", "root.count: must be a whole number from 0 to 2\\*\\*63-1, got a 1329-bit integer"),
        ('{"total": ' + "9" * 400 + "}", "root.total: must be a finite time >= 0, got a 1329-bit integer"),
        ('{"total": 1.0, "count": 9223372036854775808}', "root.count: must be a whole number from 0 to 2\\*\\*63-1"),
        ('{"total": 1.0, "gauges": {"g": {"value": ' + "9" * 400 + ', "min": 1, "max": 1, "count": 1}}}', "gauges/g.value: must be a number"),
    ],
)
def test_numbers_too_large_for_their_field_are_refused(tmp_path, content, reason):
    path = tmp_path / "big.json"
    path.write_text(content)
    with pytest.raises(TimerFileError, match=reason):
        load_timing_tree(path)


def worker_with(**sections) -> dict:
    return {"total": 1.0, "workers": [{"name": "worker 0", "worker_id": 0, "total": 1.0, **sections}]}


CRITICAL_PATH = {
    "vector_steps": 3,
    "last_to_reply": 2,
    "wait_as_last_seconds": 0.004,
    "wait_as_last_histogram": {"bounds_seconds": [0.001, 0.01], "counts": [0, 2, 0]},
}
ENV_TIME = {"wall_seconds": 0.5, "cpu_seconds": 0.25, "calls": 4, "cpu_measured_calls": 2}


def test_a_workers_critical_path_and_env_time_load_back_as_written(tmp_path):
    path = write_json(tmp_path / "run.json", worker_with(critical_path=CRITICAL_PATH, env_time=ENV_TIME))
    worker = load_timing_tree(path)["workers"][0]
    assert worker["critical_path"] == CRITICAL_PATH
    assert worker["env_time"] == ENV_TIME


@pytest.mark.parametrize(
    "sections, reason",
    [
        ({"critical_path": []}, "workers[0].critical_path: must be an object"),
        ({"critical_path": {**CRITICAL_PATH, "last_to_reply": -1}}, "workers[0].critical_path.last_to_reply"),
        (
            {"critical_path": {**CRITICAL_PATH, "wait_as_last_histogram": {"bounds_seconds": [1.0], "counts": [1]}}},
            "one count more than bounds",
        ),
        ({"env_time": {**ENV_TIME, "cpu_seconds": -0.1}}, "workers[0].env_time.cpu_seconds"),
        ({"env_time": {"wall_seconds": 0.5, "cpu_seconds": 0.25}}, "workers[0].env_time.calls"),
    ],
)
def test_a_malformed_critical_path_or_env_time_is_refused_naming_the_field(tmp_path, sections, reason):
    path = write_json(tmp_path / "bad.json", worker_with(**sections))
    with pytest.raises(TimerFileError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        load_timing_tree(path)


@pytest.mark.parametrize(
    ("node_fields", "message"),
    [
        ({"min": 2.0, "max": 1.0}, r"root/step: min \(2.0\) is greater than max \(1.0\)"),
        ({"min": 1.0}, "root/step: has 'min' but no 'max'"),
        ({"max": -1.0, "min": 0.0}, r"root/step.max: must be a finite time >= 0"),
    ],
)
def test_bad_per_call_extremes_are_refused_naming_the_node(tmp_path, node_fields, message):
    path = tmp_path / "run.json"
    step = {"name": "step", "total": 3.0, "count": 2, "children": [], **node_fields}
    path.write_text(json.dumps({"name": "root", "total": 3.0, "children": [step]}))
    with pytest.raises(TimerFileError, match=message):
        load_timing_tree(path)


def test_domain_labels_scopes_and_event_details_load_back_as_written(tmp_path, fake_clock):
    from profiler import Domain, scope
    from profiler.recording import events

    events.start_recording()
    try:
        with scope("train"):
            with Domain("rl").new_frame("iteration"):
                fake_clock.advance(0.5)
        path = write_timing_tree(tmp_path / "run_timers.json")
    finally:
        events.stop_recording()
        events.clear_recording()
    written, loaded = json.loads(path.read_text()), load_timing_tree(path)
    assert loaded["children"] == written["children"]
    iteration = loaded["children"][0]
    assert (iteration["domain"], iteration["object_type"], iteration["scopes"]) == ("rl", "frame", ["train:"])
    assert loaded["timeline"]["processes"][0]["threads"][0]["spans"][0][3] == {
        "cat": "rl", "object_type": "frame", "frame": 1}


@pytest.mark.parametrize(
    ("span", "reason"),
    [
        (["a", 1.0, 2.0, ["cat", "rl"]], r"must be \[name, 2 numbers\] and an optional object of details"),
        (["a", 1.0, 2.0, {"cat": None}], "detail 'cat' must be a string or a number"),
        (["a", 1.0, 2.0, {"frame": float("inf")}], "detail 'frame' must be finite"),
    ],
)
def test_bad_event_details_are_refused_naming_the_event(tmp_path, span, reason):
    timeline = {"clock": "perf_counter", "processes": [
        {"pid": 1, "name": "trainer", "threads": [{"tid": 1, "name": "main", "spans": [span]}]}]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"total": 1.0, "timeline": timeline}))
    with pytest.raises(TimerFileError, match=r"timeline.processes\[0\].threads\[0\].spans\[0\]"):
        load_timing_tree(path)
    with pytest.raises(TimerFileError, match=reason):
        load_timing_tree(path)


def test_scopes_that_are_not_a_list_of_names_are_refused(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"total": 1.0, "children": [{"name": "step", "scopes": "train:"}]}))
    with pytest.raises(TimerFileError, match="root/step.scopes: must be a list of scope names"):
        load_timing_tree(path)


def test_a_span_ending_before_it_starts_is_refused_naming_the_span(tmp_path):
    spans = [["a", 1.0, 2.0], ["b", 3.0, 2.5, {"cat": "rl"}], ["c", 4.0, 5.0]]
    timeline = {"clock": "perf_counter", "processes": [
        {"pid": 1, "name": "trainer", "threads": [{"tid": 1, "name": "main", "spans": spans}]}]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"total": 1.0, "timeline": timeline}))
    with pytest.raises(TimerFileError, match=r"threads\[0\].spans\[1\]: ends before it starts"):
        load_timing_tree(path)


def thread_file(tmp_path, thread: dict):
    timeline = {"clock": "perf_counter", "processes": [{"pid": 1, "name": "trainer", "threads": [thread]}]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"total": 1.0, "timeline": timeline}))
    return path


def test_a_threads_moment_from_which_its_spans_are_complete_is_read_back(tmp_path):
    path = thread_file(tmp_path, {"tid": 1, "name": "main", "spans": [["a", 1.0, 2.0]], "spans_complete_after": 1.5})
    assert load_timing_tree(path)["timeline"]["processes"][0]["threads"][0]["spans_complete_after"] == 1.5


def test_a_moment_from_which_spans_are_complete_that_is_no_number_is_refused(tmp_path):
    path = thread_file(tmp_path, {"tid": 1, "name": "main", "spans": [], "spans_complete_after": "soon"})
    with pytest.raises(TimerFileError, match=r"threads\[0\].spans_complete_after: must be a finite number"):
        load_timing_tree(path)


# --- written and read at once (rlprof run's exit) -----------------------------------------------


@pytest.mark.parametrize("strict_json_names", [False, True], ids=["plain names and readings",
                                                             "a lone surrogate and NaN readings"])
def test_the_tree_written_and_read_at_once_is_the_tree_the_file_loads_as(tmp_path, strict_json_names):
    """What ``rlprof run`` analyses without reading its file back: every section a real run with
    env workers and a thread of its own writes (their trees and timelines), numpy gauges and event
    details; and, where the file names something for strict JSON, a block's name holding a lone
    surrogate and NaN readings."""
    import threading

    import gymnasium as gym

    from profiler import Domain, mark
    from profiler.recording import memory
    from profiler.tree.strict_json import dumps
    from profiler.tree.timer_json import write_and_read_timing_tree

    from envmanager.subprocess_env_manager import SubprocessEnvManager

    def log_once() -> None:
        with hierarchical_timer("log"):
            pass

    events.start_recording()
    memory.start_sampling(interval=3600)
    try:
        envs = SubprocessEnvManager([lambda: gym.make("CartPole-v1")] * 2)
        try:
            envs.reset(seed=0)
            for step in range(20):
                with Domain("rl").new_frame("iteration"):
                    envs.step(np.zeros(2, dtype=np.int64))
                    set_gauge("loss", float("nan") if strict_json_names and step == 3 else np.float32(step))
                mark("checkpoint")
            with hierarchical_timer("save \udcff" if strict_json_names else "save"):
                memory.sample_now()
            logger = threading.Thread(target=log_once, name="logger")
            logger.start()
            logger.join()
        finally:
            envs.close()
        path, tree = write_and_read_timing_tree(tmp_path / "run_timers.json")
    finally:
        memory.stop_sampling()
        memory.clear_memory()
        events.stop_recording()
        events.clear_recording()
    assert path == tmp_path / "run_timers.json"
    assert {"workers", "timeline", "memory"} <= tree.keys()
    assert len(tree["timeline"]["processes"]) == 3  # the trainer and its two workers
    assert any(child["name"].startswith("thread:") for child in tree["children"])  # the logger's
    assert dumps(tree) == dumps(load_timing_tree(path))
