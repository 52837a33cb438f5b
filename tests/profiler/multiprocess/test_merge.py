"""Specification of the trainer side: merging payloads into the global tree and per-worker trees."""

from __future__ import annotations

import contextlib
import json
import threading

import pytest

from profiler import get_timer_root, get_timer_tree, hierarchical_timer, load_timing_tree, reset_timers, write_timing_tree
from profiler.multiprocess.merge import PayloadError, TimerMerger
from profiler.multiprocess.payload import snapshot_and_flush
from profiler.timing.timers import TimerStack
from hand_payloads import tree_payload as payload
from hand_payloads import with_rows
from tree_paths import child_names, find


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
    assert [(entry["payloads"], entry["refused_payloads"], entry["children"]) for entry in tree["workers"]] == [(0, 1, [])]


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


def test_workers_whose_trees_are_merged_elsewhere_get_those_trees_with_this_mergers_name_and_sections(fake_clock):
    # As RayEnvManager(merge_per_node=True) does: a node's aggregator merges worker 1's payloads.
    elsewhere = TimerMerger(TimerStack("node"), name="node")
    elsewhere.merge_payload(1, payload(step()))
    elsewhere.merge_payload(1, payload(step(), sequence=2))
    merger = TimerMerger(name="envs")
    merger.expect_worker(1)
    merger.merge_payload(0, payload(step()))
    merger.add_worker_section("queue", lambda entry: {"steps": find(entry, "env.step")["count"]})
    merger.take_worker_trees_from(lambda: {entry["worker_id"]: entry for entry in elsewhere.worker_entries()})
    entries = {entry["worker_id"]: entry for entry in merger.worker_entries()}
    assert (entries[0]["payloads"], entries[0]["queue"]) == (1, {"steps": 1})
    assert (entries[1]["payloads"], entries[1]["queue"]) == (2, {"steps": 2})
    assert {entry["manager"] for entry in entries.values()} == {"envs"}
    assert find(get_timer_tree(), "env.step")["count"] == 1  # worker 1's steps are not merged here


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


def test_a_payload_with_a_negative_count_merges_nothing(fake_clock):
    merger = TimerMerger()
    with hierarchical_timer("vector.step"):
        merger.merge_payload(0, payload(step(total=1.0, count=1)))
        with pytest.raises(PayloadError, match="count"):
            merger.merge_payload(0, payload(step(total=1.0, count=1), ("env.reset", 0.5, -1, 0, None, ()), sequence=2))
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
    from profiler import Domain
    from profiler.recording import events

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


# --- names declared once (block ids) --------------------------------------------------------------


def worker_payloads(worker: TimerStack, *rounds):
    """One payload per round, each round timing the named blocks once (a/b nests b in a)."""
    payloads = []
    for names in rounds:
        for path in names:
            with contextlib.ExitStack() as nested:
                for name in path.split("/"):
                    nested.enter_context(hierarchical_timer(name, worker))
        payloads.append(snapshot_and_flush(worker))
    return payloads


def test_a_payload_after_the_first_names_no_block_it_declared_before(fake_clock):
    first, second = worker_payloads(TimerStack("worker"), ["env.step/physics"], ["env.step/physics"])
    assert first[7] == (0, ((-1, "env.step"), (0, "physics")))
    assert second[7] == (2, ())


def test_a_block_first_entered_late_is_declared_by_the_next_payload_and_merges(fake_clock):
    merger = TimerMerger()
    payloads = worker_payloads(TimerStack("worker"), ["env.step"], ["env.step", "env.step/render"])
    assert payloads[1][7] == (1, ((0, "render"),))
    for payload_ in payloads:
        merger.merge_payload(0, payload_)
    tree = get_timer_tree()
    assert find(tree, "env.step")["count"] == 3
    assert find(tree, "env.step", "render")["count"] == 1


def test_a_payload_naming_an_id_never_declared_is_refused(fake_clock):
    merger = TimerMerger()
    first = payload(step())
    merger.merge_payload(0, first)
    # The stream declared id 0 only: a row for id 1 names a block nobody declared.
    unknown = with_rows(first[:4] + (2,) + first[5:7] + ((1, ()),) + first[8:], [(1, 1, 0.5, 0.5, 0.5)])
    with pytest.raises(PayloadError, match="block id 1 was never declared"):
        merger.merge_payload(0, unknown)


def test_a_payload_whose_declarations_were_lost_is_refused_saying_so(fake_clock):
    merger = TimerMerger()
    first, _, third = worker_payloads(TimerStack("worker"), ["a"], ["a", "b"], ["a", "b", "c"])
    merger.merge_payload(0, first)
    with pytest.raises(PayloadError, match="lost on the way"):
        merger.merge_payload(0, third)


