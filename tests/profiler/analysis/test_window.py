"""The window of a run between two dumps: additive figures subtracted, extremes and gauges as of now."""

from __future__ import annotations

from typing import Any

from profiler.analysis.live_figures import live_figures
from profiler.analysis.verdicts import STRAGGLER, judge_run
from profiler.analysis.window import window_tree


def node(name: str, total: float, count: int, children: list[dict[str, Any]] | None = None,
         *, self_time: float | None = None, parallel: bool = False, low: float = 0.001,
         high: float = 0.01) -> dict[str, Any]:
    children = children or []
    built = {"name": name, "total": total, "count": count,
             "self": total - sum(child["total"] for child in children) if self_time is None else self_time,
             "min": low, "max": high, "children": children}
    if parallel:
        built["is_parallel"] = True
    return built


def worker(worker_id: int, steps: int, step_seconds: float, last: int, waited: float,
           *, payloads: int = 1) -> dict[str, Any]:
    entry = node(f"worker {worker_id}", steps * step_seconds, 1, [node("env.step", steps * step_seconds, steps)])
    entry.update({
        "worker_id": worker_id, "manager": "envmanager", "manager_id": 1, "pid": 1000 + worker_id,
        "payloads": payloads, "missed_payloads": 0, "duplicates": 0, "unreported_steps": 0,
        "critical_path": {"vector_steps": steps, "last_to_reply": last, "wait_as_last_seconds": waited,
                          "wait_as_last_histogram": {"bounds_seconds": [0.01], "counts": [steps - last, last]}},
        "env_time": {"wall_seconds": steps * step_seconds, "cpu_seconds": 0.0, "calls": steps,
                     "cpu_measured_calls": steps},
    })
    return entry


def run(wall: float, steps: int, slow_worker_last: int, slow_step: float, *,
        gauge: float = 1.0) -> dict[str, Any]:
    """A dump of 2 workers stepping in lockstep ``steps`` times; worker 1's env takes ``slow_step``."""
    wait = steps * max(0.003, slow_step)
    step = node("env_manager.step", wait + steps * 0.0002, steps, [
        node("send_actions", steps * 0.0001, steps),
        node("wait_for_workers", wait, steps),
        node("receive_results", steps * 0.0001, steps),
        node("env.step", steps * (0.003 + slow_step), 2 * steps, parallel=True),
    ], self_time=0.0)
    tree = node("root", wall, 1, [step], self_time=wall - step["total"])
    tree["gauges"] = {"loss": {"value": gauge, "min": 0.0, "max": gauge, "count": steps}}
    tree["metadata"] = {"cores_available": "8"}
    tree["timeline"] = {"processes": []}
    tree["workers"] = [worker(0, steps, 0.003, steps - slow_worker_last, 0.0),
                       worker(1, steps, slow_step, slow_worker_last, slow_worker_last * max(0.0, slow_step - 0.003))]
    return tree


def test_additive_figures_are_the_later_dump_minus_the_earlier_node_by_node():
    window = window_tree(run(10.0, 300, 150, 0.003), run(4.0, 100, 50, 0.003))
    step = window["children"][0]
    assert window["total"] == 6.0
    assert step["count"] == 200
    assert [child["count"] for child in step["children"]] == [200, 200, 200, 400]
    assert abs(step["total"] - (300 - 100) * 0.0032) < 1e-9


def test_extremes_and_gauges_are_those_of_the_later_dump():
    later = run(10.0, 300, 150, 0.003, gauge=7.0)
    later["children"][0]["max"] = 0.5
    window = window_tree(later, run(4.0, 100, 50, 0.003, gauge=1.0))
    assert window["gauges"]["loss"]["value"] == 7.0
    assert window["children"][0]["max"] == 0.5


def test_workers_are_subtracted_worker_by_worker_with_their_critical_path_and_env_time():
    window = window_tree(run(10.0, 300, 290, 0.02), run(4.0, 100, 95, 0.02))
    slow = window["workers"][1]
    assert slow["critical_path"]["vector_steps"] == 200
    assert slow["critical_path"]["last_to_reply"] == 195
    assert slow["critical_path"]["wait_as_last_histogram"]["counts"] == [5, 195]
    assert slow["env_time"]["calls"] == 200
    assert slow["children"][0]["count"] == 200
    assert slow["payloads"] == 0


