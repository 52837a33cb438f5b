"""Specification: a dump's ``untimed_samples`` become places with seconds and an error, and the
share of the wall time that no place explains; the ``untimed`` verdict names the places."""

from __future__ import annotations

import json
import math

import pytest

from profiler import TimerFileError
from profiler.analysis.analyze import analyze_run, render_analysis
from profiler.analysis.untimed_places import SAMPLER_OFF_METADATA, untimed_places
from profiler.analysis.verdicts import UNTIMED, judge_run
from profiler.tree.timer_json import normalize_timing_tree


def place(function: str, samples: int, seconds: float, line: int = 10, calls: str = "") -> dict:
    return {"function": function, "file": "/code/train.py", "line": line, "calls": calls,
            "samples": samples, "seconds": seconds}


def run_tree(*places: dict, unnamed: tuple[int, float] = (0, 0.0), untimed: float = 8.0) -> dict:
    """A 10 s run with ``untimed`` seconds outside its one block, sampled at ``places``."""
    return normalize_timing_tree({
        "name": "root", "total": 10.0, "count": 1,
        "children": [{"name": "update", "total": 10.0 - untimed, "count": 5, "children": []}],
        "untimed_samples": {
            "thread": "MainThread", "interval_seconds": 0.005,
            "samples": 2000, "in_blocks": 400,
            "unnamed": {"samples": unnamed[0], "seconds": unnamed[1]},
            "other_places": {"samples": 0, "seconds": 0.0},
            "places": list(places),
        },
    })


def test_each_place_gets_the_untimed_time_in_proportion_to_its_sampled_seconds():
    found = untimed_places(run_tree(place("log", 300, 7.5), place("main", 100, 2.5, line=3)))
    log, main = found.places
    assert (log.seconds, main.seconds) == (pytest.approx(6.0), pytest.approx(2.0))
    assert log.error_seconds == pytest.approx(8.0 * math.sqrt(0.75 * 0.25 / 400))


def test_a_places_error_counts_the_time_each_of_its_looks_stands_for():
    # Both places hold half the sampled seconds; "early" was seen by 200 looks of 20 ms, "late" by
    # 40 looks of 100 ms once the looks had thinned out: fewer looks, the larger error.
    early = {**place("early", 200, 4.0), "seconds_squared": 200 * 0.02 ** 2}
    late = {**place("late", 40, 4.0, line=3), "seconds_squared": 40 * 0.1 ** 2}
    found = untimed_places(run_tree(early, late))
    assert found.places[0].error_seconds == pytest.approx(math.sqrt(200 * 0.02 ** 2 * 0.5))
    assert found.places[1].error_seconds == pytest.approx(math.sqrt(40 * 0.1 ** 2 * 0.5))


def test_with_equal_looks_the_error_from_the_squares_is_the_binomial_one():
    # 400 looks of 20 ms each: the squares' error and the samples' binomial error agree.
    squares = untimed_places(run_tree({**place("log", 300, 6.0), "seconds_squared": 300 * 0.02 ** 2},
                                      {**place("main", 100, 2.0, line=3), "seconds_squared": 100 * 0.02 ** 2}))
    assert squares.places[0].error_seconds == pytest.approx(8.0 * math.sqrt(0.75 * 0.25 / 400))


def test_the_table_says_the_looks_thinned_out_as_the_run_went_on():
    tree = run_tree(place("log", 300, 1.5))
    tree["untimed_samples"]["longest_interval_seconds"] = 0.1
    assert "one each 5.00 ms, thinning to one each 100.00 ms" in render_analysis(analyze_run(tree))


def test_samples_in_no_nameable_code_are_unexplained():
    found = untimed_places(run_tree(place("log", 300, 6.0), unnamed=(100, 2.0)))
    assert found.unexplained_seconds == pytest.approx(2.0)


