"""Specification of the per-worker table: figures side by side, no judgement passed."""

from __future__ import annotations

import pytest
from run_files import STEPS, write_plain_run, write_vector_run

from profiler import TimerStack, hierarchical_timer, load_timing_tree, write_timing_tree
from profiler.analysis.worker_report import MAX_PER_CALL, PEAK_INTERVAL_MEAN, worker_report
from profiler.multiprocess.merge import TimerMerger
from profiler.multiprocess.payload import snapshot_and_flush


def test_each_worker_reports_its_mean_step_time(vector_tree):
    report = worker_report(vector_tree)
    assert [worker.label for worker in report.workers] == [f"worker {i}" for i in range(4)]
    assert [worker.mean for worker in report.workers] == pytest.approx([0.004, 0.004, 0.004, 0.010])
    assert [worker.steps for worker in report.workers] == [STEPS] * 4
    assert report.mean == pytest.approx(0.0055)


def without_per_call_extremes(node):
    """The tree as a file that records no per-call min/max (ML-Agents', an older rlprof) has it."""
    node.pop("min", None)
    node.pop("max", None)
    for child in node["children"]:
        without_per_call_extremes(child)
    return node


def test_the_slowest_step_is_unknown_unless_recorded(vector_tree):
    for worker in vector_tree["workers"]:
        without_per_call_extremes(worker)
    assert {(w.max_time, w.max_kind) for w in worker_report(vector_tree).workers} == {(None, None)}


def test_the_slowest_step_is_the_merger_peak_mean_when_given(vector_tree):
    without_per_call_extremes(vector_tree["workers"][3])
    vector_tree["workers"][3]["peak_mean"] = {"env.step": 0.02}
    slowest = worker_report(vector_tree).workers[3]
    assert (slowest.max_time, slowest.max_kind) == (0.02, PEAK_INTERVAL_MEAN)


def test_the_slowest_step_is_the_per_call_max_when_nodes_record_it(vector_tree):
    vector_tree["workers"][0]["children"][0]["max"] = 0.005
    first = worker_report(vector_tree).workers[0]
    assert (first.max_time, first.max_kind) == (0.005, MAX_PER_CALL)


def test_no_workers_section_means_no_worker_report(tmp_path, fake_clock):
    assert worker_report(load_timing_tree(write_plain_run(tmp_path / "run.json", fake_clock))) is None


def test_the_critical_path_and_cpu_columns_are_filled_when_recorded(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, measured=True,
                                             env_cpu_fraction=0.5))
    report = worker_report(tree)
    assert report.has_critical_path and report.has_cpu_time
    assert [worker.last_share for worker in report.workers] == [0.0, 0.0, 0.0, 1.0]
    assert report.workers[3].wait_as_last == pytest.approx(0.060)
    assert [worker.cpu_share for worker in report.workers] == pytest.approx([0.5] * 4)


def test_without_the_measurements_those_columns_stay_empty(vector_tree):
    report = worker_report(vector_tree)
    assert not report.has_critical_path and not report.has_cpu_time
    assert {(worker.last_share, worker.wait_as_last, worker.cpu_share)
            for worker in report.workers} == {(None, None, None)}


def test_a_run_merged_by_the_real_merger_reports_the_mergers_figures(tmp_path, fake_clock):
    """Worker stacks flushed into payloads and merged by ``TimerMerger``, as the env manager does."""
    merger = TimerMerger()
    workers = [TimerStack(f"worker {index}") for index in range(4)]
    for _ in range(STEPS):
        with hierarchical_timer("vector.step"):
            with hierarchical_timer("vector.wait_for_workers"):
                for stack, seconds in zip(workers, (0.004, 0.004, 0.004, 0.010)):
                    with hierarchical_timer("env.step", stack):
                        fake_clock.advance(seconds)
            for index, stack in enumerate(workers):
                merger.merge_payload(index, snapshot_and_flush(stack))
    tree = load_timing_tree(write_timing_tree(tmp_path / "merged.json"))

    report = worker_report(tree)
    slowest = merger.slowest_worker("env.step")
    assert report.mean == pytest.approx(slowest.mean)
    assert max(report.workers, key=lambda worker: worker.mean).worker_id == slowest.worker_id
    assert report.workers[3].max_kind == MAX_PER_CALL
    assert report.workers[3].max_time == pytest.approx(0.010)