def test_a_block_or_worker_new_since_the_earlier_dump_counts_whole():
    later, earlier = run(10.0, 300, 150, 0.003), run(4.0, 100, 50, 0.003)
    earlier["workers"] = earlier["workers"][:1]
    earlier["children"][0]["children"] = earlier["children"][0]["children"][:1]
    window = window_tree(later, earlier)
    assert window["workers"][1]["critical_path"]["vector_steps"] == 300
    assert window["children"][0]["children"][1]["count"] == 300


def test_a_later_dump_that_went_down_is_a_fresh_start_taken_whole():
    reset = run(2.0, 50, 25, 0.003)
    window = window_tree(reset, run(10.0, 300, 150, 0.003))
    assert window["total"] == 2.0
    assert window["children"][0]["count"] == 50


def test_the_window_leaves_the_timeline_out_and_keeps_the_metadata():
    window = window_tree(run(10.0, 300, 150, 0.003), run(4.0, 100, 50, 0.003))
    assert "timeline" not in window
    assert window["metadata"] == {"cores_available": "8"}


def test_rounding_never_makes_a_figure_negative():
    later = run(10.0, 300, 150, 0.003)
    earlier = run(4.0, 300, 150, 0.003)
    earlier["children"][0]["children"][1]["total"] += 1e-12
    window = window_tree(later, earlier)
    assert window["children"][0]["children"][1]["total"] == 0.0


def test_a_straggler_that_starts_late_is_a_verdict_over_the_window_but_not_since_the_start():
    # 1000 balanced steps, then 100 steps in which worker 1 is slow and last in every one.
    earlier = run(10.0, 1000, 500, 0.003)
    later = run(12.5, 1100, 600, 0.003)
    later["workers"][1] = worker(1, 1100, 0.003, 600, 100 * 0.017)
    later["workers"][1]["children"][0]["total"] += 100 * 0.017
    later["workers"][1]["env_time"]["wall_seconds"] += 100 * 0.017
    assert judge_run(later).of_kind(STRAGGLER) == []
    window = window_tree(later, earlier)
    assert [verdict.kind for verdict in judge_run(window).of_kind(STRAGGLER)] == [STRAGGLER]


def test_the_live_figures_of_a_window_give_its_own_throughput_and_phase_shares_adding_up_to_one():
    later, earlier = run(10.0, 300, 150, 0.003), run(4.0, 100, 50, 0.003)
    figures = live_figures(later, window_tree(later, earlier))
    assert abs(figures.env_steps_per_second - 2 * 200 / 6.0) < 1e-9
    assert abs(figures.env_steps_per_second_since_start - 2 * 300 / 10.0) < 1e-9
    assert abs(sum(figures.phase_shares.values()) - 1.0) < 1e-9
    assert [worker.last_share for worker in figures.workers] == [0.5, 0.5]


def test_a_straggler_that_recovered_is_no_verdict_over_the_window_though_it_is_since_the_start():
    # 1000 steps in which worker 1 is slow (17 ms more) and last in every one, then 1000 balanced steps.
    slow_part = 1000 * 0.017
    earlier = run(30.0, 1000, 1000, 0.02)
    later = run(23.5 + slow_part, 2000, 1500, 0.003)
    step = later["children"][0]
    for block in (step, step["children"][1]):
        block["total"] += slow_part
    later["workers"][1] = worker(1, 2000, 0.003, 1500, slow_part)
    for block in (later["workers"][1], later["workers"][1]["children"][0]):
        block["total"] += slow_part
    later["workers"][1]["env_time"]["wall_seconds"] += slow_part
    later["workers"][0]["critical_path"]["last_to_reply"] = 500
    assert [verdict.kind for verdict in judge_run(later).of_kind(STRAGGLER)] == [STRAGGLER]
    assert judge_run(window_tree(later, earlier)).of_kind(STRAGGLER) == []
