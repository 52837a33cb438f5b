"""Specification of ``rlprof analyze``'s block options, those of MegEngine's ``profile_analyze``,
and of ``rlprof report`` without ``-o``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler.cli.commands import main

MLAGENTS_FILE = Path(__file__).parents[2] / "data" / "mlagents_timers.json"


def analyze_json(capsys, *arguments):
    assert main(["analyze", *arguments, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def labels(document):
    return [block["block"] for block in document["blocks"]]


def one_line_error(capsys, *arguments):
    assert main(["analyze", *arguments]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    return captured.err


def test_dash_t_is_top(plain_run, capsys):
    assert labels(analyze_json(capsys, plain_run, "-t", "2")) == ["backward", "eval"]


def test_aggregate_sum_is_its_own_option_not_an_abbreviation(plain_run, capsys):
    document = analyze_json(capsys, plain_run, "--aggregate-by", "name", "--aggregate", "sum")
    assert (document["aggregate_by"], document["aggregate"]) == ("name", "sum")


def test_abbreviated_options_are_refused(plain_run, capsys):
    assert "unrecognized arguments: --aggreg" in one_line_error(capsys, plain_run, "--aggreg", "name")


def test_a_plus_before_the_key_orders_smallest_first(plain_run, capsys):
    document = analyze_json(capsys, plain_run, "--order-by", "+total")
    assert labels(document)[0] == "load"
    assert (document["order_by"], document["ascending"]) == ("total", True)


def test_ascending_orders_smallest_first(plain_run, capsys):
    assert labels(analyze_json(capsys, plain_run, "--order-by", "count", "--ascending"))[0] == "eval"


def test_an_unknown_order_key_names_the_choices(plain_run, capsys):
    error = one_line_error(capsys, plain_run, "--order-by", "+speed")
    assert "invalid choice: '+speed' (choose from total, self, count, avg, min, max" in error


def test_ordering_by_a_figure_the_file_lacks_is_a_one_line_error(capsys):
    assert "do not record per-call min/max" in one_line_error(capsys, str(MLAGENTS_FILE), "--order-by", "max")


def test_max_time_hides_blocks_over_it(plain_run, capsys):
    assert labels(analyze_json(capsys, plain_run, "--max-time", "0.6")) == ["load"]


def test_min_and_max_time_keep_the_blocks_between(plain_run, capsys):
    document = analyze_json(capsys, plain_run, "--min-time", "0.7", "--max-time", "0.8")
    assert labels(document) == ["eval", "eval/forward", "forward"]


def test_a_max_time_below_the_min_time_is_refused(plain_run, capsys):
    assert "no block can match" in one_line_error(capsys, plain_run, "--min-time", "1", "--max-time", "0.5")


def test_type_trainer_keeps_the_trainers_blocks(vector_run, capsys):
    document = analyze_json(capsys, vector_run, "--type", "trainer")
    assert "train/vector.step/env.step" not in labels(document)
    assert {block["process"] for block in document["blocks"]} == {"trainer"}


def test_type_worker_keeps_the_workers_blocks(vector_run, capsys):
    assert labels(analyze_json(capsys, vector_run, "--type", "worker")) == ["train/vector.step/env.step"]


def test_types_repeat_and_a_kind_is_the_name_up_to_its_first_dot(vector_run, capsys):
    document = analyze_json(capsys, vector_run, "--type", "policy", "--type", "env")
    assert sorted(labels(document)) == ["train/policy.act", "train/vector.step/env.step"]
    assert document["types"] == ["policy", "env"]


def test_aggregate_by_worker_gives_a_row_per_worker(vector_run, capsys):
    document = analyze_json(capsys, vector_run, "--aggregate-by", "worker", "--aggregate", "mean")
    assert labels(document) == ["worker 3", "worker 0", "worker 1", "worker 2"]
    assert document["blocks"][0]["total"] == pytest.approx(0.100)


def test_aggregate_by_process_puts_the_trainer_beside_its_workers(vector_run, capsys):
    document = analyze_json(capsys, vector_run, "--aggregate-by", "process")
    assert labels(document)[0] == "trainer"
    assert sorted(labels(document)[1:]) == ["worker 0", "worker 1", "worker 2", "worker 3"]


def test_an_aggregate_without_a_grouping_folds_every_block_into_one_row(plain_run, capsys):
    document = analyze_json(capsys, plain_run, "--aggregate", "max")
    assert labels(document) == ["all"]
    assert document["blocks"][0]["total"] == pytest.approx(3.0)  # backward, the longest


def test_aggregate_count_ranks_groups_by_their_number_of_blocks(plain_run, capsys):
    document = analyze_json(capsys, plain_run, "--aggregate-by", "name", "--aggregate", "count")
    assert labels(document)[0] == "forward"
    assert document["blocks"][0]["places"] == 2


def test_the_cumulative_column_adds_up_the_rows_so_far(plain_run, capsys):
    blocks = analyze_json(capsys, plain_run, "--order-by", "self")["blocks"]
    assert [block["cumulative"] for block in blocks] == pytest.approx([3.0, 3.75, 4.5, 5.0, 5.0])
    assert blocks[-1]["cumulative_share"] == pytest.approx(5.0 / 5.25)


def test_the_cumulative_total_does_not_count_a_nested_block_again(plain_run, capsys):
    blocks = analyze_json(capsys, plain_run)["blocks"]
    cumulative = {block["block"]: block["cumulative"] for block in blocks}
    assert cumulative["eval/forward"] == cumulative["eval"]


def test_the_table_shows_the_cumulative_share(plain_run, capsys):
    assert main(["analyze", plain_run]) == 0
    assert "   cum %  % wall  block" in capsys.readouterr().out


def test_the_path_column_takes_the_terminal_width(tmp_path, fake_clock, capsys, monkeypatch):
    from profiler import hierarchical_timer, write_timing_tree

    deep = ["a_rather_long_block_name"] * 5
    with hierarchical_timer(deep[0]), hierarchical_timer(deep[1]), hierarchical_timer(deep[2]), \
            hierarchical_timer(deep[3]), hierarchical_timer(deep[4]):
        fake_clock.advance(1.0)
    run = str(write_timing_tree(tmp_path / "deep.json"))
    full_path = "/".join(deep)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["analyze", run]) == 0
    assert full_path in capsys.readouterr().out
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["analyze", run]) == 0
    out = capsys.readouterr().out
    assert full_path not in out
    table = out.split("  block\n", 1)[1].split("\n\n", 1)[0]
    assert max(len(line) for line in table.splitlines()) <= 80


def test_report_without_output_writes_next_to_the_run(vector_run, tmp_path, capsys):
    assert main(["report", vector_run]) == 0
    written = tmp_path / "vector_report.html"
    assert capsys.readouterr().out.strip() == str(written)
    assert written.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(("run_name", "report_name"), [
    ("demo_timers.json", "demo_report.html"),
    ("1234.timers.json", "1234_report.html"),
    ("timers.json", "timers_report.html"),
    ("run.json.gz", "run_report.html"),
])
def test_the_report_beside_a_run_is_named_after_it(run_name, report_name, tmp_path):
    from profiler.cli.commands import report_path_beside

    assert report_path_beside(tmp_path / run_name) == tmp_path / report_name


def test_ordering_by_memory_without_tracked_allocations_is_a_one_line_error(plain_run, capsys):
    assert "did not track its blocks' allocations" in one_line_error(capsys, plain_run, "--order-by", "memory")


def test_aggregate_by_domain_and_type_domain(tmp_path, fake_clock, capsys):
    from profiler import Domain, hierarchical_timer, write_timing_tree

    with Domain("learner").new_task("update"):
        fake_clock.advance(1.0)
    with hierarchical_timer("log"):
        fake_clock.advance(0.5)
    run = str(write_timing_tree(tmp_path / "domains.json"))
    assert labels(analyze_json(capsys, run, "--aggregate-by", "domain")) == ["learner", "(no domain)"]
    assert labels(analyze_json(capsys, run, "--type", "domain")) == ["update"]
