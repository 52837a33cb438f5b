"""Specification: a module called inside another module's call goes straight on to torch, in C
where the extension was built and in Python otherwise, with the same blocks either way.

Every test of a behaviour runs on both paths (the ``path`` fixture): the C pass-through
(``profiler/automatic/_module_call_core.c``, a callable in place of ``nn.Module.__call__``) and the
pure-Python wrapper that is its reference. Real torch, small models, in this process.
"""

from __future__ import annotations

import copy
import gc
import inspect
import pickle
import threading
import weakref

import pytest

torch = pytest.importorskip("torch")  # installed by the README's test command: runs in CI

from profiler import get_timer_tree  # noqa: E402
from profiler.automatic import torch_phases  # noqa: E402
from profiler.timing import timers  # noqa: E402
from tree_paths import child_names, find  # noqa: E402

COMPILED_BUILT = torch_phases._core is not None  # noqa: SLF001 - which paths this install can run


@pytest.fixture(params=["C", "Python"])
def path(request):
    """The phases installed with nested module calls passed on in C, or in Python."""
    if request.param == "C" and not COMPILED_BUILT:
        pytest.skip("the C pass-through was not built here (no compiler, or RLPROF_PURE_PYTHON=1)")
    previous = torch_phases.use_compiled_pass_through(request.param == "C")
    timers.reset_timers()
    torch_phases.install_torch_phases(torch)
    try:
        yield request.param
    finally:
        torch_phases.uninstall_torch_phases()
        torch_phases.use_compiled_pass_through(previous)
        timers.reset_timers()


