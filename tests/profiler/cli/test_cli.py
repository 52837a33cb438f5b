"""Specification of the ``rlprof`` command line, run in-process through ``main``.

(The installed console script and ``python -m profiler`` are run for real in
test_cli_processes.py.)
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path

import pytest
from run_files import write_vector_run

import profiler
from profiler import hierarchical_timer, write_timing_tree
from profiler.cli import commands as cli
from profiler.cli.commands import load_plugin_commands, main
from profiler.export import EXPORT_FORMATS

MLAGENTS_FILE = Path(__file__).parents[2] / "data" / "mlagents_timers.json"


def block_lines(text):
    """The block rows of an analyze table: below its column headings, above the next blank line."""
    section = next(part for part in text.split("\n\n") if "% wall  block" in part)
    lines = section.split("% wall  block\n", 1)[1].splitlines()
    return [line for line in lines if not line.startswith("*")]


# --- analyze ------------------------------------------------------------------------------------


def test_analyze_prints_verdicts_blocks_step_split_and_workers(vector_run, capsys):
    assert main(["analyze", vector_run]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Verdicts (what limits this run")
    assert "[straggler] worker 3 likely holds up the vector step" in out
    assert "train/vector.step/vector.wait_for_workers" in out
    assert "Where the vector.step time went" in out
    assert "Per worker (env.step)" in out


def test_analyze_json_carries_the_verdicts(vector_run, capsys):
    main(["analyze", vector_run, "--format", "json"])
    (straggler,) = [verdict for verdict in json.loads(capsys.readouterr().out)["verdicts"]
                    if verdict["kind"] == "straggler"]
    assert straggler["cost_seconds"] == pytest.approx(0.060)
    assert straggler["evidence"]["worker_id"] == 3
    assert set(straggler) == {"kind", "title", "cost_seconds", "share", "evidence", "suggestion"}


def test_analyze_top_limits_the_block_rows(plain_run, capsys):
    main(["analyze", plain_run, "--top", "2"])
    assert [line.split()[-1] for line in block_lines(capsys.readouterr().out)] == ["backward", "eval"]


def test_analyze_top_zero_shows_every_block(plain_run, capsys):
    main(["analyze", plain_run, "--top", "0"])
    assert len(block_lines(capsys.readouterr().out)) == 5


def test_analyze_orders_by_the_chosen_figure(plain_run, capsys):
    main(["analyze", plain_run, "--order-by", "count", "--top", "2"])
    assert [line.split()[-1] for line in block_lines(capsys.readouterr().out)] == ["backward", "forward"]


def test_analyze_orders_by_the_longest_single_call_and_shows_the_extremes(tmp_path, fake_clock, capsys):
    for name, calls in (("steady", (1.0, 1.0, 1.0)), ("stall", (0.01, 0.01, 2.5))):
        for seconds in calls:
            with profiler.hierarchical_timer(name):
                fake_clock.advance(seconds)
    path = profiler.write_timing_tree(tmp_path / "run.json")
    assert main(["analyze", str(path), "--order-by", "max"]) == 0
    out = capsys.readouterr().out
    assert "min/call" in out and "max/call" in out
    assert [line.split()[-1] for line in block_lines(out)] == ["stall", "steady"]
    assert main(["analyze", str(path), "--order-by", "min"]) == 0
    assert [line.split()[-1] for line in block_lines(capsys.readouterr().out)] == ["steady", "stall"]


@pytest.fixture
def run_with_domains(tmp_path, fake_clock):
    """A loop whose frames and tasks belong to the domain ``rl``, beside a plain block."""
    rl = profiler.Domain("rl")
    frame, update = rl.new_frame("iteration"), rl.new_task("update")
    for _ in range(4):
        with frame:
            with profiler.hierarchical_timer("policy"):
                fake_clock.advance(0.01)
            with update:
                fake_clock.advance(0.015)
    return str(profiler.write_timing_tree(tmp_path / "run.json"))


def test_analyze_keeps_the_blocks_of_one_domain(run_with_domains, capsys):
    assert main(["analyze", run_with_domains, "--domain", "rl", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [block["block"] for block in document["blocks"]] == ["iteration", "iteration/update"]
    assert document["domain"] == "rl"


def test_analyze_shows_the_frames(run_with_domains, capsys):
    assert main(["analyze", run_with_domains]) == 0
    frames = capsys.readouterr().out.split("\nFrames\n")[1].splitlines()
    assert frames[1].split() == ["4", "25.00", "ms", "25.00", "ms", "25.00", "ms", "40.0", "iteration", "(rl)"]
    main(["analyze", run_with_domains, "--format", "json"])
    (frame,) = json.loads(capsys.readouterr().out)["frames"]
    assert (frame["frames"], frame["domain"]) == (4, "rl")
    assert frame["frames_per_second"] == pytest.approx(40.0)


def test_analyze_without_frames_has_no_frames_section(plain_run, capsys):
    main(["analyze", plain_run])
    assert "\nFrames\n" not in capsys.readouterr().out


def test_analyze_aggregates_a_name_across_the_tree(plain_run, capsys):
    main(["analyze", plain_run, "--aggregate-by", "name", "--format", "json"])
    forward = next(b for b in json.loads(capsys.readouterr().out)["blocks"] if b["name"] == "forward")
    assert (forward["total"], forward["count"], forward["places"]) == pytest.approx((1.5, 4, 2))


def test_analyze_hides_blocks_under_the_minimum_time(plain_run, capsys):
    main(["analyze", plain_run, "--min-time", "0.76", "--format", "json"])
    assert [b["block"] for b in json.loads(capsys.readouterr().out)["blocks"]] == ["backward"]


def test_analyze_filters_blocks_by_regex(plain_run, capsys):
    main(["analyze", plain_run, "--filter", "forw", "--format", "json"])
    assert [b["block"] for b in json.loads(capsys.readouterr().out)["blocks"]] == [
        "eval/forward", "forward"]


def test_analyze_json_carries_the_share_of_wall_time(plain_run, capsys):
    main(["analyze", plain_run, "--format", "json"])
    document = json.loads(capsys.readouterr().out)
    assert document["wall_time"] == pytest.approx(5.25)
    assert document["blocks"][0]["share"] == pytest.approx(3.0 / 5.25)


def test_analyze_csv_is_the_block_rows(plain_run, capsys):
    main(["analyze", plain_run, "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [row["block"] for row in rows] == ["backward", "eval", "eval/forward", "forward", "load"]


def test_analyze_of_a_single_process_run_says_there_is_no_vector_step(plain_run, capsys):
    assert main(["analyze", plain_run]) == 0
    assert "no env_manager.step or vector.step block" in capsys.readouterr().out


def test_analyze_reads_the_mlagents_file(capsys):
    assert main(["analyze", str(MLAGENTS_FILE)]) == 0
    out = capsys.readouterr().out
    assert "TrainerController.start_learning" in out
    assert "Where the env_step time went: 3 calls" in out


# --- bad input: one line on stderr, exit code 2, nothing on stdout --------------------------------


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


NEGATIVE_TIME = json.dumps({"name": "root", "total": 1.0, "count": 1, "children": [
    {"name": "step", "total": -1.0, "count": 1, "children": []}]})


@pytest.mark.parametrize(
    ("make_arguments", "message"),
    [
        (lambda tmp: ["analyze", str(tmp / "missing.json")], "no such file"),
        (lambda tmp: ["analyze", write(tmp / "a.json", "{not json")], "not JSON"),
        (lambda tmp: ["analyze", write(tmp / "a.json", '{"rows": []}')], "not a timer tree"),
        (lambda tmp: ["analyze", write(tmp / "a.json", NEGATIVE_TIME)], ">= 0"),
        (lambda tmp: ["analyze", str(MLAGENTS_FILE), "--bogus"], "unrecognized arguments: --bogus"),
        (lambda tmp: ["analyze", str(MLAGENTS_FILE), "--filter", "("], "bad regular expression"),
        (lambda tmp: ["analyze", str(MLAGENTS_FILE), "--top", "-1"], "argument -t/--top"),
        (lambda tmp: ["analyze", str(MLAGENTS_FILE), "--min-time", "-2"], "argument --min-time"),
        (lambda tmp: ["analyze", str(MLAGENTS_FILE), "--order-by", "speed"], "invalid choice"),
        (lambda tmp: ["analyze", str(MLAGENTS_FILE), "--order-by", "max"],
         "do not record per-call min/max"),
        (lambda tmp: ["diff", str(MLAGENTS_FILE), str(tmp / "missing.json")], "no such file"),
        (lambda tmp: ["diff", str(MLAGENTS_FILE), str(MLAGENTS_FILE), "--threshold", "x"],
         "argument --threshold"),
        (lambda tmp: [], "arguments are required: COMMAND"),
        (lambda tmp: ["frobnicate"], "invalid choice"),
    ],
    ids=["missing file", "not json", "other shape", "negative time", "unknown option",
         "bad regex", "negative top", "negative min time", "unknown order",
         "max of a file without it", "diff missing file",
         "bad threshold", "no command", "unknown command"],
)
def test_bad_input_is_one_line_on_stderr_and_exit_code_2(tmp_path, capsys, make_arguments, message):
    assert main(make_arguments(tmp_path)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("rlprof: error: ")
    assert captured.err.count("\n") == 1
    assert message in captured.err


# --- diff ---------------------------------------------------------------------------------------


@pytest.fixture
def base_and_slower(tmp_path, fake_clock):
    """Two runs of the vector trainer; in the second the straggler takes 20 ms, not 10, a step."""
    base = write_vector_run(tmp_path / "base_timers.json", fake_clock)
    profiler.reset_timers()
    slower = write_vector_run(tmp_path / "slower_timers.json", fake_clock,
                              worker_step_seconds=(0.004, 0.004, 0.004, 0.020))
    return str(base), str(slower)


def test_diff_of_a_run_with_itself_finds_no_change(vector_run, capsys):
    assert main(["diff", vector_run, vector_run, "--fail-on-regression"]) == 0
    assert "no block changed beyond the threshold" in capsys.readouterr().out


def test_diff_lists_the_biggest_change_first(base_and_slower, capsys):
    main(["diff", *base_and_slower])
    first_row = capsys.readouterr().out.splitlines()[3]
    assert first_row.endswith("train/vector.step/env.step")
    assert "slower" in first_row


def test_diff_fails_on_a_regression_when_asked(base_and_slower, capsys):
    assert main(["diff", *base_and_slower, "--fail-on-regression"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rlprof: ") and "regressed beyond 10% per call" in err


def test_diff_reports_a_regression_without_failing_unless_asked(base_and_slower):
    assert main(["diff", *base_and_slower]) == 0


def test_diff_threshold_decides_what_counts_as_a_regression(base_and_slower):
    assert main(["diff", *base_and_slower, "--fail-on-regression", "--threshold", "500"]) == 0


# --- convert and report -------------------------------------------------------------------------


@pytest.mark.parametrize("format_name", EXPORT_FORMATS)
def test_convert_writes_the_chosen_format(vector_run, tmp_path, capsys, format_name):
    output = tmp_path / "out" / f"run.{format_name}"
    assert main(["convert", vector_run, "--to", format_name, "-o", str(output)]) == 0
    assert output.stat().st_size > 0
    assert capsys.readouterr().out.strip() == str(output)


def test_convert_to_an_unknown_format_fails_without_writing(vector_run, tmp_path, capsys):
    output = tmp_path / "run.xml"
    assert main(["convert", vector_run, "--to", "xml", "-o", str(output)]) == 2
    assert "unknown format 'xml'" in capsys.readouterr().err
    assert not output.exists()


def test_convert_of_a_bad_file_leaves_no_output(tmp_path, capsys):
    output = tmp_path / "trace.json"
    bad = write(tmp_path / "bad.json", "[]")
    assert main(["convert", bad, "--to", "chrome", "-o", str(output)]) == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bad.json"]


def test_convert_onto_a_folder_is_a_one_line_error(vector_run, tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    assert main(["convert", vector_run, "--to", "chrome", "-o", str(tmp_path / "taken")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_report_writes_a_self_contained_html_page(vector_run, tmp_path):
    output = tmp_path / "report.html"
    assert main(["report", vector_run, "-o", str(output)]) == 0
    assert "<html" in output.read_text().lower()


def test_report_reads_the_mlagents_file(tmp_path):
    assert main(["report", str(MLAGENTS_FILE), "-o", str(tmp_path / "report.html")]) == 0


# --- version, help, plugins ---------------------------------------------------------------------


def test_version_prints_the_package_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"rlprof {profiler.__version__}"


def test_help_lists_the_built_in_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(command in out for command in ("analyze", "diff", "convert", "report"))


class FakeEntryPoint:
    """What ``importlib.metadata`` hands out: a ``name`` and a ``load()`` giving the callable."""

    def __init__(self, name, register):
        self.name = name
        self._register = register

    def load(self):
        if isinstance(self._register, Exception):
            raise self._register
        return self._register


def register_hello(subparsers):
    parser = subparsers.add_parser("hello", help="say hello")
    parser.add_argument("--who", default="world")
    parser.set_defaults(run=lambda arguments: print(f"hello {arguments.who}") or 0)


def test_a_plugin_adds_a_sub_command_that_runs(capsys):
    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers()
    assert load_plugin_commands(subparsers, [FakeEntryPoint("hello", register_hello)]) == ["hello"]
    arguments = parser.parse_args(["hello", "--who", "rl"])
    assert arguments.run(arguments) == 0
    assert capsys.readouterr().out == "hello rl\n"


def test_a_plugin_that_fails_to_load_is_skipped_with_a_warning():
    warnings = []
    subparsers = argparse.ArgumentParser().add_subparsers()
    plugins = [FakeEntryPoint("broken", ImportError("no module named gym")),
               FakeEntryPoint("hello", register_hello)]
    assert load_plugin_commands(subparsers, plugins, warn=warnings.append) == ["hello"]
    assert warnings == ["rlprof: warning: plugin 'broken' skipped: ImportError: no module named gym"]


def test_a_plugin_that_takes_a_built_in_name_is_skipped(monkeypatch, capsys):
    def register_analyze(subparsers):
        subparsers.add_parser("analyze")

    monkeypatch.setattr(cli, "entry_points",
                        lambda *, group: [FakeEntryPoint("analyze", register_analyze)])
    assert main(["--help"]) == 0
    assert "rlprof: warning: plugin 'analyze' skipped" in capsys.readouterr().err


def test_built_in_commands_do_not_load_plugins(monkeypatch, plain_run):
    def no_plugins_please(**_):
        raise AssertionError("plugins were loaded for a built-in command")

    monkeypatch.setattr(cli, "entry_points", no_plugins_please)
    assert main(["analyze", plain_run]) == 0


def test_plugins_come_from_the_rlprof_commands_group(monkeypatch, capsys):
    groups = []

    def entry_points(*, group):
        groups.append(group)
        return [FakeEntryPoint("hello", register_hello)]

    monkeypatch.setattr(cli, "entry_points", entry_points)
    assert main(["hello"]) == 0
    assert (groups, capsys.readouterr().out) == (["rlprof.commands"], "hello world\n")


# --- a run whose loss diverged ------------------------------------------------------------------


@pytest.fixture
def diverged_run(tmp_path, fake_clock):
    """A recorded run whose loss went NaN, then infinite, as written by write_timing_tree."""
    profiler.recording.events.start_recording()
    try:
        for loss in (0.5, float("nan"), float("inf")):
            with hierarchical_timer("update"):
                fake_clock.advance(0.25)
                profiler.set_gauge("loss", loss)
        return str(write_timing_tree(tmp_path / "diverged_timers.json"))
    finally:
        profiler.recording.events.stop_recording()
        profiler.recording.events.clear_recording()


@pytest.mark.parametrize(
    "command",
    [["analyze"], ["analyze", "--format", "json"], ["analyze", "--format", "csv"], ["diff", "RUN", "--format", "json"]],
    ids=["analyze", "analyze json", "analyze csv", "diff json"],
)
def test_every_command_reads_a_run_whose_loss_diverged(diverged_run, command, capsys, strict_json):
    arguments = [command[0], diverged_run, *(diverged_run if part == "RUN" else part for part in command[1:])]
    assert main(arguments) == 0
    out = capsys.readouterr().out
    if "json" in command:
        strict_json(out)


@pytest.mark.parametrize("format_name", EXPORT_FORMATS)
def test_a_run_whose_loss_diverged_converts_to_strict_outputs(diverged_run, tmp_path, format_name, strict_json):
    output = tmp_path / f"out.{format_name}"
    assert main(["convert", diverged_run, "--to", format_name, "-o", str(output)]) == 0
    if format_name in ("chrome", "speedscope"):
        strict_json(output.read_text())
