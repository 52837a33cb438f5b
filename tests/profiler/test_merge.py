"""Specification of the trainer side: merging payloads into the global tree and per-worker trees."""

from __future__ import annotations

import json
import threading

import pytest

from profiler import get_timer_root, get_timer_tree, hierarchical_timer, load_timing_tree, reset_timers, write_timing_tree
from profiler.merge import PayloadError, TimerMerger
from profiler.payload import PAYLOAD_TAG, PAYLOAD_VERSION, snapshot_and_flush
from profiler.timers import TimerStack
from tree_paths import child_names, find


def payload(*blocks, sequence=1, stream=7, pid=4321, window=(0.0, 1.0), gauges=()):
    """A hand-written payload: each block is (name, total, count, errors, extremes, children)."""
    return (PAYLOAD_TAG, PAYLOAD_VERSION, pid, stream, sequence, *window, tuple(blocks), gauges, None, None)


def step(total=1.0, count=1, children=()):
    per_call = total / count if count else 0.0
    return ("env.step", total, count, 0, (per_call, per_call), children)


def worker_entry(tree: dict, worker_id: int) -> dict:
    return next(entry for entry in tree["workers"] if entry["worker_id"] == worker_id)


# --- where payloads land ------------------------------------------------------------------------


def test_a_payload_lands_under_the_block_open_in_the_trainer(fake_clock):
    merger = TimerMerger()
    with hierarchical_timer("vector.step"):
        merger.merge_payload(0, payload(step(), ("env.reset", 0.5, 1, 0, None, ())))
    tree = get_timer_tree()
    assert [child["name"] for child in find(tree, "vector.step")["children"]] == ["env.step", "env.reset"]


def test_a_payload_can_be_anchored_to_a_named_block(fake_clock):
    merger = TimerMerger()
    with hierarchical_timer("collect") as collect:
        pass
    merger.merge_payload(0, payload(step()), anchor=collect)
    assert find(get_timer_tree(), "collect", "env.step")["count"] == 1


def test_every_merged_node_is_marked_parallel(fake_clock):
    merger = TimerMerger()
    with hierarchical_timer("vector.step"):
        merger.merge_payload(0, payload(step(children=(("physics", 0.5, 1, 0, None, ()),))))
    tree = get_timer_tree()
    assert find(tree, "vector.step", "env.step")["is_parallel"] is True
    assert find(tree, "vector.step", "env.step", "physics")["is_parallel"] is True
    assert "is_parallel" not in find(tree, "vector.step")


def test_parallel_time_does_not_reduce_the_trainers_self_time(fake_clock):
    merger = TimerMerger()
    with hierarchical_timer("vector.step"):
        fake_clock.advance(1.0)
        for worker_id in range(4):
            merger.merge_payload(worker_id, payload(step(total=0.9)))
    vector_step = find(get_timer_tree(), "vector.step")
    assert vector_step["self"] == 1.0
    assert find(vector_step, "env.step")["total"] == pytest.approx(3.6)  # more than its parent


def test_totals_counts_and_errors_add_across_workers_and_payloads(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, payload(("env.step", 1.0, 2, 1, (0.25, 0.75), ()), sequence=1))
    merger.merge_payload(0, payload(("env.step", 0.5, 3, 0, (0.125, 0.25), ()), sequence=2))
    merger.merge_payload(1, payload(("env.step", 0.25, 1, 0, None, ())))
    merged = find(get_timer_tree(), "env.step")
    assert (merged["total"], merged["count"], merged["errors"]) == (1.75, 6, 1)


def test_per_call_extremes_merge_across_workers_and_payloads(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, payload(("env.step", 1.0, 2, 0, (0.25, 0.75), ()), sequence=1))
    merger.merge_payload(0, payload(("env.step", 3.0, 2, 0, (1.0, 2.0), ()), sequence=2))
    merger.merge_payload(1, payload(("env.step", 0.125, 1, 0, None, ())))
    tree = get_timer_tree()
    merged = find(tree, "env.step")
    assert (merged["min"], merged["max"], merged["count"]) == (0.125, 2.0, 5)
    assert (find(worker_entry(tree, 0), "env.step")["min"], find(worker_entry(tree, 0), "env.step")["max"]) == (0.25, 2.0)
    assert (find(worker_entry(tree, 1), "env.step")["min"], find(worker_entry(tree, 1), "env.step")["max"]) == (0.125, 0.125)


def test_a_flushed_worker_stack_merges_to_its_real_extremes(fake_clock):
    merger, worker = TimerMerger(), TimerStack("worker")
    for seconds in (0.5, 4.0):
        with hierarchical_timer("env.step", worker):
            fake_clock.advance(seconds)
        merger.merge_payload(0, snapshot_and_flush(worker))
    merged = find(get_timer_tree(), "env.step")
    assert (merged["min"], merged["max"], merged["count"]) == (0.5, 4.0, 2)