def test_a_changed_name_for_a_declared_id_is_refused(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, payload(step()))
    renamed = payload(("env.reset", 1.0, 1, 0, None, ()), sequence=2)
    with pytest.raises(PayloadError, match="cannot change"):
        merger.merge_payload(0, renamed)
    assert find(get_timer_tree(), "env.step")["count"] == 1


def test_a_restarted_worker_declares_its_names_anew_in_its_own_stream(fake_clock):
    merger = TimerMerger()
    for process in (TimerStack("worker"), TimerStack("worker, restarted")):
        for payload_ in worker_payloads(process, ["env.step"], ["env.step"]):
            merger.merge_payload(0, payload_)
    tree = get_timer_tree()
    assert find(tree, "env.step")["count"] == 4
    assert worker_entry(tree, 0)["payloads"] == 4


def test_a_payload_refused_for_its_figures_still_declares_its_names(fake_clock):
    merger = TimerMerger()
    worker = TimerStack("worker")
    first, second = worker_payloads(worker, ["env.step"], ["env.step"])
    bad_first = with_rows(first, [(0, 1, float("nan"), 0.5, 0.5)])
    with pytest.raises(PayloadError, match="out of bounds"):
        merger.merge_payload(0, bad_first)
    merger.merge_payload(0, second)
    assert find(get_timer_tree(), "env.step")["count"] == 1


def test_ids_are_kept_across_a_reset_of_the_worker_stack(fake_clock):
    merger = TimerMerger()
    worker = TimerStack("worker")
    (first,) = worker_payloads(worker, ["a", "b"])
    worker.reset()
    (second,) = worker_payloads(worker, ["b", "c"])
    assert second[7] == (2, ((-1, "c"),))
    merger.merge_payload(0, first)
    merger.merge_payload(0, second)
    assert [child["name"] for child in get_timer_tree()["children"]] == ["a", "b", "c"]
    assert find(get_timer_tree(), "b")["count"] == 2


def test_a_reset_of_the_trainer_stack_resolves_ids_in_the_new_tree(fake_clock):
    merger = TimerMerger()
    first, second = worker_payloads(TimerStack("worker"), ["env.step"], ["env.step"])
    merger.merge_payload(0, first)
    reset_timers()
    merger.merge_payload(0, second)
    tree = get_timer_tree()
    assert find(tree, "env.step")["count"] == 1
    assert find(worker_entry(tree, 0), "env.step")["count"] == 1


def test_payloads_declaring_all_names_merge_in_any_order(fake_clock):
    merger, worker = TimerMerger(), TimerStack("worker")
    payloads = []
    for names in (["a"], ["a", "b"]):
        for name in names:
            with hierarchical_timer(name, worker):
                pass
        payloads.append(snapshot_and_flush(worker, declare_all=True))
    merger.merge_payload(0, payloads[1])
    merger.merge_payload(1, payloads[0])
    assert find(get_timer_tree(), "a")["count"] == 2


def test_a_huge_block_name_is_shortened_counted_and_warned_about(fake_clock):
    from profiler.multiprocess.merge import MAX_NAME_LENGTH

    merger = TimerMerger()
    with pytest.warns(RuntimeWarning, match="shortened_names"):
        merger.merge_payload(0, payload(("x" * 1_000_000, 1.0, 1, 0, None, ())))
    tree = get_timer_tree()
    assert [child["name"] for child in tree["children"]] == ["x" * MAX_NAME_LENGTH]
    assert worker_entry(tree, 0)["shortened_names"] == 1


def test_numpy_numbers_in_a_worker_tree_travel_as_python_numbers(fake_clock):
    import numpy as np

    merger, worker = TimerMerger(), TimerStack("worker")
    node = worker.root.get_child("env.step")
    node.add_runs(np.float32(0.5), np.int64(2), np.int64(0), np.float64(0.25), np.float32(0.25))
    merger.merge_payload(0, snapshot_and_flush(worker))
    merged = find(get_timer_tree(), "env.step")
    assert (merged["total"], merged["count"], merged["min"]) == (0.5, 2, 0.25)
    assert type(merged["count"]) is int and type(merged["total"]) is float


def test_names_nested_deeper_than_the_limit_are_refused(fake_clock):
    declared = tuple((node_id - 1, "deep") for node_id in range(150))
    too_deep = payload(step())[:7] + ((0, declared),) + payload(step())[8:]
    with pytest.raises(PayloadError, match="deeper than"):
        TimerMerger().merge_payload(0, too_deep)


def without_parallel_marks(node: dict) -> dict:
    return {
        **{key: value for key, value in node.items() if key not in ("is_parallel", "children")},
        "children": [without_parallel_marks(child) for child in node["children"]],
    }


