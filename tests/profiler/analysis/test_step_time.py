"""Specification of the vector-step breakdown: parts that add up, read from every layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_files import MANAGER_NAMES, STEPS, write_plain_run, write_vector_run

from profiler import TimerStack, hierarchical_timer, load_timing_tree, write_timing_tree
from profiler.analysis.step_time import (
    ENV_COMPUTE,
    EXCHANGE_UNSPLIT,
    SINGLE_ENV_STEP_BLOCKS,
    TRANSPORT,
    VECTOR_STEP_BLOCKS,
    WAIT_LATENCY,
    WAITING_ON_LAST,
    WAITING_ON_SLOWEST,
    WAITING_ONLY,
    WAITING_UNSPLIT,
    step_breakdowns,
    trainer_env_call_seconds,
    trainer_nodes,
    trainer_step_blocks,
)

DATA = Path(__file__).parents[2] / "data"
MLAGENTS_FILE = DATA / "mlagents_timers.json"
MLAGENTS_NESTED_FILE = DATA / "mlagents_nested_timers.json"
OTHER = "other trainer work in the step"


def parts_of(breakdown):
    return {part.label: part.seconds for part in breakdown.parts}


def test_the_vector_step_splits_into_compute_waiting_transport_and_the_rest(vector_tree):
    (breakdown,) = step_breakdowns(vector_tree)
    assert breakdown.block == "vector.step"
    assert breakdown.calls == STEPS
    # Workers take 4, 4, 4 and 10 ms: the trainer waits 4 ms for all, then 6 ms for worker 3.
    assert parts_of(breakdown) == pytest.approx({
        ENV_COMPUTE: 0.040,
        WAITING_ON_SLOWEST: 0.060,
        WAIT_LATENCY: 0.0,
        TRANSPORT: 0.030,
        OTHER: 0.005,
    })


def test_without_the_critical_path_a_note_says_the_straggling_is_estimated(vector_tree):
    (breakdown,) = step_breakdowns(vector_tree)
    assert any("does not record which worker each step waited on" in note for note in breakdown.notes)


def test_a_measured_critical_path_gives_the_same_split_measured(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, measured=True))
    (breakdown,) = step_breakdowns(tree)
    # Each step: 4 ms with every worker computing, then 6 ms waiting on worker 3 alone.
    assert parts_of(breakdown) == pytest.approx({
        ENV_COMPUTE: 0.040,
        WAITING_ON_LAST: 0.060,
        WAIT_LATENCY: 0.0,
        TRANSPORT: 0.030,
        OTHER: 0.005,
    })
    assert breakdown.notes == []


def test_the_env_managers_own_block_names_get_the_same_breakdown(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, names=MANAGER_NAMES))
    (breakdown,) = step_breakdowns(tree)
    assert breakdown.block == "env_manager.step"
    assert parts_of(breakdown)[WAITING_ON_SLOWEST] == pytest.approx(0.060)
    assert parts_of(breakdown)[TRANSPORT] == pytest.approx(0.030)


def test_a_wait_longer_than_the_last_reply_is_latency_not_straggling(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, measured=True,
                                             worker_step_seconds=(0.001, 0.001),
                                             latency_seconds=0.002))
    (breakdown,) = step_breakdowns(tree)
    assert parts_of(breakdown)[WAITING_ON_LAST] == pytest.approx(0.0)
    assert parts_of(breakdown)[WAIT_LATENCY] == pytest.approx(0.020)


def test_without_per_worker_trees_straggling_and_latency_are_one_part(tmp_path, fake_clock):
    tree = load_timing_tree(
        write_vector_run(tmp_path / "run.json", fake_clock, with_workers_section=False))
    (breakdown,) = step_breakdowns(tree)
    assert parts_of(breakdown)[WAITING_UNSPLIT] == pytest.approx(0.045)
    assert any("cannot be told apart" in note for note in breakdown.notes)


def test_a_step_without_merged_worker_time_reports_its_wait_whole(vector_tree):
    vector_step = vector_tree["children"][0]["children"][1]
    vector_step["children"] = [child for child in vector_step["children"]
                               if child["name"] != "env.step"]
    (breakdown,) = step_breakdowns(vector_tree)
    assert parts_of(breakdown)[WAITING_ONLY] == pytest.approx(0.1)
    assert any("no worker time merged" in note for note in breakdown.notes)


def test_the_breakdown_counts_workers_from_the_workers_section(vector_tree):
    (breakdown,) = step_breakdowns(vector_tree)
    assert (breakdown.workers, breakdown.worker_calls) == (4, 40)
    assert breakdown.worker_time == pytest.approx(0.22)


def test_without_a_workers_section_the_workers_are_counted_from_calls_and_the_note_says_so(
        tmp_path, fake_clock):
    tree = load_timing_tree(
        write_vector_run(tmp_path / "run.json", fake_clock, with_workers_section=False))
    (breakdown,) = step_breakdowns(tree)
    assert breakdown.workers == 4
    assert any("counts envs, not processes" in note for note in breakdown.notes)


def write_one_worker_of_four_envs(path: Path, clock) -> Path:
    """One worker stepping 4 envs (envs_per_worker=4): 1.5 ms each, 6 ms a vector step.

    The worker starts on its actions while the trainer is still in ``send_actions`` (2 ms), so the
    trainer waits only 4 ms of the worker's 6: the last 2 ms overlap the sending.
    """
    worker = TimerStack("worker 0")
    for _ in range(STEPS):
        with hierarchical_timer("train"):
            with hierarchical_timer("env_manager.step") as step:
                with hierarchical_timer("send_actions"):
                    clock.advance(0.002)
                with hierarchical_timer("wait_for_workers"):
                    clock.advance(0.004)
                with hierarchical_timer("receive_results"):
                    clock.advance(0.001)
        env_step = worker.root.get_child("env.step")
        env_step.total += 4 * 0.0015
        env_step.count += 4
    step.get_child("env.step").add(worker.root.children["env.step"], parallel=True)
    write_timing_tree(path)
    document = json.loads(path.read_text())
    document["workers"] = [{**worker.root.to_dict(), "name": "worker 0", "worker_id": 0,
                            "total": 0.06, "count": 1, "self": 0.0}]
    path.write_text(json.dumps(document))
    return path


def test_one_worker_of_many_envs_computes_its_whole_measured_time(tmp_path, fake_clock):
    tree = load_timing_tree(write_one_worker_of_four_envs(tmp_path / "run.json", fake_clock))
    (breakdown,) = step_breakdowns(tree)
    assert breakdown.workers == 1
    assert parts_of(breakdown)[ENV_COMPUTE] == pytest.approx(0.060)


def test_compute_overlapping_the_send_is_never_relabelled_as_transport(tmp_path, fake_clock):
    tree = load_timing_tree(write_one_worker_of_four_envs(tmp_path / "run.json", fake_clock))
    (breakdown,) = step_breakdowns(tree)
    # 30 ms of send and receive, 20 ms of which the worker spent computing.
    assert parts_of(breakdown)[TRANSPORT] == pytest.approx(0.010)
    assert any("overlapped sending and receiving" in note for note in breakdown.notes)


@pytest.mark.parametrize("layout", ["estimated", "measured", "no workers section", "overlap"])
def test_the_parts_add_up_to_the_step_total(layout, tmp_path, fake_clock):
    path = tmp_path / "run.json"
    if layout == "overlap":
        write_one_worker_of_four_envs(path, fake_clock)
    else:
        write_vector_run(path, fake_clock, measured=layout == "measured", latency_seconds=0.0007,
                         with_workers_section=layout != "no workers section")
    (breakdown,) = step_breakdowns(load_timing_tree(path))
    assert sum(parts_of(breakdown).values()) == pytest.approx(breakdown.total)
    assert min(parts_of(breakdown).values()) >= 0.0


def test_a_single_process_run_has_no_breakdown(tmp_path, fake_clock):
    assert step_breakdowns(load_timing_tree(write_plain_run(tmp_path / "run.json", fake_clock))) == []


def test_an_mlagents_env_step_is_split_into_worker_time_and_the_rest():
    tree = load_timing_tree(MLAGENTS_FILE)
    (breakdown,) = step_breakdowns(tree)
    assert (breakdown.block, breakdown.worker_blocks, breakdown.calls) == (
        "env_step", ("worker_root",), 3)
    # worker_root's own total holds the worker's idle time: its work is the blocks under it.
    unity_step = tree["children"][0]["children"][0]["children"][0]["children"][0]
    assert unity_step["name"] == "UnityEnvironment.step"
    assert parts_of(breakdown)[ENV_COMPUTE] == pytest.approx(unity_step["total"])
    assert sum(parts_of(breakdown).values()) == pytest.approx(breakdown.total)
    assert any("ML-Agents does not time sending" in note for note in breakdown.notes)


def test_mlagents_real_nesting_finds_the_workers_under_the_trainers_workers_block():
    """ML-Agents merges payloads inside a ``workers`` block: ``env_step/workers/worker_root``."""
    tree = load_timing_tree(MLAGENTS_NESTED_FILE)
    (breakdown,) = step_breakdowns(tree)
    assert breakdown.worker_blocks == ("worker_root",)
    assert breakdown.workers == 2  # two replies merged per step, no workers section
    env_step = tree["children"][0]["children"][0]["children"][0]
    worker_root = env_step["children"][1]["children"][0]
    unity_step = worker_root["children"][0]
    assert parts_of(breakdown)[ENV_COMPUTE] == pytest.approx(unity_step["total"] / 2)


def test_mlagents_policy_blocks_inside_the_step_are_trainer_work_not_exchange():
    tree = load_timing_tree(MLAGENTS_NESTED_FILE)
    (breakdown,) = step_breakdowns(tree)
    env_step = tree["children"][0]["children"][0]["children"][0]
    trainer_children = sum(child["total"] for child in env_step["children"])
    parts = parts_of(breakdown)
    assert parts["trainer blocks inside the step (policy, merging timers)"] == pytest.approx(
        trainer_children)
    assert parts[EXCHANGE_UNSPLIT] == pytest.approx(
        breakdown.total - trainer_children - parts[ENV_COMPUTE])


def trainer_tree(*children: dict) -> dict:
    return {"name": "root", "total": 1.0, "count": 1, "self": 0.0, "children": list(children)}


def node(name: str, *children: dict, parallel: bool = False) -> dict:
    return {"name": name, "total": 0.1, "count": 1, "self": 0.0, "children": list(children),
            **({"is_parallel": True} if parallel else {})}


def test_a_program_that_steps_one_env_itself_has_its_env_step_for_the_trainers_steps():
    assert trainer_step_blocks(trainer_tree(node("update", node("env.step")))) == SINGLE_ENV_STEP_BLOCKS


def test_a_vector_step_is_the_trainers_step_whatever_env_steps_it_holds():
    tree = trainer_tree(node("vector.step", node("env.step")), node("env.step"))
    assert trainer_step_blocks(tree) == VECTOR_STEP_BLOCKS


def test_env_steps_in_the_trees_that_ran_beside_the_trainer_are_not_its_steps():
    tree = trainer_tree(node("workers", node("env.step"), parallel=True))
    assert trainer_step_blocks(tree) == VECTOR_STEP_BLOCKS
    assert trainer_env_call_seconds(tree) is None


def test_the_env_calls_of_an_env_the_trainer_steps_itself_add_up_its_steps_and_resets():
    tree = trainer_tree(node("env.reset"), node("update", node("env.step")))
    assert trainer_env_call_seconds(tree) == pytest.approx(0.2)


def test_the_trainers_nodes_leave_out_the_trees_beside_it_and_what_it_is_told_to_with_everything_inside():
    tree = trainer_tree(node("update", node("backward")), node("workers", node("env.step"), parallel=True),
                        node("env_manager.step", node("vector.send_actions")), node("vector.step", node("env.step")))
    names = [node["name"] for node in trainer_nodes(tree, stop_at=("vector.step",),
                                                    leave_out=lambda name: name.startswith("env_manager."))]
    assert sorted(names) == ["backward", "update", "vector.step"]