def test_untimed_time_outside_the_span_sampled_is_unexplained_not_credited_to_the_places():
    # The samples stand for 2 s of the 8 s untimed: the sampler started late (start-up untimed).
    found = untimed_places(run_tree(place("log", 300, 1.5), place("main", 100, 0.5, line=3)))
    log, main = found.places
    assert (log.seconds, main.seconds) == (pytest.approx(1.5), pytest.approx(0.5))
    assert found.unexplained_seconds == pytest.approx(6.0)
    assert log.error_seconds == pytest.approx(2.0 * math.sqrt(0.75 * 0.25 / 400))


def test_without_samples_all_the_untimed_time_is_unexplained():
    tree = run_tree()
    del tree["untimed_samples"]
    assert untimed_places(tree).unexplained_seconds == pytest.approx(8.0)
    assert json.loads(render_analysis(analyze_run(tree), "json"))["untimed"]["unexplained_share"] \
        == pytest.approx(0.8)


def test_the_json_reports_the_unexplained_share_beside_the_untimed_share_and_the_places():
    document = json.loads(render_analysis(analyze_run(run_tree(place("log", 300, 6.0), unnamed=(100, 2.0))),
                                          "json"))
    assert document["untimed"]["share"] == pytest.approx(0.8)
    assert document["untimed"]["unexplained_share"] == pytest.approx(0.2)
    assert document["untimed"]["places"][0]["function"] == "log"


def test_the_table_shows_where_the_untimed_time_went():
    text = render_analysis(analyze_run(run_tree(place("log", 300, 1.5, calls="import"))))
    assert "where the untimed time went" in text
    assert "log (train.py:10) in import" in text


def test_the_untimed_verdict_names_the_costliest_places():
    verdict = judge_run(run_tree(place("log", 300, 7.5), place("main", 100, 2.5, line=3))).of_kind(UNTIMED)[0]
    assert "log (train.py:10) 6.00 s" in verdict.title
    assert "nothing here says what it was" not in verdict.title


def test_without_samples_the_untimed_verdict_says_nothing_names_it():
    tree = run_tree()
    del tree["untimed_samples"]
    assert "nothing here says what it was" in judge_run(tree).of_kind(UNTIMED)[0].title


def test_without_samples_the_table_says_nothing_was_sampled_and_how_to_sample():
    tree = run_tree()
    del tree["untimed_samples"]
    assert "where the untimed time went: not sampled (runs under `rlprof run` sample" in render_analysis(analyze_run(tree))


def test_a_run_whose_sampler_was_turned_off_is_told_so_not_to_use_rlprof_run():
    tree = run_tree()
    del tree["untimed_samples"]
    tree["metadata"][SAMPLER_OFF_METADATA] = "off"  # rlprof run --no-stack-sampler
    assert "where the untimed time went: not sampled (`rlprof run --no-stack-sampler`" in render_analysis(analyze_run(tree))
    verdict = judge_run(tree).of_kind(UNTIMED)[0]
    assert "(the run's stack was not sampled: --no-stack-sampler)" in verdict.title
    assert "`rlprof run` without --no-stack-sampler samples the stack" in verdict.suggestion


def test_a_sampler_that_took_no_sample_outside_a_block_is_not_said_to_be_missing():
    tree = run_tree()  # sampled under rlprof run, every look inside a block: a run too short for it
    text = render_analysis(analyze_run(tree))
    assert "the stack sampler (one each 5.00 ms) took no sample outside a block" in text
    assert "untimed time went: not sampled" not in text
    verdict = judge_run(tree).of_kind(UNTIMED)[0]
    assert "nothing here says what it was: the stack sampler (one each 5.00 ms) took no sample" in verdict.title
    assert "A longer run gives the stack sampler looks" in verdict.suggestion
    assert "`rlprof run` samples" not in verdict.suggestion


def test_samples_only_in_code_no_place_names_are_counted_not_called_missing():
    tree = run_tree(unnamed=(100, 2.0))
    assert ("the stack sampler (one each 5.00 ms) took 100 samples outside any block, none of them in code "
            "a place names") in render_analysis(analyze_run(tree))


def test_a_malformed_section_is_refused_in_one_line():
    with pytest.raises(TimerFileError, match=r"untimed_samples.places\[0\].line: must be a whole number"):
        run_tree({"function": "log", "file": "a.py", "line": -1, "samples": 1, "seconds": 0.1})


