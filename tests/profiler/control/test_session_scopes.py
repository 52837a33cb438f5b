"""Profiler(with_scopes=True): MegEngine's module scopes as rlprof blocks while the session runs,
on a real PyTorch model."""

from __future__ import annotations

import pytest

from profiler import Profiler, hierarchical_timer
from profiler.automatic.torch_phases import torch_phases_installed, uninstall_torch_phases
from profiler.tree.timer_tree import get_timer_tree
from not_installed import run_without

torch = pytest.importorskip("torch")


@pytest.fixture
def model():
    torch.manual_seed(0)
    network = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    return network, torch.optim.SGD(network.parameters(), lr=0.1)


def children(node):
    return {child["name"]: child for child in node.get("children", [])}


def train_step(network, optimizer):
    with hierarchical_timer("update"):
        loss = network(torch.randn(2, 4)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_module_forward_backward_and_step_are_blocks_under_the_block_that_ran_them(tmp_path, model):
    network, optimizer = model
    with Profiler(path=tmp_path, formats=["timers.json"], with_scopes=True):
        train_step(network, optimizer)
    update = children(get_timer_tree())["update"]
    assert set(children(update)) == {"network.forward", "SGD.zero_grad", "backward", "SGD.step"}


def test_the_hooks_go_when_the_session_ends(tmp_path, model):
    network, optimizer = model
    with Profiler(path=tmp_path, formats=["timers.json"], with_scopes=True):
        assert torch_phases_installed()
    assert not torch_phases_installed()
    train_step(network, optimizer)
    assert children(children(get_timer_tree())["update"]) == {}


def test_hooks_installed_before_the_session_are_left_in_place(tmp_path):
    from profiler.automatic.torch_phases import install_torch_phases

    install_torch_phases(torch)
    try:
        with Profiler(path=tmp_path, formats=["timers.json"], with_scopes=True):
            pass
        assert torch_phases_installed()
    finally:
        uninstall_torch_phases()


def test_without_with_scopes_modules_are_not_blocks(tmp_path, model):
    network, optimizer = model
    with Profiler(path=tmp_path, formats=["timers.json"]):
        train_step(network, optimizer)
    assert children(children(get_timer_tree())["update"]) == {}


def test_with_scopes_must_be_a_yes_or_no(tmp_path):
    with pytest.raises(TypeError, match="with_scopes must be True or False"):
        Profiler(path=tmp_path, with_scopes="yes")


def test_with_scopes_without_torch_says_what_to_install():
    result = run_without(("torch",), """
        from profiler import Profiler
        try:
            Profiler(with_scopes=True)
        except ValueError as error:
            print(error)
    """)
    assert "needs PyTorch: pip install torch" in result.stdout, result.stderr


class Agent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        self.critic = torch.nn.Linear(4, 1)

    def forward(self, observation):
        return self.actor(observation), self.critic(observation)


def test_with_scopes_makes_each_module_call_inside_a_block_named_by_its_attribute_path(tmp_path, model):
    network, optimizer = model
    with Profiler(path=tmp_path, formats=["timers.json"], with_scopes=True):
        train_step(network, optimizer)
    forward = children(children(get_timer_tree())["update"])["network.forward"]
    assert set(children(forward)) == {"0.forward", "1.forward", "2.forward"}
    assert children(forward)["0.forward"]["count"] == 1


def test_with_scopes_nests_module_blocks_as_the_modules_nest(tmp_path):
    agent = Agent()
    with Profiler(path=tmp_path, formats=["timers.json"], with_scopes=True):
        with hierarchical_timer("rollout"), torch.no_grad():
            agent(torch.randn(3, 4))
    forward = children(children(get_timer_tree())["rollout"])["agent.forward (no grad)"]
    assert set(children(forward)) == {"actor.forward", "critic.forward"}
    assert set(children(children(forward)["actor.forward"])) == {"actor.0.forward", "actor.1.forward",
                                                                 "actor.2.forward"}


def test_with_scopes_puts_each_layer_s_operators_under_its_block(tmp_path, model):
    network, optimizer = model
    with Profiler(path=tmp_path, formats=["timers.json"], with_scopes=True, record_operators=True):
        train_step(network, optimizer)
    layer = children(children(children(get_timer_tree())["update"])["network.forward"])["0.forward"]
    assert "aten::linear" in children(layer)


def test_module_scopes_end_with_the_session_on_hooks_it_did_not_install(tmp_path, model):
    from profiler.automatic.torch_phases import install_torch_phases

    network, optimizer = model
    install_torch_phases(torch)
    try:
        with Profiler(path=tmp_path, formats=["timers.json"], with_scopes=True):
            pass
        with hierarchical_timer("after"):
            network(torch.randn(2, 4))
        forward = children(children(get_timer_tree())["after"])["network.forward"]
    finally:
        uninstall_torch_phases()
    assert children(forward) == {}
