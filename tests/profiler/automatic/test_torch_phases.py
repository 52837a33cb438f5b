"""Specification: under ``rlprof run`` a PyTorch program's phases are blocks, with no edit.

The program's model method that makes the policy's calls (CleanRL's ``get_action_and_value``),
the outermost module call (the network as the program calls it, not its layers), one ``update``
per optimizer step, ``backward``, the optimizer's ``step`` and ``zero_grad`` — through torch's
global hooks, installed when the program imports torch, removed after. Real torch throughout: a CleanRL-style PPO in a real
``rlprof run``, and small models in this process for what a run cannot show cheaply.
"""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")  # installed by the README's test command: runs in CI

from profiler.automatic.torch_phases import install_torch_phases, uninstall_torch_phases  # noqa: E402
from profiler import get_timer_tree  # noqa: E402
from profiler.timing import timers  # noqa: E402
from tree_paths import child_names, count_of, find, nodes_named  # noqa: E402

ITERATIONS, STEPS, MINIBATCHES = 2, 16, 2 * 2 * 2  # the program's defaults: 128 steps of 4 envs


@pytest.fixture
def hooks():
    timers.reset_timers()
    install_torch_phases(torch)
    try:
        yield
    finally:
        uninstall_torch_phases()
        timers.reset_timers()


def top_level_names() -> list[str]:
    return [child["name"] for child in get_timer_tree()["children"]]


def test_the_policy_and_value_calls_are_blocks_named_as_the_program_holds_them(cleanrl_run):
    tree = cleanrl_run["tree"]
    assert set(child_names(find(tree, "Agent.get_action_and_value (no grad)"))) == {
        "Agent.actor.forward (no grad)", "Agent.critic.forward (no grad)"}
    assert set(child_names(find(tree, "update", "Agent.get_action_and_value"))) == {
        "Agent.actor.forward", "Agent.critic.forward"}


def test_the_model_method_that_makes_the_policy_calls_is_a_block_for_every_call_the_first_too(cleanrl_run):
    tree = cleanrl_run["tree"]
    rollout_calls = find(tree, "Agent.get_action_and_value (no grad)")
    assert rollout_calls["count"] == ITERATIONS * STEPS
    assert find(rollout_calls, "Agent.actor.forward (no grad)")["count"] == ITERATIONS * STEPS
    assert find(tree, "Agent.get_value (no grad)")["count"] == ITERATIONS  # the rollout's last value


def test_each_optimizer_step_is_an_update_block_holding_its_forward_zero_grad_backward_and_step(cleanrl_run):
    update = find(cleanrl_run["tree"], "update")
    assert update["count"] == MINIBATCHES
    for name in ("Adam.zero_grad", "backward", "Adam.step"):
        assert find(update, name)["count"] == MINIBATCHES, name
    # The first update's forward ran before anything said the program trains: beside the update.
    assert find(update, "Agent.get_action_and_value")["count"] == MINIBATCHES - 1
    assert count_of(cleanrl_run["tree"], "Agent.get_action_and_value") == MINIBATCHES


def test_a_model_method_is_wrapped_on_its_class_and_put_back_after():
    timers.reset_timers()

    class Policy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Linear(3, 2)

        def act(self, x):
            return self.body(x).argmax(-1)

    original = Policy.act
    install_torch_phases(torch)
    try:
        policy = Policy()
        with torch.no_grad():
            for _ in range(3):
                policy.act(torch.zeros(1, 3))
        assert Policy.act is not original
        node = find(get_timer_tree(), "Policy.act (no grad)")
        assert (node["count"], child_names(node)) == (3, ["Policy.body.forward (no grad)"])
    finally:
        uninstall_torch_phases()
        timers.reset_timers()
    assert Policy.act is original


def test_a_module_called_from_the_programs_plain_code_is_not_a_method_block(hooks):
    network = torch.nn.Linear(3, 1)
    for _ in range(2):
        network(torch.zeros(1, 3))
    assert top_level_names() == ["network.forward"]


def test_a_forward_with_grad_in_a_program_that_never_trains_is_no_update(hooks):
    network = torch.nn.Linear(3, 1)
    network(torch.zeros(1, 3)).sum()
    assert top_level_names() == ["network.forward"]


