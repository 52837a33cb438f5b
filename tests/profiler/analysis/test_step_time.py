"""Specification of the vector-step breakdown and the per-worker step report."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_files import MANAGER_NAMES, STEPS, write_plain_run, write_vector_run

from profiler import load_timing_tree
from profiler.analysis.step_time import (
    MAX_PER_CALL,
    PEAK_INTERVAL_MEAN,
    step_breakdowns,
    worker_report,
)

MLAGENTS_FILE = Path(__file__).parents[2] / "data" / "mlagents_timers.json"


@pytest.fixture
def vector_tree(tmp_path, fake_clock):
    return load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock))


def parts_of(breakdown):
    return {part.label: part.seconds for part in breakdown.parts}


def test_the_vector_step_splits_into_compute_waiting_transport_and_the_rest(vector_tree):
    (breakdown,) = step_breakdowns(vector_tree)
    assert breakdown.block == "vector.step"
    assert breakdown.calls == STEPS
    # Workers take 4, 4, 4 and 10 ms: the mean worker computes 5.5 ms, the trainer waits 10 ms.
    assert parts_of(breakdown) == pytest.approx({
        "env compute (mean worker)": 0.055,
        "waiting on the slowest worker": 0.045,
        "rest of the wait (pipe latency, wake-up)": 0.0,
        "transport (send/receive/decode)": 0.030,
        "other trainer work in the step": 0.005,
    })


def test_the_env_managers_own_block_names_get_the_same_breakdown(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, names=MANAGER_NAMES))
    (breakdown,) = step_breakdowns(tree)
    assert breakdown.block == "env_manager.step"
    assert parts_of(breakdown)["waiting on the slowest worker"] == pytest.approx(0.045)
    assert parts_of(breakdown)["transport (send/receive/decode)"] == pytest.approx(0.030)


def test_a_wait_longer_than_the_slowest_worker_is_latency_not_straggling(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock,
                                             worker_step_seconds=(0.001, 0.001),
                                             latency_seconds=0.002))
    (breakdown,) = step_breakdowns(tree)
    assert parts_of(breakdown)["waiting on the slowest worker"] == pytest.approx(0.0)
    assert parts_of(breakdown)["rest of the wait (pipe latency, wake-up)"] == pytest.approx(0.020)
    assert "pipe costs more than the environments" in breakdown.verdict


def test_without_per_worker_trees_the_wait_beyond_compute_stays_one_part(tmp_path, fake_clock):
    tree = load_timing_tree(
        write_vector_run(tmp_path / "run.json", fake_clock, with_workers_section=False))
    assert parts_of(step_breakdowns(tree)[0])[
        "waiting beyond the mean compute (straggler or latency)"] == pytest.approx(0.045)


def test_a_step_without_merged_worker_time_reports_its_wait_whole(vector_tree):
    vector_step = vector_tree["children"][0]["children"][1]
    vector_step["children"] = [child for child in vector_step["children"]
                               if child["name"] != "env.step"]
    (breakdown,) = step_breakdowns(vector_tree)
    assert parts_of(breakdown)["waiting for workers (their time is merged elsewhere)"] == (
        pytest.approx(0.1))
    assert "no worker time merged" in breakdown.verdict


def test_the_parts_add_up_to_the_step_total(vector_tree):
    (breakdown,) = step_breakdowns(vector_tree)
    assert sum(part.seconds for part in breakdown.parts) == pytest.approx(breakdown.total)


def test_the_breakdown_counts_workers_from_the_workers_section(vector_tree):
    (breakdown,) = step_breakdowns(vector_tree)
    assert (breakdown.workers, breakdown.worker_calls) == (4, 40)
    assert breakdown.worker_time == pytest.approx(0.22)


def test_without_a_workers_section_the_worker_count_comes_from_the_call_counts(tmp_path, fake_clock):
    tree = load_timing_tree(
        write_vector_run(tmp_path / "run.json", fake_clock, with_workers_section=False))
    assert step_breakdowns(tree)[0].workers == 4


def test_imbalanced_workers_are_called_out(vector_tree):
    assert "workers are imbalanced" in step_breakdowns(vector_tree)[0].verdict
    assert "82%" in step_breakdowns(vector_tree)[0].verdict


def test_a_pipe_slower_than_the_envs_is_called_out(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(
        tmp_path / "run.json", fake_clock, worker_step_seconds=(0.0005, 0.0005)))
    assert "pipe costs more than the environments" in step_breakdowns(tree)[0].verdict


def test_a_single_process_run_has_no_breakdown(tmp_path, fake_clock):
    assert step_breakdowns(load_timing_tree(write_plain_run(tmp_path / "run.json", fake_clock))) == []


def test_an_mlagents_env_step_is_split_into_worker_time_and_the_rest():
    (breakdown,) = step_breakdowns(load_timing_tree(MLAGENTS_FILE))
    assert (breakdown.block, breakdown.worker_blocks, breakdown.calls) == (
        "env_step", ("worker_root",), 3)
    compute = parts_of(breakdown)["env compute (mean worker)"]
    assert compute == pytest.approx(0.0032420890000253166)  # the workers' timed blocks
    assert sum(parts_of(breakdown).values()) == pytest.approx(0.009747153999967395)


def test_each_worker_reports_its_mean_step_time(vector_tree):
    report = worker_report(vector_tree)
    assert [worker.label for worker in report.workers] == [f"worker {i}" for i in range(4)]
    assert [worker.mean for worker in report.workers] == pytest.approx([0.004, 0.004, 0.004, 0.010])
    assert [worker.steps for worker in report.workers] == [STEPS] * 4


def test_the_straggler_is_the_worker_with_the_highest_mean(vector_tree):
    report = worker_report(vector_tree)
    assert report.straggler.worker_id == 3
    assert report.mean == pytest.approx(0.0055)
    assert report.straggler_gap == pytest.approx(0.0045)
    assert report.straggler_gap_share == pytest.approx(0.0045 / 0.0055)
    assert not report.balanced


def test_workers_within_five_percent_are_balanced(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(
        tmp_path / "run.json", fake_clock, worker_step_seconds=(0.0100, 0.0101)))
    assert worker_report(tree).balanced


def test_a_lone_worker_has_no_straggler(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(
        tmp_path / "run.json", fake_clock, worker_step_seconds=(0.01,)))
    assert worker_report(tree).straggler is None


def test_the_slowest_step_is_unknown_unless_recorded(vector_tree):
    assert {(w.max_time, w.max_kind) for w in worker_report(vector_tree).workers} == {(None, None)}


def test_the_slowest_step_is_the_merger_peak_mean_when_given(vector_tree):
    vector_tree["workers"][3]["peak_mean"] = {"env.step": 0.02}
    straggler = worker_report(vector_tree).workers[3]
    assert (straggler.max_time, straggler.max_kind) == (0.02, PEAK_INTERVAL_MEAN)


def test_the_slowest_step_is_the_per_call_max_when_nodes_record_it(vector_tree):
    vector_tree["workers"][0]["children"][0]["max"] = 0.005
    first = worker_report(vector_tree).workers[0]
    assert (first.max_time, first.max_kind) == (0.005, MAX_PER_CALL)


def test_no_workers_section_means_no_worker_report(tmp_path, fake_clock):
    assert worker_report(load_timing_tree(write_plain_run(tmp_path / "run.json", fake_clock))) is None


def test_a_run_merged_by_the_real_merger_names_the_same_straggler(tmp_path, fake_clock):
    """Worker stacks flushed into payloads and merged by ``TimerMerger``, as the env manager does.

    With one clock the workers here run one after another inside the trainer's wait, so the
    trainer waits for the sum of their steps: 22 ms for a mean worker compute of 5.5 ms.
    """
    from profiler import TimerStack, hierarchical_timer, write_timing_tree
    from profiler.merge import TimerMerger
    from profiler.payload import snapshot_and_flush

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
    summary = merger.straggler_summary("env.step")
    assert report.straggler.worker_id == summary.slowest_worker == 3
    assert report.straggler_gap == pytest.approx(summary.gap)
    assert report.straggler.max_kind == PEAK_INTERVAL_MEAN
    (breakdown,) = step_breakdowns(tree)
    assert parts_of(breakdown)["env compute (mean worker)"] == pytest.approx(0.055)
    # The slowest worker computes 45 ms more than the mean one; the rest of the wait is the
    # other workers' turns, which the breakdown sees as latency.
    assert parts_of(breakdown)["waiting on the slowest worker"] == pytest.approx(0.045)
    assert parts_of(breakdown)["rest of the wait (pipe latency, wake-up)"] == pytest.approx(0.120)
