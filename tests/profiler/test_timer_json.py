"""Specification of the timer JSON file: atomic writes, our layout, ML-Agents' layout, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler import (
    TimerFileError,
    hierarchical_timer,
    load_timing_tree,
    set_gauge,
    timers_json_path,
    write_timing_tree,
)
from profiler.atomic_file import write_atomically

MLAGENTS_FILE = Path(__file__).parent.parent / "data" / "mlagents_timers.json"


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
        "children": [{"name": "policy", "total": 1.0, "count": 1, "self": 1.0, "children": []}],
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