# --- validation and duplicates --------------------------------------------------------------------


def test_a_malformed_payload_raises_and_merges_nothing(fake_clock):
    merger = TimerMerger()
    half_good = payload(step(), ("env.reset", -1.0, 1, 0, None, ()))
    with pytest.raises(PayloadError):
        merger.merge_payload(0, half_good)
    tree = get_timer_tree()
    assert tree["children"] == []
    assert "workers" not in tree


def test_a_foreign_object_raises_payload_error(fake_clock):
    with pytest.raises(PayloadError, match="not an rlprof timer payload"):
        TimerMerger().merge_payload(0, {"env.step": 1.0})


def test_a_bad_worker_id_raises_payload_error(fake_clock):
    with pytest.raises(PayloadError, match="worker_id"):
        TimerMerger().merge_payload(-1, payload(step()))


def test_a_payload_is_never_merged_twice(fake_clock):
    merger = TimerMerger()
    same = payload(step())
    merger.merge_payload(0, same)
    merger.merge_payload(0, same)
    tree = get_timer_tree()
    assert find(tree, "env.step")["count"] == 1
    assert worker_entry(tree, 0)["duplicates"] == 1


def test_a_restarted_worker_starts_a_new_sequence(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, payload(step(), stream=1, pid=100))
    merger.merge_payload(0, payload(step(), stream=2, pid=200))
    tree = get_timer_tree()
    assert find(tree, "env.step")["count"] == 2
    assert worker_entry(tree, 0)["pid"] == 200


def test_a_gap_in_sequence_numbers_counts_as_missed_payloads(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, payload(step(), sequence=1))
    merger.merge_payload(0, payload(step(), sequence=4))
    assert worker_entry(get_timer_tree(), 0)["missed_payloads"] == 2


# --- per-worker trees -----------------------------------------------------------------------------


def test_each_worker_keeps_its_own_tree(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, payload(step(total=1.0)))
    merger.merge_payload(1, payload(step(total=3.0)))
    tree = get_timer_tree()
    assert [entry["name"] for entry in tree["workers"]] == ["worker 0", "worker 1"]
    assert find(worker_entry(tree, 1), "env.step")["total"] == 3.0