def test_once_the_program_trains_a_forward_with_grad_starts_the_update_that_the_step_ends(hooks):
    network = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(network.parameters(), lr=0.1)
    for _ in range(3):
        loss = network(torch.ones(2, 3)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    update = find(get_timer_tree(), "update")
    assert update["count"] == 3
    assert child_names(update) == ["SGD.zero_grad", "backward", "SGD.step", "network.forward"]
    assert find(update, "network.forward")["count"] == 2
    assert timers.get_timer_stack_for_thread(threading.current_thread()).open_blocks() == []


def test_only_the_outermost_module_call_is_a_block_not_its_layers(cleanrl_run):
    tree = cleanrl_run["tree"]
    assert not [name for name in child_names(tree) if name.startswith(("Linear", "Tanh", "Sequential"))]
    assert all(not node["children"] for node in nodes_named(tree, "Agent.actor.forward"))


def test_backward_optimizer_step_and_zero_grad_are_blocks_once_per_minibatch(cleanrl_run):
    tree = cleanrl_run["tree"]
    minibatches = 2 * 2 * 2  # iterations x epochs x minibatches, the program's defaults
    for name in ("backward", "Adam.step", "Adam.zero_grad"):
        assert sum(node["count"] for node in nodes_named(tree, name)) == minibatches, name


def test_the_dump_names_the_frameworks_whose_phases_were_timed(cleanrl_run):
    assert cleanrl_run["tree"]["metadata"]["rlprof_framework_phases"] == "torch"


def test_a_module_called_by_a_variable_is_named_after_it(hooks):
    policy = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    policy(torch.zeros(1, 3))
    assert top_level_names() == ["policy.forward"]


def test_a_module_under_no_grad_is_named_as_inference(hooks):
    value_network = torch.nn.Linear(3, 1)
    with torch.no_grad():
        value_network(torch.zeros(1, 3))
    assert top_level_names() == ["value_network.forward (no grad)"]


def test_a_forward_that_raises_closes_its_block_and_the_next_call_is_timed_again(hooks):
    class Failing(torch.nn.Module):
        def forward(self, x):
            raise ValueError("bad input")

    failing = Failing()
    with pytest.raises(ValueError):
        failing(torch.zeros(1))
    with pytest.raises(ValueError):
        failing(torch.zeros(1))
    node = get_timer_tree()["children"][0]
    assert (node["name"], node["count"]) == ("failing.forward", 2)
    assert timers.get_timer_stack_for_thread(threading.current_thread()).open_blocks() == []


def test_backward_through_torch_autograd_backward_is_a_block_too(hooks):
    weight = torch.ones(2, requires_grad=True)
    torch.autograd.backward((weight * 2).sum())
    assert top_level_names() == ["update"]  # a backward says the program trains
    assert child_names(find(get_timer_tree(), "update")) == ["backward"]


def test_once_uninstalled_nothing_is_timed_and_torch_is_as_it_was():
    timers.reset_timers()
    originals = (torch.autograd.backward, torch.optim.Optimizer.zero_grad)
    install_torch_phases(torch)
    uninstall_torch_phases()
    layer = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    optimizer.zero_grad()
    layer(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    assert top_level_names() == []
    assert (torch.autograd.backward, torch.optim.Optimizer.zero_grad) == originals


@pytest.fixture(scope="module")
def cleanrl_async_run(tmp_path_factory):
    from framework_runs import rlprof_run

    return rlprof_run(tmp_path_factory.mktemp("cleanrl_async"), "cleanrl_torch_ppo.py", "--async-envs")


def test_over_async_vector_env_the_same_phases_hold_and_the_envs_run_in_workers(cleanrl_async_run):
    tree = cleanrl_async_run["tree"]
    assert find(tree, "Agent.get_action_and_value (no grad)")["count"] == ITERATIONS * STEPS
    assert find(tree, "update")["count"] == MINIBATCHES
    assert "vector.wait_for_workers" in child_names(find(tree, "vector.step"))
    assert len(tree["workers"]) == 4
