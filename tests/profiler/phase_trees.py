"""Dumps of a training loop's phases, built by hand to put each phase on either side of a threshold,
and of a trainer's timeline."""

from __future__ import annotations

from profiler.analysis.outermost import outermost_spans
from profiler.tree.timer_json import normalize_timing_tree


def node(name: str, total: float, count: int, children: list | None = None) -> dict:
    return {"name": name, "total": total, "count": count, "children": children or []}


def phase_tree(*, policy: float = 1.0, update: float = 1.0, env: float = 1.0, untimed: float = 1.0,
               updates: int = 4, gap: float = 0.0, sb3: bool = False, step_inside_update: bool = False,
               algorithm: str = "PPO", timed_in_update: float = 0.8, steps_envs: bool = True) -> dict:
    """A run of ``policy`` seconds of ``Agent.get_action_and_value (no grad)`` (40% in its actor's
    forward), ``updates`` update blocks of ``update`` seconds in all (30% backward, 20% Adam.step,
    30% the forward with grad, the rest the update's own code; with ``timed_in_update`` the three
    blocks take that share instead of 80%, in the same proportions) one after another ``gap``
    seconds apart, ``env`` seconds of ``vector.step`` and ``untimed`` seconds outside any block. With
    ``sb3`` the update is ``<algorithm>.train`` (``PPO.train``) and the policy
    ``ActorCriticPolicy.forward (no grad)``;
    with ``step_inside_update`` the vector steps ran inside the update blocks; without
    ``steps_envs`` there is no ``vector.step`` block (a program that learns from a dataset)."""
    steps = node("vector.step", env, 100)
    update_name = f"{algorithm}.train" if sb3 else "update"
    timed = timed_in_update / 0.8 * update
    update_children = [node("backward", 0.3 * timed, updates), node("Adam.step", 0.2 * timed, updates),
                       node("Agent.get_action_and_value", 0.3 * timed, updates)]
    if step_inside_update:
        update_children.append(steps)
    policy_name = "ActorCriticPolicy.forward (no grad)" if sb3 else "Agent.get_action_and_value (no grad)"
    children = [node(policy_name, policy, 100, [node("Agent.actor.forward (no grad)", 0.4 * policy, 100)]),
                node(update_name, update + (env if step_inside_update else 0.0), updates, update_children)]
    if steps_envs and not step_inside_update:
        children.append(steps)
    gaps = gap * (updates - 1)
    spans, clock = [], 10.0
    for _ in range(updates):
        spans.append([update_name, clock, clock + update / updates])
        clock += update / updates + gap
    wall = policy + update + (env if steps_envs else 0.0) + untimed + gaps
    tree = {"name": "root", "total": wall, "count": 1, "children": children,
            "metadata": {"rlprof_framework_phases": "torch,stable_baselines3" if sb3 else "torch"},
            "timeline": {"clock": "perf_counter", "dropped": 0, "processes": [
                {"pid": 1, "name": "trainer", "clock_offset": 0.0,
                 "threads": [{"tid": 1, "name": "MainThread", "spans": spans, "instants": []}]}]}}
    return normalize_timing_tree(tree)


def timeline_tree(spans: list[list], total: float) -> dict:
    """A run of ``total`` seconds whose trainer thread recorded ``spans``; the root's self time is
    what no outermost span covers."""
    covered = sum(end - start for _, start, end in outermost_spans(spans))
    names = list(dict.fromkeys(name for name, _, _ in spans))
    return normalize_timing_tree({
        "name": "root", "total": total, "count": 1, "self": total - covered,
        "children": [{"name": name, "total": sum(end - start for other, start, end in spans if other == name),
                      "count": sum(1 for other, _, _ in spans if other == name), "children": []}
                     for name in names],
        "timeline": {"clock": "perf_counter", "dropped": 0, "processes": [
            {"pid": 1, "name": "trainer", "clock_offset": 0.0,
             "threads": [{"tid": 1, "name": "MainThread", "spans": spans, "instants": []}]}]},
    })


def with_latest_spans(tree: dict, complete_after: float) -> dict:
    """``tree`` as a long run's dump holds it: its trainer thread's rings dropped every span that
    ended at or before ``complete_after``; its blocks still count them all."""
    thread = tree["timeline"]["processes"][0]["threads"][0]
    kept = [span for span in thread["spans"] if span[2] > complete_after]
    tree["timeline"]["dropped"] += len(thread["spans"]) - len(kept)
    thread["spans"] = kept
    thread["spans_complete_after"] = complete_after
    return tree