class Policy(torch.nn.Module):
    """A network holding a network: the layers of ``body`` are calls two deep."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
        self.head = Scaled()

    def forward(self, x):
        return self.head(self.body(x), scale=2.0)


class Scaled(torch.nn.Module):
    def forward(self, x, *, scale):
        return x * scale


class Acting(torch.nn.Module):
    """A model method (CleanRL's ``get_action_and_value`` in small): the phases wrap it on its class,
    a C ``ModelMethodGate`` where the extension was built."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(3, 2)

    def act(self, x, scale=1.0, *, offset=0.0):
        """The action's logits."""
        return self.body(x) * scale + offset


class ActingTwice(Acting):
    def act(self, x, scale=1.0, *, offset=0.0):
        return super().act(x, scale, offset=offset) * 2


def warm_acting() -> Acting:
    """An ``Acting`` whose ``act`` was found, wrapped on its class, and called warm."""
    acting = Acting()
    with torch.no_grad():
        for _ in range(3):
            acting.act(torch.zeros(1, 3))
    assert getattr(Acting.__dict__["act"], "rlprof_model_method", False)
    return acting


def top_level_names() -> list[str]:
    return [child["name"] for child in get_timer_tree()["children"]]


def test_the_path_asked_for_is_the_one_installed(path):
    assert torch_phases.compiled_pass_through() == (path == "C")
    gate_installed = type(torch.nn.Module.__call__).__name__ == "NestedCallGate"
    assert gate_installed == (path == "C")


def test_the_layers_of_a_module_called_inside_another_are_not_blocks(path):
    policy = Policy()
    for _ in range(3):
        policy(torch.zeros(1, 3))
    assert top_level_names() == ["policy.forward"]
    assert find(get_timer_tree(), "policy.forward")["count"] == 3
    assert child_names(find(get_timer_tree(), "policy.forward")) == []


def test_a_nested_call_gets_its_arguments_and_keywords_and_returns_what_torch_returns(path):
    policy = Policy()
    torch.manual_seed(0)
    x = torch.randn(2, 3)
    expected = policy.body(x) * 2.0  # an outermost call: a block of its own
    assert torch.equal(policy(x), expected)
    assert set(top_level_names()) == {"Sequential.forward", "policy.forward"}


def test_a_nested_call_that_raises_raises_through_and_the_next_call_is_timed(path):
    policy = Policy()
    with pytest.raises(TypeError):
        policy.head.__class__.forward(policy.head, torch.zeros(1))  # no scale: a TypeError
    with pytest.raises(RuntimeError):
        policy(torch.zeros(1, 5))  # the first layer cannot take 5 features: raised in a nested call
    policy(torch.zeros(1, 3))
    node = find(get_timer_tree(), "policy.forward")
    assert (node["count"], node["errors"]) == (2, 1)
    assert timers.get_timer_stack_for_thread(threading.current_thread()).open_blocks() == []


def test_a_bound_call_method_of_a_module_is_timed_as_a_call(path):
    layer = torch.nn.Linear(3, 1)
    layer.__call__(torch.zeros(1, 3))
    assert top_level_names() == ["layer.forward"]


def test_with_module_scopes_the_nested_calls_are_blocks_on_either_path(path):
    previous = torch_phases.set_module_scopes(True)
    try:
        Policy()(torch.zeros(1, 3))
    finally:
        torch_phases.set_module_scopes(previous)
    assert set(child_names(find(get_timer_tree(), "Policy.forward"))) == {"body.forward", "head.forward"}
    assert child_names(find(get_timer_tree(), "Policy.forward", "body.forward")) == [
        "body.0.forward", "body.1.forward", "body.2.forward"]


def test_module_scopes_turned_off_again_make_nested_calls_pass_through_again(path):
    previous = torch_phases.set_module_scopes(True)
    torch_phases.set_module_scopes(False)
    try:
        policy = Policy()
        policy(torch.zeros(1, 3))
    finally:
        torch_phases.set_module_scopes(previous)
    assert child_names(find(get_timer_tree(), "policy.forward")) == []


def test_a_module_called_in_another_thread_during_a_call_here_is_that_threads_outermost_call(path):
    value_network = torch.nn.Linear(3, 1)
    helper_stacks = []

    def helper(x):
        value_network(x)
        helper_stacks.append(timers.current_thread_stack())

    class Spawning(torch.nn.Module):
        def forward(self, x):
            thread = threading.Thread(target=helper, args=(x,))
            thread.start()
            thread.join()
            return x

    spawning = Spawning()
    spawning(torch.zeros(1, 3))
    assert top_level_names() == ["spawning.forward"]
    assert list(helper_stacks[0].root.children) == ["value_network.forward"]


def test_a_module_made_after_another_was_freed_is_named_after_its_own_variable(path):
    first = torch.nn.Linear(3, 1)
    first(torch.zeros(1, 3))
    del first
    gc.collect()
    second = torch.nn.Linear(3, 1)  # may take the freed module's address, and so its id
    second(torch.zeros(1, 3))
    assert top_level_names() == ["first.forward", "second.forward"]


def test_uninstalled_torch_calls_its_own_call_again(path):
    original = torch.nn.Module.__call__.__wrapped__
    torch_phases.uninstall_torch_phases()
    assert torch.nn.Module.__call__ is original


@pytest.mark.skipif(not COMPILED_BUILT, reason="the C pass-through was not built here")
def test_a_threads_depth_starts_at_zero_and_is_its_own():
    depth = torch_phases._core.ThreadDepth()  # noqa: SLF001
    depth.value = 3
    seen = []
    helper = threading.Thread(target=lambda: seen.append(depth.value))
    helper.start()
    helper.join()
    assert (seen, depth.value) == ([0], 3)
    depth.value = 0


@pytest.mark.skipif(not COMPILED_BUILT, reason="the C pass-through was not built here")
def test_the_gate_sends_a_call_to_the_nested_target_only_while_the_depth_is_nonzero():
    core = torch_phases._core  # noqa: SLF001
    gate = core.NestedCallGate(lambda *args, **kwargs: ("nested", args, kwargs),
                               lambda *args, **kwargs: ("outermost", args, kwargs))
    depth = core.ThreadDepth()
    assert gate(1, key=2) == ("outermost", (1,), {"key": 2})
    depth.value = 1
    try:
        assert gate(1, key=2) == ("nested", (1,), {"key": 2})
        gate.pass_nested = False
        assert gate(1) == ("outermost", (1,), {})
    finally:
        depth.value = 0


def test_a_wrapped_model_method_keeps_the_programs_names_signature_and_binding(path):
    acting = warm_acting()
    x = torch.ones(1, 3)
    assert (Acting.act.__name__, Acting.act.__qualname__, Acting.act.__doc__) == ("act", "Acting.act",
                                                                                 "The action's logits.")
    assert str(inspect.signature(acting.act)) == "(x, scale=1.0, *, offset=0.0)"
    assert str(inspect.signature(Acting.act)) == "(self, x, scale=1.0, *, offset=0.0)"
    expected = acting.body(x) * 2.0 + 1.0
    assert torch.equal(acting.act(x, 2.0, offset=1.0), expected)
    assert torch.equal(Acting.act(acting, x=x, scale=2.0, offset=1.0), expected)
    twice = ActingTwice()
    twice.body = acting.body
    assert torch.equal(twice.act(x, 2.0, offset=1.0), expected * 2)
    assert find(get_timer_tree(), "ActingTwice.act")["count"] == 1  # super() reached the wrapped method


def test_a_wrapped_model_method_gives_the_programs_argument_spec(path):
    """``inspect.getfullargspec`` does not follow ``__wrapped__``: it reads the method's own
    signature, which must be the program's, on the C gate and the Python wrapper alike."""
    warm_acting()
    spec = inspect.getfullargspec(Acting.act)
    assert (spec.args, spec.defaults, spec.kwonlyargs, spec.kwonlydefaults) == (
        ["self", "x", "scale"], (1.0,), ["offset"], {"offset": 0.0})


def test_a_wrapped_model_method_pickles_and_copies_as_the_programs_method(path):
    acting = warm_acting()
    assert pickle.loads(pickle.dumps(Acting.act)) is Acting.act  # a function pickles by its name
    assert copy.copy(Acting.act) is Acting.act
    assert copy.deepcopy(Acting.act) is Acting.act
    restored = pickle.loads(pickle.dumps(acting.act))  # a bound method: its instance and name
    assert torch.equal(restored(torch.ones(1, 3)), acting.act(torch.ones(1, 3)))


def test_a_wrapped_model_method_takes_weak_references_as_the_programs_function_did(path):
    acting = warm_acting()
    assert weakref.ref(Acting.act)() is Acting.act
    callback = weakref.WeakMethod(acting.act)  # what callback registries keep of a bound method
    assert torch.equal(callback()(torch.ones(1, 3)), acting.act(torch.ones(1, 3)))
    del acting
    gc.collect()
    assert callback() is None


def test_a_warm_model_method_called_in_another_thread_is_timed_in_that_threads_tree(path):
    acting = warm_acting()
    helper_trees = []

    def helper():
        with torch.no_grad():
            for _ in range(2):
                acting.act(torch.zeros(1, 3))
        stack = timers.current_thread_stack()
        helper_trees.append((stack.root.children["Acting.act (no grad)"].count,
                             list(stack.root.children["Acting.act (no grad)"].children),
                             list(torch_phases._state.open_methods), torch_phases._depth.value))  # noqa: SLF001

    thread = threading.Thread(target=helper)
    thread.start()
    thread.join()
    assert helper_trees == [(2, ["Acting.body.forward (no grad)"], [], 0)]
    assert find(get_timer_tree(), "Acting.act (no grad)")["count"] == 3  # this thread's calls only


def test_companions_watching_blocks_see_each_block_of_a_warm_policy_call(path):
    from profiler.timing import block_hooks

    acting = warm_acting()
    seen = []
    block_hooks.observe_blocks(lambda node: seen.append(("enter", node.name)),
                               lambda node: seen.append(("exit", node.name)), companion="test")
    try:
        with torch.no_grad():
            acting.act(torch.zeros(1, 3))
    finally:
        block_hooks.observe_blocks(None, None, companion="test")
    assert seen == [("enter", "Acting.act (no grad)"), ("enter", "Acting.body.forward (no grad)"),
                    ("exit", "Acting.body.forward (no grad)"), ("exit", "Acting.act (no grad)")]


class SwallowingBlock:
    """A block whose exit swallows what the call raised, as a ``with`` statement honours."""

    def __init__(self, name, opened):
        self.name, self.opened = name, opened

    def __enter__(self):
        self.opened.append(self.name)

    def __exit__(self, exc_type, exc_value, traceback):
        return exc_type is not None


def test_the_policy_calls_open_the_blocks_hierarchical_timer_gives_now(path, monkeypatch):
    acting = warm_acting()
    opened = []
    monkeypatch.setattr(timers, "hierarchical_timer", lambda name: SwallowingBlock(name, opened))
    with torch.no_grad():
        logits = acting.act(torch.zeros(1, 3))
        swallowed = acting.act(torch.zeros(1, 2))  # the wrong width: the layer raises, the block swallows it
    assert logits.shape == (1, 2) and swallowed is None
    assert opened == ["Acting.act (no grad)", "Acting.body.forward (no grad)"] * 2


def test_a_warm_policy_calls_blocks_run_their_nodes_c_methods_directly(path):
    """The C gates hand a block to the timer core, which runs the node's C enter and exit itself:
    ``with``'s protocol would bind them first (a node keeps its bound methods in
    ``_bound_methods``, made at the first lookup)."""
    if path != "C":
        pytest.skip("the Python wrappers run their blocks with a with statement")
    acting = warm_acting()
    method_node = timers.current_thread_stack().root.children["Acting.act (no grad)"]
    module_node = method_node.children["Acting.body.forward (no grad)"]
    method_node._bound_methods = module_node._bound_methods = None  # noqa: SLF001 - forget the bindings
    with torch.no_grad():
        acting.act(torch.zeros(1, 3))
    assert (method_node.count, module_node.count) == (4, 4)
    assert method_node._bound_methods is None and module_node._bound_methods is None  # noqa: SLF001
