"""Specification of reading the critical path, env CPU time, cores and busy processes of a dump."""

from __future__ import annotations

import pytest
from run_files import write_vector_run

from profiler import load_timing_tree
from profiler.analysis.run_measurements import read_measurements


@pytest.fixture
def measured_tree(tmp_path, fake_clock):
    return load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, measured=True,
                                             env_cpu_fraction=0.25, cores=2, busy_processes=5))


def test_each_worker_carries_its_critical_path(measured_tree):
    measurements = read_measurements(measured_tree)
    slow = measurements.workers[3].critical_path
    assert (slow.vector_steps, slow.last_to_reply, slow.last_share) == (10, 10, 1.0)
    assert slow.wait_as_last_seconds == pytest.approx(0.060)
    assert slow.histogram_bounds_seconds == (0.001, 0.01)
    assert measurements.every_worker_has_critical_path


def test_each_worker_carries_its_env_wall_and_cpu_time(measured_tree):
    env_time = read_measurements(measured_tree).workers[3].env_time
    assert (env_time.wall_seconds, env_time.cpu_seconds, env_time.calls) == pytest.approx((0.1, 0.025, 10))
    assert env_time.off_cpu_seconds == pytest.approx(0.075)


def test_cores_and_busy_processes_are_read_from_the_metadata_strings(measured_tree):
    measurements = read_measurements(measured_tree)
    assert (measurements.cores_available, measurements.busy_processes) == (2, 5)


def test_busy_time_and_env_step_calls_come_from_each_workers_tree(measured_tree):
    workers = read_measurements(measured_tree).workers
    assert [worker.busy_seconds for worker in workers] == pytest.approx([0.04, 0.04, 0.04, 0.1])
    assert [worker.env_step_calls for worker in workers] == [10] * 4


def test_an_old_file_has_none_of_the_measurements_and_no_problems(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock))
    measurements = read_measurements(tree)
    assert {(worker.critical_path, worker.env_time) for worker in measurements.workers} == {(None, None)}
    assert (measurements.cores_available, measurements.busy_processes) == (None, None)
    assert measurements.problems == []
    assert not measurements.every_worker_has_critical_path


@pytest.mark.parametrize("damage, field", [
    (lambda entry: entry.update(critical_path=[1, 2]), "critical_path is not an object"),
    (lambda entry: entry["critical_path"].update(last_to_reply=11), "critical_path needs"),
    (lambda entry: entry["critical_path"].update(wait_as_last_seconds=-1.0), "critical_path needs"),
    (lambda entry: entry["critical_path"].update(vector_steps=True), "critical_path needs"),
    (lambda entry: entry["critical_path"].update(wait_as_last_histogram={"counts": "x"}),
     "wait_as_last_histogram is malformed"),
    (lambda entry: entry["env_time"].update(cpu_seconds="fast"), "env_time needs"),
    (lambda entry: entry.update(env_time=None), None),
])
def test_a_damaged_field_is_ignored_and_the_problem_named(measured_tree, damage, field):
    damage(measured_tree["workers"][1])
    measurements = read_measurements(measured_tree)
    if field is None:
        assert measurements.problems == []
    else:
        (problem,) = measurements.problems
        assert problem.startswith("worker 1: ") and field in problem


@pytest.mark.parametrize("text", ["two", "0", "-3", ""])
def test_metadata_that_is_not_a_positive_whole_number_is_ignored_and_named(measured_tree, text):
    measured_tree["metadata"]["cores_available"] = text
    measurements = read_measurements(measured_tree)
    assert measurements.cores_available is None
    assert measurements.problems == [f"metadata cores_available={text!r} is not a whole number "
                                     ">= 1; ignored"]