def test_negative_squared_seconds_are_refused_in_one_line():
    with pytest.raises(TimerFileError, match=r"untimed_samples.places\[0\].seconds_squared: must be a finite time"):
        run_tree({**place("log", 3, 0.1), "seconds_squared": -1.0})


def test_a_place_whose_last_look_comes_before_its_first_is_refused_in_one_line():
    with pytest.raises(TimerFileError, match=r"untimed_samples.places\[0\]: its last look comes before its first"):
        run_tree({**place("log", 3, 0.1), "first_look": 5.0, "last_look": 4.0})


def test_a_place_with_one_of_its_looks_times_only_is_refused_in_one_line():
    with pytest.raises(TimerFileError, match=r"untimed_samples.places\[0\].last_look: must be a finite number"):
        run_tree({**place("log", 3, 0.1), "first_look": 5.0})


def test_a_place_was_seen_during_a_window_its_looks_from_first_to_last_overlap():
    found = untimed_places(run_tree({**place("loop", 3, 0.1), "first_look": 3.5, "last_look": 7.0},
                                    {**place("start-up", 3, 0.1, line=3), "first_look": 1.0, "last_look": 3.9},
                                    {**place("end", 3, 0.1, line=5), "first_look": 8.1, "last_look": 9.0},
                                    place("old dump", 3, 0.1, line=4)))
    assert [found_place.seen_during(4.0, 8.0) for found_place in found.places] == [True, False, False, False]


def tree_with_workers(*sampled: bool) -> dict:
    """A run whose workers spent 4 s each outside their env calls; those ``sampled`` shipped
    samples of their stacks (3:1 between the program's render and waiting on the pipe)."""
    workers = []
    for worker_id, has_samples in enumerate(sampled):
        entry = {"name": f"worker {worker_id}", "worker_id": worker_id, "manager": "AsyncVectorEnv",
                 "total": 5.0, "count": 1, "self": 4.0,
                 "children": [{"name": "env.step", "total": 1.0, "count": 100, "children": []}]}
        if has_samples:
            entry["untimed_samples"] = {
                "thread": "MainThread", "interval_seconds": 0.02, "samples": 250, "in_blocks": 50,
                "unnamed": {"samples": 0, "seconds": 0.0}, "other_places": {"samples": 0, "seconds": 0.0},
                "places": [place("render", 150, 3.0),
                           {"function": "_recv", "file": "/usr/lib/python3.11/multiprocessing/connection.py",
                            "line": 395, "calls": "_async_worker", "samples": 50, "seconds": 1.0}]}
        workers.append(entry)
    tree = run_tree()
    tree["workers"] = normalize_timing_tree({"name": "root", "total": 10.0, "workers": workers})["workers"]
    return tree


def test_each_sampled_workers_untimed_time_is_split_over_its_places_with_their_sample_counts():
    document = json.loads(render_analysis(analyze_run(tree_with_workers(True, False)), "json"))
    (worker,) = document["untimed"]["workers"]  # worker 1 shipped no samples: not listed
    assert worker["worker"] == "AsyncVectorEnv worker 0" and worker["untimed_seconds"] == 4.0
    render, wait = worker["places"]
    assert (render["function"], render["samples"], render["seconds"]) == ("render", 150, pytest.approx(3.0))
    assert (wait["function"], wait["samples"], wait["seconds"]) == ("_recv", 50, pytest.approx(1.0))


def test_the_report_names_a_workers_wait_on_its_pipe_as_waiting_for_the_trainer():
    text = render_analysis(analyze_run(tree_with_workers(True)))
    assert "AsyncVectorEnv worker 0: 4.00 s outside env calls, 200 samples" in text
    assert "150 samples  render (train.py:10)" in text
    assert "_recv (connection.py:395) in _async_worker: waiting for the trainer's next call" in text


def test_a_run_whose_workers_sampled_nothing_has_no_worker_places_section():
    text = render_analysis(analyze_run(tree_with_workers(False, False)))
    assert "where each worker's time outside its env calls went" not in text
