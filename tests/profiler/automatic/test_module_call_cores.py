"""Property: the C warm path of the framework phases (``_module_call_core.c``'s gates timing an
outermost module call and a model method themselves) gives what the pure-Python wrappers give,
for any program of model calls: the same tree, the same totals and counts read from one fake
clock, the same timeline spans in the same order.

A program is a random list of steps over a real torch model: rollout calls under
``torch.no_grad()``, a model method calling another, direct module calls with no model method
open (with grad and without), an update (forward with grad, ``zero_grad``, ``backward``, the optimizer's step), a
model method that runs a whole update itself under ``torch.no_grad()`` (a learning method), and a forward that
raises inside the model method. Each program runs once with the C gates and once
with the Python wrappers, each time from fresh timers, a fresh model and a fresh clock.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")  # installed by the README's test command: runs in CI

from profiler.automatic import torch_phases  # noqa: E402
from profiler.recording import events  # noqa: E402
from profiler.timing import timers  # noqa: E402

pytestmark = pytest.mark.skipif(torch_phases._core is None,  # noqa: SLF001
                                reason="the C gates were not built here (no compiler, or RLPROF_PURE_PYTHON=1)")

STEPS = ("rollout", "nested rollout", "direct call", "direct call with grad", "update", "failing call",
         "value with grad", "learning method under no grad")


class Agent(torch.nn.Module):
    """CleanRL's agent in small: a model method calling the actor and the critic."""

    def __init__(self) -> None:
        super().__init__()
        self.actor = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
        self.critic = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x):
        return self.actor(x), self.get_value(x)

    def act_twice(self, x):
        return self.get_action_and_value(x), self.get_action_and_value(x)

    def learn(self, x, optimizer):
        """A whole update in one model method, called under ``torch.no_grad()``: a learning method
        (it ran a step), so each call opens an update even without grad."""
        with torch.enable_grad():
            loss = self.actor(x).sum() + self.critic(x).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def act_badly(self, x):
        self.critic(x)
        return self.actor(x[:, :2])  # the wrong width: the actor's first layer raises


class CountingClock:
    """A fake clock moving one second per reading: totals then say how often, and in which
    order, each path read it."""

    def __init__(self) -> None:
        self.time = 1000.0

    def __call__(self) -> float:
        self.time += 1.0
        return self.time


def run_program(steps: list[str], compiled: bool) -> tuple[list, list]:
    """The program's tree (names, counts, totals, extremes, errors) and spans, on one path."""
    previous_path = torch_phases.use_compiled_pass_through(compiled)
    previous_clock = timers.set_clock(CountingClock())
    timers.reset_timers()
    events.clear_recording()
    events.start_recording(capacity=10_000)
    torch.manual_seed(0)
    agent = Agent()
    optimizer = torch.optim.SGD(agent.parameters(), lr=0.01)
    observations = torch.ones(2, 3)
    torch_phases.install_torch_phases(torch)
    try:
        assert (type(torch.nn.Module.__call__).__name__ == "NestedCallGate") == compiled
        for step in steps:
            run_step(step, agent, optimizer, observations)
        wrapped = [method for method in vars(Agent).values() if getattr(method, "rlprof_model_method", False)]
        assert {type(method).__name__ for method in wrapped} <= {"ModelMethodGate" if compiled else "TimedModelMethod"}
    finally:
        torch_phases.uninstall_torch_phases()
        events.stop_recording()
        timers.set_clock(previous_clock)
        torch_phases.use_compiled_pass_through(previous_path)
    spans = list(timers.current_thread_stack().timeline.spans)
    tree = described(timers.get_timer_root())
    events.clear_recording()
    timers.reset_timers()
    return tree, spans


def run_step(step: str, agent: Agent, optimizer: torch.optim.Optimizer, observations: torch.Tensor) -> None:
    if step == "rollout":
        with torch.no_grad():
            agent.get_action_and_value(observations)
    elif step == "nested rollout":
        with torch.no_grad():
            agent.act_twice(observations)
    elif step == "direct call":
        with torch.no_grad():
            agent.critic(observations)
    elif step == "direct call with grad":
        agent.actor(observations)
    elif step == "value with grad":
        agent.get_value(observations)
    elif step == "learning method under no grad":
        with torch.no_grad():
            agent.learn(observations, optimizer)
    elif step == "failing call":
        with pytest.raises(RuntimeError):
            agent.act_badly(observations)
    else:
        logits, value = agent.get_action_and_value(observations)
        loss = logits.sum() + value.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def described(node) -> list:
    return [(child.name, child.count, child.total, child.min, child.max, child.errors, described(child))
            for child in node.children.values()]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(STEPS), min_size=1, max_size=12))
# A learning method's call after an update closed, the C gate's first (the first is found, the
# second names its class): only its being a learning method opens the update. Random lists seldom
# hold it; the C gate not reading the learning methods passed 40 random programs.
@example(["learning method under no grad"] * 2 + ["update", "learning method under no grad"])
# A direct call with grad once the program trains, from a caller read already: only the update it
# starts sends it to the Python wrapper.
@example(["direct call", "update", "direct call with grad"])
def test_the_c_gates_give_the_python_wrappers_tree_and_spans_for_any_program(steps):
    compiled_tree, compiled_spans = run_program(steps, compiled=True)
    python_tree, python_spans = run_program(steps, compiled=False)
    assert compiled_tree == python_tree
    assert compiled_spans == python_spans
