"""Specification of ``analyze_run`` and its text, JSON and CSV renderings."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from run_files import with_waits_in_steps

from profiler import load_timing_tree
from profiler.analysis.analyze import AnalyzeOptions, analyze_run, render_analysis
from profiler.analysis.text_format import TABLE_WIDTH
from profiler.analysis.verdicts import judge_run

MLAGENTS_FILE = Path(__file__).parents[2] / "data" / "mlagents_timers.json"


def test_the_top_option_limits_the_blocks_but_counts_every_match(plain_tree):
    analysis = analyze_run(plain_tree, AnalyzeOptions(top=2))
    assert [row.label for row in analysis.blocks] == ["backward", "eval"]
    assert (analysis.blocks_matched, analysis.blocks_in_run) == (5, 5)


def test_the_wall_time_is_the_root_total(plain_tree):
    assert analyze_run(plain_tree).wall_time == pytest.approx(5.25)


def test_aggregating_by_name_lists_each_name_once(plain_tree):
    analysis = analyze_run(plain_tree, AnalyzeOptions(aggregate_by="name"))
    assert sorted(row.label for row in analysis.blocks) == ["backward", "eval", "forward", "load"]


def test_an_unknown_aggregation_is_refused(plain_tree):
    with pytest.raises(ValueError, match="cannot aggregate by 'thread'"):
        analyze_run(plain_tree, AnalyzeOptions(aggregate_by="thread"))


def test_the_table_opens_with_the_verdicts(vector_tree):
    text = render_analysis(analyze_run(vector_tree), title="run.json")
    first_section = text.split("\n\n")[0]
    assert first_section.startswith("Verdicts (what limits this run, costliest first")
    assert " 1. [straggler] worker 3 likely holds up the vector step" in first_section
    assert "costs 60.00 ms (36.4% of the wall time)" in first_section
    assert "Cannot tell from this file:" in first_section


def test_the_table_shows_the_blocks_step_split_and_workers(vector_tree):
    text = render_analysis(analyze_run(vector_tree), title="run.json")
    assert "train/vector.step/vector.wait_for_workers" in text
    assert "Where the vector.step time went: 10 calls" in text
    assert re.search(r"6\.00 ms\s+60\.00 ms\s+44\.4%  waiting on the slowest worker", text)
    assert re.search(r"10\s+10\.00 ms\s+10\.00 ms\s+\+81\.8%\s+-\s+-\s+-  worker 3", text)


def with_waits_in_the_steps(tree: dict) -> dict:
    """``tree`` with its trainer's waits for a core and time on one inside 5 of its 10 vector steps
    read: 1 ms and 0.5 ms a step."""
    return with_waits_in_steps(tree, {"vector.step": {"runs_read": 5, "run_queue_seconds": 0.005,
                                                      "cpu_seconds": 0.0025}})


def test_the_step_split_says_how_long_the_trainer_waited_for_a_core_and_ran_on_one_inside_the_steps(vector_tree):
    text = render_analysis(analyze_run(with_waits_in_the_steps(vector_tree)), title="run.json")
    assert ("inside these steps the trainer waited 1.00 ms per call for a core and ran 500.0 us per call on one "
            "(the kernel's count, 5 steps read)") in " ".join(text.split())


def test_json_holds_the_trainers_waits_inside_the_steps_where_read(vector_tree):
    document = json.loads(render_analysis(analyze_run(vector_tree), "json"))
    assert document["step_breakdowns"][0]["trainer_in_steps"] is None
    document = json.loads(render_analysis(analyze_run(with_waits_in_the_steps(vector_tree)), "json"))
    assert document["step_breakdowns"][0]["trainer_in_steps"] == pytest.approx(
        {"run_queue_per_call": 0.001, "cpu_per_call": 0.0005, "steps_read": 5})


def test_the_time_outside_any_block_is_shown_with_its_share(plain_tree):
    analysis = analyze_run(plain_tree)
    assert (analysis.untimed, analysis.untimed_share) == pytest.approx((0.25, 0.25 / 5.25))
    assert "untimed (outside any block): 250.00 ms (4.8% of wall time)" in render_analysis(analysis)


def test_analysis_and_verdicts_come_from_one_engine(vector_tree):
    assert analyze_run(vector_tree).verdicts == judge_run(vector_tree)


@pytest.mark.parametrize(
    "options",
    [AnalyzeOptions(top=None), AnalyzeOptions(aggregate_by="name", pattern=re.compile("vector"))],
    ids=["every block", "aggregated and filtered"],
)
def test_the_table_fits_a_100_column_terminal(vector_tree, options):
    text = render_analysis(analyze_run(vector_tree, options), title="x" * 200)
    assert max(len(line) for line in text.splitlines()) <= TABLE_WIDTH


def test_parallel_blocks_are_marked_and_explained(vector_tree):
    text = render_analysis(analyze_run(vector_tree))
    assert re.search(r"train/vector\.step/env\.step \*$", text, re.MULTILINE)
    assert "* ran beside the trainer" in text


def test_a_single_process_run_says_so_in_one_line_per_section(plain_tree):
    text = render_analysis(analyze_run(plain_tree))
    assert "Where the step time went: no env_manager.step or vector.step block" in text
    assert len(text.split("\n\n")[2].splitlines()) == 1
    assert "Per worker: no per-worker trees in this run" in text


def test_a_filter_that_matches_nothing_says_so(plain_tree):
    options = AnalyzeOptions(pattern=re.compile("nothing-like-this"))
    assert "(no block matches)" in render_analysis(analyze_run(plain_tree, options))


def test_the_mlagents_file_is_analysed_with_its_own_names():
    text = render_analysis(analyze_run(load_timing_tree(MLAGENTS_FILE)))
    assert "/env_step/worker_root *" in text
    assert "Where the env_step time went: 3 calls" in text
    assert "send, wait and receive (not timed apart)" in text
    assert "note: ML-Agents does not time sending, waiting and receiving apart" in text


def test_json_holds_blocks_breakdown_and_workers(vector_tree):
    document = json.loads(render_analysis(analyze_run(vector_tree), "json"))
    blocks = {block["block"]: block for block in document["blocks"]}
    assert blocks["train/vector.step/env.step"]["is_parallel"] is True
    assert blocks["train"]["share"] == pytest.approx(1.0)
    assert document["step_breakdowns"][0]["parts"][1]["total"] == pytest.approx(0.060)
    assert document["workers"]["workers"][3]["mean"] == pytest.approx(0.010)
    assert document["verdicts"][0]["kind"] == "straggler"
    assert document["untimed"]["seconds"] == pytest.approx(0.0)
    assert any("critical-path" in line for line in document["cannot_tell"])


def test_steps_a_worker_never_reported_are_named_under_the_workers(vector_tree):
    vector_tree["workers"][1]["unreported_steps"] = 37
    vector_tree["workers"][1]["unreported_reason"] = "its process was killed by SIGKILL before shipping them"
    analysis = analyze_run(vector_tree)
    assert ("worker 1: 37 steps taken but never reported (its process was killed by SIGKILL before "
            "shipping them); their time is missing from these figures") in render_analysis(analysis)
    assert json.loads(render_analysis(analysis, "json"))["unreported"] == [{
        "worker": "worker 1", "worker_id": 1, "steps": 37,
        "reason": "its process was killed by SIGKILL before shipping them",
    }]


def test_workers_with_nothing_unreported_add_no_line(vector_tree):
    for worker in vector_tree["workers"]:
        worker["unreported_steps"] = 0
    assert "never reported" not in render_analysis(analyze_run(vector_tree))


def test_json_of_a_single_process_run_has_no_breakdown_and_no_workers(plain_tree):
    document = json.loads(render_analysis(analyze_run(plain_tree), "json"))
    assert (document["step_breakdowns"], document["workers"]) == ([], None)


def test_csv_has_one_row_per_shown_block_with_raw_seconds(plain_tree):
    text = render_analysis(analyze_run(plain_tree), "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [row["block"] for row in rows][:2] == ["backward", "eval"]
    assert float(rows[0]["total_s"]) == pytest.approx(3.0)
    assert float(rows[0]["share"]) == pytest.approx(3.0 / 5.25)
    assert float(rows[0]["min_s"]) <= float(rows[0]["max_s"])