def test_a_worker_entry_describes_the_worker(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(3, payload(step(total=0.25), pid=999, window=(10.0, 11.0)))
    merger.merge_payload(3, payload(step(total=0.25), pid=999, window=(11.0, 12.0), sequence=2))
    entry = worker_entry(get_timer_tree(), 3)
    assert entry["pid"] == 999
    assert entry["payloads"] == 2
    assert entry["total"] == 2.0  # the windows the payloads covered
    assert entry["self"] == 1.5  # time in no block: the worker was waiting
    assert "is_parallel" not in find(entry, "env.step")


def test_a_worker_section_added_by_the_driving_code_appears_in_each_worker_entry(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, payload(step()))
    merger.merge_payload(1, payload(step()))
    merger.add_worker_section("queue", lambda entry: {"depth": entry["worker_id"] * 10} if entry["worker_id"] else None)
    tree = get_timer_tree()
    assert worker_entry(tree, 1)["queue"] == {"depth": 10}
    assert "queue" not in worker_entry(tree, 0)


def test_a_worker_section_may_not_replace_a_field_of_the_entry(fake_clock):
    with pytest.raises(ValueError, match="'payloads'"):
        TimerMerger().add_worker_section("payloads", lambda entry: {})


def test_worker_counts_sum_to_the_merged_count(fake_clock):
    merger = TimerMerger()
    for worker_id, count in enumerate([3, 5, 8]):
        merger.merge_payload(worker_id, payload(step(count=count)))
    tree = get_timer_tree()
    per_worker = [find(entry, "env.step")["count"] for entry in tree["workers"]]
    assert sum(per_worker) == find(tree, "env.step")["count"] == 16


def test_slowest_worker_is_the_one_with_the_highest_mean_per_call(fake_clock):
    merger = TimerMerger()
    for worker_id, total in enumerate([1.0, 1.0, 4.0]):
        merger.merge_payload(worker_id, payload(step(total=total, count=10)))
    slowest = merger.slowest_worker("env.step")
    assert slowest.worker_id == 2
    assert slowest.max == pytest.approx(0.4)
    assert slowest.mean == pytest.approx(0.2)
    assert slowest.gap == pytest.approx(0.2)


def test_peak_mean_is_the_slowest_payload_interval(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, payload(step(total=1.0, count=10), sequence=1))
    merger.merge_payload(0, payload(step(total=5.0, count=10), sequence=2))
    (times,) = merger.worker_block_times("env.step")
    assert (times.mean, times.peak_mean) == (0.3, 0.5)
    assert worker_entry(get_timer_tree(), 0)["peak_mean"] == {"env.step": 0.5}


def test_slowest_worker_of_an_unknown_block_is_none(fake_clock):
    assert TimerMerger().slowest_worker("env.step") is None


# --- gauges ---------------------------------------------------------------------------------------


def test_worker_gauges_merge_into_the_worker_entry_and_under_a_prefix_in_the_trainer(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, payload(gauges=(("reward", 2.0, 1.0, 3.0, 4),)))
    merger.merge_payload(1, payload(gauges=(("reward", 5.0, 0.5, 5.0, 2),)))
    tree = get_timer_tree()
    assert worker_entry(tree, 0)["gauges"]["reward"] == {"value": 2.0, "min": 1.0, "max": 3.0, "count": 4}
    assert tree["gauges"]["workers.reward"] == {"value": 5.0, "min": 0.5, "max": 5.0, "count": 6}
    assert "reward" not in tree["gauges"]


# --- the dump ---------------------------------------------------------------------------------------


def test_the_workers_section_survives_a_write_and_load(tmp_path, fake_clock):
    merger = TimerMerger()
    with hierarchical_timer("vector.step"):
        merger.merge_payload(2, payload(step(), gauges=(("fps", 60.0, 60.0, 60.0, 1),)))
    path = write_timing_tree(tmp_path / "run_timers.json")
    written = json.loads(path.read_text())
    loaded = load_timing_tree(path)
    assert loaded["workers"] == written["workers"]
    assert loaded["workers"][0]["worker_id"] == 2


def test_resetting_the_trainer_forgets_the_worker_trees(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, payload(step(), sequence=1))
    reset_timers()
    assert "workers" not in get_timer_tree()
    merger.merge_payload(0, payload(step(), sequence=2))
    assert worker_entry(get_timer_tree(), 0)["payloads"] == 1


def test_a_merger_dumps_with_the_stack_it_merges_into(fake_clock):
    trainer = TimerStack("trainer")
    TimerMerger(trainer).merge_payload(0, payload(step()))
    assert "workers" in get_timer_tree(trainer)
    assert "workers" not in get_timer_tree()


def test_a_worker_expected_before_any_payload_has_an_entry_even_after_a_reset(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(2, payload(step()))
    merger.expect_worker(3)
    assert worker_entry(get_timer_tree(), 3)["payloads"] == 0
    reset_timers()
    assert [(entry["worker_id"], entry["payloads"]) for entry in merger.worker_entries()] == [(3, 0)]


def test_each_worker_entry_names_its_merger(fake_clock):
    train, evaluation = TimerMerger(name="train"), TimerMerger(name="eval")
    train.merge_payload(0, payload(step()))
    evaluation.merge_payload(0, payload(step()))
    entries = get_timer_tree()["workers"]
    assert [(entry["manager"], entry["worker_id"]) for entry in entries] == [("train", 0), ("eval", 0)]
    assert entries[0]["manager_id"] != entries[1]["manager_id"]


def test_a_dump_can_list_the_workers_of_chosen_mergers_only(fake_clock):
    train, evaluation = TimerMerger(name="train"), TimerMerger(name="eval")
    train.merge_payload(0, payload(step()))
    evaluation.merge_payload(0, payload(step()))
    tree = get_timer_tree(mergers=[train])
    assert [entry["manager"] for entry in tree["workers"]] == ["train"]
    assert find(tree, "env.step")["count"] == 2  # the tree itself holds what both merged


def test_a_retired_merger_leaves_the_stacks_dumps_when_one_of_the_same_name_attaches(fake_clock):
    first_round, train = TimerMerger(name="eval"), TimerMerger(name="train")
    first_round.merge_payload(0, payload(step()))
    train.expect_worker(0)
    first_round.retire()
    assert [entry["manager"] for entry in get_timer_tree()["workers"]] == ["eval", "train"]
    second_round = TimerMerger(name="eval")
    second_round.expect_worker(0)
    assert [entry["manager_id"] for entry in get_timer_tree()["workers"]] == [
        train.manager_id, second_round.manager_id
    ]


def test_a_real_snapshot_merges_back_to_the_same_tree(fake_clock):
    worker = TimerStack("worker")
    with hierarchical_timer("env.step", worker):
        fake_clock.advance(1.0)
        with hierarchical_timer("physics", worker):
            fake_clock.advance(0.5)
    TimerMerger().merge_payload(0, snapshot_and_flush(worker))
    tree = get_timer_tree()
    assert find(tree, "env.step")["total"] == 1.5
    assert find(tree, "env.step", "physics")["count"] == 1


# --- threads ----------------------------------------------------------------------------------------


def test_merging_from_a_receiver_thread_while_the_trainer_times_loses_nothing():
    merger = TimerMerger()
    payloads_per_worker = 300

    def receive(worker_id):
        for sequence in range(1, payloads_per_worker + 1):
            merger.merge_payload(worker_id, payload(step(count=2), sequence=sequence))

    receivers = [threading.Thread(target=receive, args=(worker_id,)) for worker_id in range(3)]
    for receiver in receivers:
        receiver.start()
    trainer_steps = 0
    while any(receiver.is_alive() for receiver in receivers) or trainer_steps < 1000:
        with hierarchical_timer("train"):
            with hierarchical_timer("policy"):
                pass
        trainer_steps += 1
    for receiver in receivers:
        receiver.join()
    tree = get_timer_tree()
    # Each payload landed under whichever block the trainer had open: root, train or policy.
    assert count_of_every("env.step", tree) == 3 * payloads_per_worker * 2
    assert find(tree, "train")["count"] == trainer_steps


def count_of_every(name: str, node: dict) -> int:
    own = node["count"] if node["name"] == name else 0
    return own + sum(count_of_every(name, child) for child in node["children"])


def test_a_payload_with_an_overflowing_count_merges_nothing(fake_clock):
    merger = TimerMerger()
    with hierarchical_timer("vector.step"):
        merger.merge_payload(0, payload(step(total=1.0, count=1)))
        with pytest.raises(PayloadError, match="count"):
            merger.merge_payload(0, payload(step(total=1.0, count=1), ("env.reset", 0.5, 10**400, 0, ()), sequence=2))
    tree = get_timer_tree()
    assert find(tree, "vector.step", "env.step")["count"] == 1
    assert child_names(find(tree, "vector.step")) == ["env.step"]
    assert worker_entry(tree, 0)["payloads"] == 1
    # The refused payload did not use up its sequence number.
    merger.merge_payload(0, payload(step(), sequence=2), anchor=get_timer_root().children["vector.step"])
    assert find(get_timer_tree(), "vector.step", "env.step")["count"] == 2


def test_numpy_gauge_readings_merge_as_python_floats(fake_clock):
    import numpy as np

    merger = TimerMerger()
    merger.merge_payload(0, payload(gauges=(("reward", np.float32(2.0), np.float64(1.0), 3, 4),)))
    gauge = worker_entry(get_timer_tree(), 0)["gauges"]["reward"]
    assert gauge == {"value": 2.0, "min": 1.0, "max": 3.0, "count": 4}
    assert all(type(gauge[field]) is float for field in ("value", "min", "max"))
    json.dumps(get_timer_tree(), allow_nan=False)


def test_a_nan_reading_merged_from_a_worker_keeps_the_range_of_the_others(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, payload(gauges=(("loss", 0.5, 0.2, 0.9, 3),)))
    merger.merge_payload(1, payload(gauges=(("loss", float("nan"), float("nan"), float("nan"), 1),)))
    gauge = get_timer_tree()["gauges"]["workers.loss"]
    assert gauge["value"] != gauge["value"]
    assert (gauge["min"], gauge["max"], gauge["count"]) == (0.2, 0.9, 4)


def test_a_workers_domain_objects_keep_their_labels_and_details_through_the_merge(fake_clock):
    from profiler import Domain, events

    payloads = []

    def worker() -> None:
        rl = Domain("rl")
        with rl.new_task("env.step"):
            fake_clock.advance(0.5)
        rl.new_counter("episodes", 1)
        payloads.append(snapshot_and_flush())

    events.start_recording()
    try:
        thread = threading.Thread(target=worker, name="worker thread")
        thread.start()
        thread.join()
        merger = TimerMerger()
        with hierarchical_timer("vector.step"):
            merger.merge_payload(0, payloads[0])
        tree = get_timer_tree()
    finally:
        events.stop_recording()
        events.clear_recording()
    merged = find(tree, "vector.step", "env.step")
    own = find(worker_entry(tree, 0), "env.step")
    assert (merged["domain"], merged["object_type"]) == (own["domain"], own["object_type"]) == ("rl", "task")
    worker_process = tree["timeline"]["processes"][1]
    assert worker_process["threads"][0]["spans"][0][3] == {"cat": "rl", "object_type": "task"}
    assert worker_process["counters"][0][3] == {"cat": "rl"}
