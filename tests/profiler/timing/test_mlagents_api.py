"""Specification of the ML-Agents API: ``mlagents_envs.timers`` (1.1.0) code runs on ``profiler``.

Every public name of ML-Agents' module is importable from ``profiler`` and takes the same
arguments; the methods ML-Agents' trainer calls behave as ML-Agents' do; and a trainer written
with ML-Agents' patterns (tests/profiler/mlagents_trainer.py: worker processes, trainer threads,
``merge(..., root_name=..., is_parallel=True)``, ``merge_gauges``) gives a tree that ``rlprof
analyze`` reads correctly. When ML-Agents' own ``timers.py`` is at hand (benchmarks fetch it
into a cache), the same trainer source with the import switched back runs on it and both trees
are compared.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import pickle
import sys
import types
from pathlib import Path

import pytest

import mlagents_trainer
import profiler
from profiler import (
    GaugeNode,
    TimerNode,
    TimerStack,
    get_timer_root,
    get_timer_tree,
    hierarchical_timer,
    load_timing_tree,
    merge_gauges,
    set_gauge,
    write_timing_tree,
)
from profiler.cli.commands import main
from tree_paths import find

# mlagents_envs.timers 1.1.0: its public names, and the parameters each callable takes.
MLAGENTS_FUNCTIONS = {
    "hierarchical_timer": ("name", "timer_stack"),
    "set_gauge": ("name", "value", "timer_stack"),
    "merge_gauges": ("gauges", "timer_stack"),
    "add_metadata": ("key", "value", "timer_stack"),
    "get_timer_tree": ("timer_stack",),
    "get_timer_root": ("timer_stack",),
    "reset_timers": ("timer_stack",),
}
MLAGENTS_POSITIONAL_ONLY_HERE = {"timed": 1, "get_timer_stack_for_thread": 1}
MLAGENTS_METHODS = {
    TimerNode: {"get_child": ("name",), "add_time": ("elapsed",),
                "merge": ("other", "root_name", "is_parallel")},
    GaugeNode: {"update": ("new_value",), "merge": ("other",), "as_dict": ()},
    TimerStack: {"reset": (), "push": ("name",), "pop": (), "get_root": (),
                 "get_timing_tree": ("node",), "set_gauge": ("name", "value"),
                 "add_metadata": ("key", "value")},
}
MLAGENTS_ATTRIBUTES = {
    TimerNode: ("children", "total", "count", "is_parallel"),
    GaugeNode: ("value", "min_value", "max_value", "count"),
    TimerStack: ("root", "stack", "start_time", "gauges", "metadata"),
}

CACHED_MLAGENTS_TIMERS = Path.home() / ".cache" / "rlprof-benchmarks" / "mlagents_timers_1.1.0.py"


def parameter_names(function) -> tuple[str, ...]:
    return tuple(name for name in inspect.signature(function).parameters if name != "self")


# --- the names and signatures -------------------------------------------------------------------


@pytest.mark.parametrize("name, parameters", MLAGENTS_FUNCTIONS.items())
def test_every_mlagents_function_takes_the_same_parameters(name, parameters):
    assert parameter_names(getattr(profiler, name))[: len(parameters)] == parameters


@pytest.mark.parametrize("name, positional", MLAGENTS_POSITIONAL_ONLY_HERE.items())
def test_functions_called_positionally_in_mlagents_take_as_many_arguments(name, positional):
    assert len(parameter_names(getattr(profiler, name))) >= positional


@pytest.mark.parametrize(
    "cls, method, parameters",
    [(cls, method, parameters) for cls, methods in MLAGENTS_METHODS.items()
     for method, parameters in methods.items()],
)
def test_every_mlagents_method_takes_the_same_parameters(cls, method, parameters):
    assert parameter_names(getattr(cls, method))[: len(parameters)] == parameters


@pytest.mark.parametrize(
    "instance, attribute",
    [(lambda: TimerNode(), name) for name in MLAGENTS_ATTRIBUTES[TimerNode]]
    + [(lambda: GaugeNode(1.0), name) for name in MLAGENTS_ATTRIBUTES[GaugeNode]]
    + [(lambda: TimerStack(), name) for name in MLAGENTS_ATTRIBUTES[TimerStack]],
)
def test_every_mlagents_attribute_is_there(instance, attribute):
    assert hasattr(instance(), attribute)


def test_the_timer_format_version_is_mlagents_one():
    assert profiler.TIMER_FORMAT_VERSION == "0.1.0"


# --- TimerNode ----------------------------------------------------------------------------------


def test_a_node_made_without_arguments_is_an_empty_root():
    node = TimerNode()
    assert (node.name, node.total, node.count, node.children, node.is_parallel) == (
        "root", 0.0, 0, {}, False)


def test_add_time_counts_one_call():
    node = TimerNode()
    node.add_time(1.5)
    node.add_time(0.5)
    assert (node.total, node.count) == (2.0, 2)


def worker_tree() -> TimerNode:
    worker = TimerNode()
    worker.total, worker.count = 3.0, 1
    step = worker.get_child("env.step")
    step.total, step.count = 2.0, 4
    return worker


def test_merge_with_a_root_name_files_the_other_tree_under_that_child():
    trainer = TimerNode("workers")
    trainer.merge(worker_tree(), root_name="worker_root", is_parallel=True)
    trainer.merge(worker_tree(), root_name="worker_root", is_parallel=True)
    merged = trainer.children["worker_root"]
    assert (merged.total, merged.count, merged.is_parallel) == (6.0, 2, True)
    assert (merged.children["env.step"].total, merged.children["env.step"].count) == (4.0, 8)
    assert merged.children["env.step"].is_parallel
    assert (trainer.total, trainer.count) == (0.0, 0)


def test_merge_without_a_root_name_adds_into_the_node_itself():
    node = TimerNode()
    node.merge(worker_tree(), is_parallel=False)
    assert (node.total, node.count, node.is_parallel) == (3.0, 1, False)
    assert node.children["env.step"].count == 4


def test_merge_leaves_the_other_tree_unchanged():
    other = worker_tree()
    TimerNode().merge(other, root_name="worker_root")
    assert (other.total, other.count, other.is_parallel) == (3.0, 1, False)
    assert other.children["env.step"].count == 4


def test_merge_keeps_a_parallel_mark_the_other_tree_already_has():
    other = worker_tree()
    other.children["env.step"].is_parallel = True
    node = TimerNode()
    node.merge(other, is_parallel=False)
    assert node.children["env.step"].is_parallel
    assert not node.is_parallel


def test_a_pickled_node_keeps_its_figures_and_children_but_not_its_stack(fake_clock):
    with hierarchical_timer("step"):
        with hierarchical_timer("policy"):
            fake_clock.advance(1.0)
    copy = pickle.loads(pickle.dumps(get_timer_root()))
    policy = copy.children["step"].children["policy"]
    assert (policy.total, policy.count) == (1.0, 1)
    assert policy.parent is copy.children["step"]
    assert copy.parent is None


# --- GaugeNode ----------------------------------------------------------------------------------


def test_as_dict_is_mlagents_gauge_layout():
    gauge = GaugeNode(2.0)
    gauge.update(1.0)
    assert gauge.as_dict() == {"value": 1.0, "min": 1.0, "max": 2.0, "count": 2}


def gauge_set_at(value: float, updated_at: float) -> GaugeNode:
    gauge = GaugeNode(value)
    gauge.updated_at = updated_at
    return gauge


def test_merging_gauges_keeps_the_value_set_later():
    earlier, later = gauge_set_at(1.0, updated_at=100.0), gauge_set_at(5.0, updated_at=200.0)
    later.merge(earlier)
    assert later.as_dict() == {"value": 5.0, "min": 1.0, "max": 5.0, "count": 2}
    earlier.merge(gauge_set_at(5.0, updated_at=200.0))
    assert earlier.value == 5.0


def test_merge_gauges_folds_other_gauges_into_the_stack():
    set_gauge("loss", 3.0)
    merge_gauges({"loss": gauge_set_at(1.0, updated_at=0.0), "reward": GaugeNode(7.0)})
    gauges = get_timer_tree()["gauges"]
    assert gauges["loss"] == {"value": 3.0, "min": 1.0, "max": 3.0, "count": 2}
    assert gauges["reward"] == {"value": 7.0, "min": 7.0, "max": 7.0, "count": 1}


def test_merge_gauges_copies_new_gauges_so_the_source_stays_independent():
    source = {"reward": GaugeNode(7.0)}
    merge_gauges(source)
    source["reward"].update(9.0)
    assert get_timer_tree()["gauges"]["reward"]["count"] == 1


def test_merge_gauges_goes_to_the_stack_given():
    stack = TimerStack()
    merge_gauges({"reward": GaugeNode(7.0)}, stack)
    assert list(stack.gauges) == ["reward"]
    assert get_timer_tree()["gauges"] == {}


# --- TimerStack ---------------------------------------------------------------------------------


def test_push_and_pop_move_the_open_block_without_timing_it():
    stack = TimerStack()
    node = stack.push("update")
    assert stack.stack == [stack.root, node]
    node.add_time(0.25)
    stack.pop()
    assert stack.stack == [stack.root]
    with hierarchical_timer("update", stack):
        pass
    assert (node.count, stack.root.children["update"] is node) == (2, True)


def test_pop_with_no_open_block_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no block is open"):
        TimerStack("trainer").pop()


def test_get_root_sets_the_root_to_the_run_time_so_far(fake_clock):
    stack = TimerStack()
    fake_clock.advance(4.0)
    root = stack.get_root()
    assert (root.total, root.count) == (4.0, 1)
    assert get_timer_root(stack) is root


def test_get_timing_tree_is_mlagents_layout(fake_clock):
    stack = TimerStack()
    with hierarchical_timer("top_level", stack):
        for _ in range(3):
            with hierarchical_timer("multiple", stack):
                fake_clock.advance(1.0)
    stack.set_gauge("my_gauge", 4.0)
    stack.add_metadata("mlagents_version", "1.1.0")
    tree = stack.get_timing_tree()
    assert tree["name"] == "root"
    assert tree["children"] == {
        "top_level": {"total": 3.0, "count": 1, "self": 0.0, "min": 3.0, "max": 3.0, "children": {
            "multiple": {"total": 3.0, "count": 3, "self": 3.0, "min": 1.0, "max": 1.0}}},
    }
    assert tree["gauges"] == {"my_gauge": {"value": 4.0, "min": 4.0, "max": 4.0, "count": 1}}
    assert {"timer_format_version", "start_time_seconds", "end_time_seconds", "python_version",
            "command_line_arguments", "mlagents_version"} <= set(tree["metadata"])


def test_get_timing_tree_of_a_node_is_that_subtree(fake_clock):
    stack = TimerStack()
    with hierarchical_timer("outer", stack) as outer:
        with hierarchical_timer("inner", stack):
            fake_clock.advance(2.0)
    assert stack.get_timing_tree(outer) == {
        "total": 2.0, "count": 1, "self": 0.0, "min": 2.0, "max": 2.0,
        "children": {"inner": {"total": 2.0, "count": 1, "self": 2.0, "min": 2.0, "max": 2.0}},
    }


def test_metadata_values_are_kept_as_strings():
    stack = TimerStack()
    stack.add_metadata("seed", 3)
    profiler.add_metadata("workers", 4, stack)
    assert {key: stack.metadata[key] for key in ("seed", "workers")} == {"seed": "3", "workers": "4"}


# --- the layout on request ----------------------------------------------------------------------


def test_get_timer_tree_and_write_timing_tree_give_mlagents_layout_on_request(tmp_path, fake_clock):
    with hierarchical_timer("env_step"):
        fake_clock.advance(1.0)
    assert get_timer_tree(layout="mlagents")["children"]["env_step"]["count"] == 1
    written = json.loads(write_timing_tree(tmp_path / "timers.json", layout="mlagents").read_text())
    assert written["children"]["env_step"]["total"] == 1.0
    assert load_timing_tree(tmp_path / "timers.json")["children"] == get_timer_tree()["children"]


def test_an_unknown_layout_is_refused_with_the_valid_names(tmp_path):
    with pytest.raises(ValueError, match="unknown timer layout 'yaml'; choose one of: rlprof, mlagents"):
        write_timing_tree(tmp_path / "timers.json", layout="yaml")
    assert not (tmp_path / "timers.json").exists()


# --- ML-Agents' trainer, only the import changed ------------------------------------------------

STEPS, WORKERS = 4, 3


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    profiler.reset_timers()
    try:
        return mlagents_trainer.train(tmp_path_factory.mktemp("mlagents"), steps=STEPS,
                                      workers=WORKERS)
    finally:
        profiler.reset_timers()


def test_worker_trees_sent_over_pipes_are_merged_under_worker_root(trained):
    tree = load_timing_tree(trained)
    env_step = find(tree, "TrainerController.start_learning", "TrainerController.advance", "env_step")
    worker_root = find(env_step, "workers", "worker_root")
    assert env_step["count"] == STEPS
    assert (worker_root["count"], worker_root["is_parallel"]) == (STEPS * WORKERS, True)
    simulate = find(worker_root, "UnityEnvironment.step", "simulate")
    assert (simulate["count"], simulate["is_parallel"]) == (STEPS * WORKERS, True)
    assert worker_root["total"] >= simulate["total"] > 0


def test_trainer_thread_trees_are_merged_under_thread_root(trained):
    thread_root = find(load_timing_tree(trained), "TrainerController.start_learning",
                       "trainer_threads", "thread_root")
    assert thread_root["is_parallel"]
    assert find(thread_root, "trainer_advance")["count"] == STEPS


def test_worker_and_thread_gauges_are_merged(trained):
    gauges = load_timing_tree(trained)["gauges"]
    reward = gauges["Environment.reward"]
    assert (reward["count"], reward["min"], reward["max"]) == (STEPS * WORKERS, 0.0, WORKERS - 1)
    assert gauges["Policy.loss"]["count"] == STEPS
    assert load_timing_tree(trained)["metadata"]["mlagents_version"] == "1.1.0"


def test_rlprof_analyze_splits_the_env_step_into_worker_compute_and_the_rest(trained, capsys):
    assert main(["analyze", str(trained)]) == 0
    out = capsys.readouterr().out
    assert f"Where the env_step time went: {STEPS} calls" in out
    assert "merged worker time (worker_root, parallel):" in out
    assert f"over {WORKERS} workers, {STEPS * WORKERS} calls" in out
    assert "/env_step/workers/worker_root *" in out


def test_convert_to_mlagents_writes_children_keyed_by_name(trained, tmp_path):
    output = tmp_path / "timers_mlagents.json"
    assert main(["convert", str(trained), "--to", "mlagents", "-o", str(output)]) == 0
    converted = json.loads(output.read_text())
    start_learning = converted["children"]["TrainerController.start_learning"]
    env_step = start_learning["children"]["TrainerController.advance"]["children"]["env_step"]
    assert env_step["children"]["workers"]["children"]["worker_root"]["count"] == STEPS * WORKERS
    assert load_timing_tree(output) == load_timing_tree(trained)


# --- the same source on ML-Agents' own timers ---------------------------------------------------


def mlagents_timers_module() -> types.ModuleType:
    if not CACHED_MLAGENTS_TIMERS.exists():
        pytest.skip("ML-Agents' timers.py is not cached (python benchmarks/timer_overhead.py fetches it)")
    spec = importlib.util.spec_from_file_location("mlagents_envs.timers", CACHED_MLAGENTS_TIMERS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def trainer_on_mlagents(monkeypatch) -> types.ModuleType:
    """tests/profiler/mlagents_trainer.py with its import switched to ``mlagents_envs.timers``."""
    package = types.ModuleType("mlagents_envs")
    package.timers = mlagents_timers_module()
    monkeypatch.setitem(sys.modules, "mlagents_envs", package)
    monkeypatch.setitem(sys.modules, "mlagents_envs.timers", package.timers)
    source = Path(mlagents_trainer.__file__).read_text()
    assert source.count("from profiler import (") == 1
    trainer = types.ModuleType("mlagents_trainer_on_mlagents")
    exec(compile(source.replace("from profiler import (", "from mlagents_envs.timers import ("),
                 "mlagents_trainer_on_mlagents", "exec"), trainer.__dict__)
    return trainer


def shape(node: dict) -> tuple:
    return (node["name"], node["count"], node.get("is_parallel", False),
            tuple(sorted(shape(child) for child in node["children"])))


def test_the_trainer_gives_the_same_tree_on_mlagents_timers_and_on_rlprof(
    trainer_on_mlagents, trained, tmp_path
):
    theirs = load_timing_tree(trainer_on_mlagents.train(tmp_path, steps=STEPS, workers=WORKERS))
    ours = load_timing_tree(trained)
    assert shape(ours) == shape(theirs)
    for name in ("Environment.reward", "Policy.loss"):
        assert {key: ours["gauges"][name][key] for key in ("min", "max", "count")} == {
            key: theirs["gauges"][name][key] for key in ("min", "max", "count")}


RLPROF_ONLY_KEYS = ("min", "max", "scheduling", "machine_load")
"""Per-call extremes, and the root's waits for a core and machine load (docs/formats.md): ML-Agents
has none; rlprof keeps them in that layout too (readers of ML-Agents' files skip keys they do not
know)."""


def layout_keys(node: dict) -> tuple:
    children = node.get("children", {})
    ignored = ("children", "metadata", *RLPROF_ONLY_KEYS)
    return (tuple(sorted(key for key in node if key not in ignored)),
            tuple((name, layout_keys(child)) for name, child in children.items()))


def test_the_mlagents_layout_has_mlagents_keys_at_every_level(trainer_on_mlagents):
    def program(timers) -> dict:
        timers.reset_timers()
        with timers.hierarchical_timer("outer"):
            with timers.hierarchical_timer("inner"):
                pass
        timers.set_gauge("reward", 1.0)
        timers.add_metadata("run", "a")
        return timers.get_timer_tree()

    theirs = program(sys.modules["mlagents_envs.timers"])
    ours = program(profiler)
    ours_in_their_layout = get_timer_tree(layout="mlagents")
    assert layout_keys(ours_in_their_layout) == layout_keys(theirs)
    assert set(theirs["metadata"]) <= set(ours_in_their_layout["metadata"])
    assert ours["children"][0]["name"] == "outer"  # rlprof's own layout stays the default
