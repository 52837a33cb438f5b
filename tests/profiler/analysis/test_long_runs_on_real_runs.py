"""Specification: a run longer than its timeline holds (real torch, real Gymnasium, under ``rlprof
run --timeline-spans``, so that the trainer's ring drops its oldest spans as an hour's run does at
the default) is read from the spans the timeline still holds whole and scaled to the run: CleanRL's
DQN, whose rollout calls its Q-network with grad, has its updates split at their last step and
counted as the program counted them; CleanRL's SAC draws the verdicts a short run of it draws;
CleanRL's PPO has untimed gaps for all its steps, not only the held ones. Read from one real dump,
whole and as a long run's timeline would hold it, the figures agree.
"""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("torch")  # installed by the README's test command: runs in CI

from framework_runs import counted_run, rlprof_run  # noqa: E402
from phase_trees import with_latest_spans  # noqa: E402
from profiler.analysis.phase_verdicts import ROLLOUT_WITH_GRAD, UPDATE_BOUND  # noqa: E402
from profiler.analysis.training_phases import training_phases  # noqa: E402
from profiler.analysis.untimed_gaps import untimed_gaps  # noqa: E402

STEPS = 1500
HELD_SPANS = 2000
"""The trainer's timeline of the DQN's 1,500 steps, or of the PPO's 512 vector steps, holds about
4,500 to 5,000 spans: this keeps the last 40 to 45%."""
PPO = ("--total-timesteps", "2048")  # 512 vector steps of 4 envs, 32 rollouts of 16


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    return counted_run(tmp_path_factory.mktemp("long"), "cleanrl_torch_dqn.py", "--total-timesteps", str(STEPS),
                       options=("--timeline-spans", str(HELD_SPANS)))


@pytest.fixture(scope="module")
def long_ppo_run(tmp_path_factory):
    return rlprof_run(tmp_path_factory.mktemp("long_ppo"), "cleanrl_torch_ppo.py", *PPO,
                      options=("--timeline-spans", str(HELD_SPANS)))


@pytest.fixture(scope="module")
def whole_ppo_run(tmp_path_factory):
    return rlprof_run(tmp_path_factory.mktemp("whole_ppo"), "cleanrl_torch_ppo.py", *PPO)


@pytest.fixture(scope="module")
def long_sac_run(tmp_path_factory):
    # Its 600 steps record some 14,000 spans: the timeline holds the last 40%.
    return counted_run(tmp_path_factory.mktemp("long_sac"), "cleanrl_torch_sac.py",
                       options=("--timeline-spans", "6000"))


def trainer_thread(tree: dict) -> dict:
    return tree["timeline"]["processes"][0]["threads"][0]


def test_a_run_longer_than_its_timeline_says_from_when_on_the_trainers_spans_are_complete(long_run):
    run, _ = long_run
    thread = trainer_thread(run["tree"])
    assert "spans_complete_after" in thread
    assert min(end for _, _, end in thread["spans"]) <= thread["spans_complete_after"] < max(
        end for _, _, end in thread["spans"])


def test_a_long_runs_updates_are_split_and_counted_as_the_program_counted_them(long_run):
    run, counts = long_run
    phases = run["phases"]
    assert phases["split_at_steps"]
    update = {block["block"]: block["calls"] for block in phases["update"]["blocks"]}
    assert update["update"] == counts["optimizer_steps"]
    policy = {block["block"]: block["calls"] for block in phases["policy"]["blocks"]}
    assert policy["q_network.forward"] == pytest.approx(counts["policy_calls"], rel=0.05)  # scaled


def test_a_long_runs_rollout_with_grad_verdict_names_the_calls_as_a_short_runs_does(long_run):
    run, _ = long_run
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == ROLLOUT_WITH_GRAD]
    assert verdict["title"].startswith("the rollout's policy ran with grad enabled: q_network.forward (")
    assert "cannot be told apart" not in verdict["title"]


def test_a_long_sac_run_is_update_bound_and_told_to_take_fewer_optimizer_steps_per_env_step(long_sac_run):
    run, counts = long_sac_run
    assert "spans_complete_after" in trainer_thread(run["tree"])
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == UPDATE_BOUND]
    assert verdict["title"].startswith(
        f"the update (learner) is the limit: {counts['optimizer_steps']} optimizer steps")
    assert verdict["suggestion"].startswith("Fewer optimizer steps per env step")


def test_a_long_sac_runs_rollout_calls_with_grad_are_counted_as_it_counted_them(long_sac_run):
    run, counts = long_sac_run
    policy = {block["block"]: block["calls"] for block in run["phases"]["policy"]["blocks"]}
    assert policy["Actor.get_action"] == pytest.approx(counts["policy_calls"], rel=0.05)


def test_a_long_runs_untimed_gaps_cover_all_its_steps(long_ppo_run):
    gaps = long_ppo_run["untimed"]["gaps"]
    assert gaps["steps_held_share"] < 0.9
    assert gaps["between_steps"]["gaps"] + gaps["between_rollouts"]["gaps"] == pytest.approx(512 - 1, rel=0.05)
    assert gaps["between_rollouts"]["gaps"] >= 32 - 1 - 2  # every rollout's, not only the ~20 held


def test_one_real_dump_read_whole_and_as_a_long_runs_timeline_holds_it_gives_the_same_figures(whole_ppo_run):
    tree = whole_ppo_run["tree"]
    spans = trainer_thread(tree)["spans"]
    halfway = sorted(end for _, _, end in spans)[len(spans) // 2]
    long = with_latest_spans(copy.deepcopy(tree), complete_after=halfway)
    whole_gaps, long_gaps = untimed_gaps(tree), untimed_gaps(long)
    assert long_gaps.steps_held_share < 0.75
    # The gaps' seconds are a few hundred milliseconds, which a loaded machine's pauses move by a
    # third from one half of the run to the other: their count and the start-up left over are the
    # figures that a reading of half the run must get right.
    assert long_gaps.between_steps_gaps + long_gaps.between_rollouts_gaps == pytest.approx(
        whole_gaps.between_steps_gaps + whole_gaps.between_rollouts_gaps, rel=0.03)
    assert long_gaps.elsewhere == pytest.approx(whole_gaps.elsewhere, rel=0.1)
    whole_phases, long_phases = training_phases(tree), training_phases(long)
    assert long_phases.update_seconds == pytest.approx(whole_phases.update_seconds, rel=0.1)
