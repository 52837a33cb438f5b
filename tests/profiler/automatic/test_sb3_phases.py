"""Specification: under ``rlprof run`` a Stable-Baselines3 program shows rollout against update,
and inside the rollout the policy against the rest, with no edit to the program or to SB3."""

from __future__ import annotations

import pytest

pytest.importorskip("stable_baselines3")  # installed by the README's test command: runs in CI

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from framework_runs import PROGRAMS, rlprof_run  # noqa: E402
from profiler.timing.accelerator import FORCE_PURE_PYTHON  # noqa: E402
from profiler.automatic.sb3_phases import install_sb3_phases, uninstall_sb3_phases  # noqa: E402
from tree_paths import child_names, count_of, find  # noqa: E402


@pytest.fixture(scope="module")
def sb3_run(tmp_path_factory):
    return rlprof_run(tmp_path_factory.mktemp("sb3"), "sb3_ppo.py", "--timesteps", "512")


def test_learn_alternates_rollout_and_train_blocks_once_per_iteration(sb3_run):
    tree = sb3_run["tree"]
    assert find(tree, "PPO.collect_rollouts")["count"] == 2  # 512 steps, 4 envs x 64 steps each
    assert find(tree, "PPO.train")["count"] == 2


def test_the_rollout_holds_the_policy_calls(sb3_run):
    rollout = find(sb3_run["tree"], "PPO.collect_rollouts")
    assert find(rollout, "ActorCriticPolicy.forward (no grad)")["count"] == 2 * 64
    assert "ActorCriticPolicy.predict_values" in child_names(rollout)


def test_the_update_holds_the_policy_evaluation_backward_and_optimizer_step(sb3_run):
    train = find(sb3_run["tree"], "PPO.train")
    minibatches = 2 * 2 * (256 // 64)  # iterations x epochs x minibatches of 64
    for name in ("ActorCriticPolicy.evaluate_actions", "backward", "Adam.step", "Adam.zero_grad"):
        assert find(train, name)["count"] == minibatches, name


def test_the_algorithms_train_is_the_update_no_update_block_of_torchs_opens_in_it(sb3_run):
    assert count_of(sb3_run["tree"], "update") == 0


def test_a_policy_method_is_one_block_not_one_per_layer(sb3_run):
    evaluate = find(sb3_run["tree"], "PPO.train", "ActorCriticPolicy.evaluate_actions")
    assert evaluate["children"] == []


def test_predict_outside_learn_is_a_block_of_its_own(sb3_run):
    assert find(sb3_run["tree"], "ActorCriticPolicy.predict")["count"] == 1


def test_the_program_gives_the_same_results_as_without_rlprof(sb3_run, tmp_path):
    plain = subprocess.run([sys.executable, str(PROGRAMS / "sb3_ppo.py"), "--timesteps", "512"],
                           capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == sb3_run["stdout"]


def test_the_methods_are_put_back_after_the_hooks_are_removed():
    import stable_baselines3
    from stable_baselines3 import PPO
    from stable_baselines3.common.policies import ActorCriticPolicy

    originals = (PPO.train, ActorCriticPolicy.evaluate_actions)
    install_sb3_phases(stable_baselines3)
    assert PPO.train is not originals[0]
    uninstall_sb3_phases()
    assert (PPO.train, ActorCriticPolicy.evaluate_actions) == originals


def test_evaluate_policy_is_a_block_where_eval_callback_and_the_program_call_it_and_is_put_back():
    import stable_baselines3
    from stable_baselines3.common import callbacks, evaluation

    original = evaluation.evaluate_policy
    install_sb3_phases(stable_baselines3)
    try:
        assert evaluation.evaluate_policy is callbacks.evaluate_policy is not original
        assert evaluation.evaluate_policy.__wrapped__ is original
    finally:
        uninstall_sb3_phases()
    assert evaluation.evaluate_policy is callbacks.evaluate_policy is original


def test_the_evaluation_of_eval_callback_holds_its_predict_calls_and_the_results_are_the_programs(tmp_path):
    arguments = ("--timesteps", "256", "--eval-freq", "32", "--eval-episodes", "1")
    plain = subprocess.run([sys.executable, str(PROGRAMS / "sb3_ppo.py"), *arguments],
                           capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    run = rlprof_run(tmp_path, "sb3_ppo.py", *arguments)
    assert run["stdout"] == plain.stdout
    evaluation = find(run["tree"], "PPO.collect_rollouts", "evaluate_policy")
    assert evaluation["count"] == 2  # at 32 and 64 steps of each env
    assert find(evaluation, "ActorCriticPolicy.predict")["count"] >= 2


SCRIPT_POLICY_PROGRAM = str(PROGRAMS / "sb3_script_policy_save.py")


@pytest.fixture(scope="module")
def script_policy_plain_output(tmp_path_factory) -> str:
    """What the script-policy program prints under plain ``python`` (it imports nothing of rlprof,
    so the accelerator's switch is nothing to it)."""
    plain = subprocess.run([sys.executable, SCRIPT_POLICY_PROGRAM, "."], capture_output=True, text=True,
                           timeout=180, cwd=tmp_path_factory.mktemp("plain"))
    assert plain.returncode == 0, plain.stderr
    return plain.stdout


@pytest.mark.parametrize("pure_python", [False, True], ids=["C gate", "Python wrapper"])
def test_a_policy_class_of_the_scripts_own_saves_and_loads_as_without_rlprof(
    tmp_path, pure_python, script_policy_plain_output
):
    """SB3's ``model.save()`` pickles a policy class defined in the script by value (cloudpickle),
    with the model method rlprof wrapped on it: on the C gate and on the pure-Python wrapper, it
    saves, and the loaded model acts as without rlprof."""
    environment = {name: value for name, value in os.environ.items() if name != FORCE_PURE_PYTHON}
    if pure_python:
        environment[FORCE_PURE_PYTHON] = "1"
    timed = subprocess.run(
        [sys.executable, "-m", "profiler", "run", "--summaries-dir", "out", SCRIPT_POLICY_PROGRAM, "."],
        capture_output=True, text=True, timeout=180, cwd=tmp_path, env=environment,
    )
    assert timed.returncode == 0, timed.stderr
    assert timed.stdout == script_policy_plain_output
    tree = json.loads(next((tmp_path / "out").glob("*_timers.json")).read_text())
    assert find(tree, "CriticFirstPolicy.value_of (no grad)")["count"] == 1  # the method rlprof wrapped