def test_the_merged_tree_is_the_tree_the_worker_ran_whatever_the_flushes_cut(fake_clock):
    def run(stack: TimerStack, flush) -> None:
        with hierarchical_timer("worker.loop", stack):
            for step in range(12):
                with hierarchical_timer("env.step", stack):
                    fake_clock.advance(0.5)
                    if step >= 4:  # a block first entered late
                        with hierarchical_timer("render", stack):
                            fake_clock.advance(0.25)
                    if step % 5 == 0:
                        with contextlib.suppress(ValueError), hierarchical_timer("physics", stack):
                            fake_clock.advance(0.125 * (step + 1))
                            raise ValueError("an error counted in the block")
                if step % 3 == 0:
                    flush()  # inside worker.loop: its open run is split
        flush()

    reference = TimerStack("reference")
    run(reference, lambda: None)
    merger, worker = TimerMerger(), TimerStack("worker")
    with hierarchical_timer("collect") as collect:
        pass
    run(worker, lambda: merger.merge_payload(0, snapshot_and_flush(worker), anchor=collect))
    tree = get_timer_tree()
    ran = [child.to_dict(1) for child in reference.root.children.values()]
    assert [without_parallel_marks(child) for child in find(tree, "collect")["children"]] == ran
    assert worker_entry(tree, 0)["children"] == ran


def test_a_refused_payload_is_counted_in_the_workers_entry(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, payload(step()))
    with pytest.raises(PayloadError):
        merger.merge_payload(0, payload(("env.step", float("nan"), 1, 0, None, ()), sequence=2))
    entry = worker_entry(get_timer_tree(), 0)
    assert (entry["payloads"], entry["refused_payloads"]) == (1, 1)


def test_a_payload_arriving_after_a_later_one_is_merged_not_taken_for_a_duplicate(fake_clock):
    merger = TimerMerger()
    for sequence in (1, 3, 2, 2):
        merger.merge_payload(0, payload(step(), sequence=sequence))
    tree = get_timer_tree()
    entry = worker_entry(tree, 0)
    assert find(tree, "env.step")["count"] == 3
    assert (entry["payloads"], entry["missed_payloads"], entry["duplicates"]) == (3, 0, 1)


def test_payloads_with_the_same_blocks_land_under_the_block_open_as_each_arrives(fake_clock):
    merger = TimerMerger()
    worker = TimerStack("worker")
    for anchor_name in ("collect", "update", "collect"):
        with hierarchical_timer(anchor_name):
            (flushed,) = worker_payloads(worker, ["env.step/physics"])
            merger.merge_payload(0, flushed)
    tree = get_timer_tree()
    assert find(tree, "collect", "env.step", "physics")["count"] == 2
    assert find(tree, "update", "env.step", "physics")["count"] == 1
    assert find(worker_entry(tree, 0), "env.step", "physics")["count"] == 3


def test_blocks_that_come_and_go_between_payloads_merge_into_their_own_nodes(fake_clock):
    merger = TimerMerger()
    runs = [["a", "b"], ["a", "c"], ["a", "b"], ["c"], ["a", "b"]]
    for flushed in worker_payloads(TimerStack("worker"), *runs):
        merger.merge_payload(0, flushed)
    tree = get_timer_tree()
    expected = {"a": 4, "b": 3, "c": 2}
    assert {name: find(tree, name)["count"] for name in expected} == expected
    assert {name: find(worker_entry(tree, 0), name)["count"] for name in expected} == expected


def test_a_payload_with_the_rows_of_the_last_one_but_claiming_no_declared_ids_is_refused(fake_clock):
    merger = TimerMerger()
    first, second = worker_payloads(TimerStack("worker"), ["env.step"], ["env.step"])
    merger.merge_payload(0, first)
    lying = second[:7] + ((0, ()),) + second[8:]  # says the stream declared nothing before it
    with pytest.raises(PayloadError, match="block id 0 was never declared"):
        merger.merge_payload(0, lying)
    merger.merge_payload(0, second)
    assert find(get_timer_tree(), "env.step")["count"] == 2


def test_payloads_changing_blocks_and_anchors_every_time_lose_nothing(fake_clock):
    # More sets of blocks and more anchors than a stream keeps laid out, in turn.
    merger = TimerMerger()
    worker = TimerStack("worker")
    expected: dict[tuple[str, str], int] = {}
    for flush in range(24):
        anchor_name = f"anchor{flush % 6}"
        names = [name for bit, name in enumerate("abc") if (flush % 7 + 1) >> bit & 1]  # 7 sets
        with hierarchical_timer(anchor_name):
            (flushed,) = worker_payloads(worker, names)
            merger.merge_payload(0, flushed)
        for name in names:
            expected[anchor_name, name] = expected.get((anchor_name, name), 0) + 1
    tree = get_timer_tree()
    assert {key: find(tree, *key)["count"] for key in expected} == expected
    own = worker_entry(tree, 0)
    for name in "abc":
        assert find(own, name)["count"] == sum(count for (_, block), count in expected.items() if block == name)
