"""Hostile and mutated timer files through every ``rlprof`` command and ``load_timing_tree``: each
ends with exit 0 (1 for a regression ``diff`` was asked to fail on), or one line on stderr and
exit 2; never a traceback.

The property tests mutate a document holding every section the loader reads (nodes with per-call
extremes, errors, domains; gauges; workers with their sections; a timeline; memory) and ML-Agents'
file: a value anywhere replaced by a hostile one (an integer of 5,000 digits, a time just under
the loader's bound, a list where a name goes...), a key dropped, the text cut short. The cases
they found are kept below as plain tests.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiler.cli.commands import main
from profiler.export import EXPORT_FORMATS
from profiler.tree.timer_json import TimerFileError, load_timing_tree

MLAGENTS_FILE = Path(__file__).parents[2] / "data" / "mlagents_timers.json"

SPAN_DETAILS = {"seq": 3, "sizes": "[4, 84]"}

EVERY_SECTION: dict[str, Any] = {
    "name": "root", "total": 2.0, "count": 1,
    "children": [
        {"name": "train", "total": 1.5, "count": 2, "min": 0.5, "max": 1.0, "errors": 1, "children": [
            {"name": "policy.act", "total": 0.5, "count": 2, "children": []},
            {"name": "vector.step", "total": 0.9, "count": 2, "children": [
                {"name": "env.step", "total": 1.6, "count": 4, "is_parallel": True, "children": []},
            ]},
        ]},
        {"name": "task", "total": 0.2, "count": 1, "domain": "io", "scopes": ["a"], "children": []},
    ],
    "gauges": {"loss": {"value": "NaN", "min": 0.1, "max": 2.0, "count": 3}},
    "metadata": {"cores": "4", "timer_format_version": "3"},
    "workers": [
        {"name": f"worker {index}", "total": 0.8, "count": 1, "worker_id": index, "pid": 4000 + index,
         "manager": "SubprocessEnvManager", "manager_id": 1, "payloads": 2,
         "gauges": {}, "peak_mean": {"env.step": 0.4},
         "critical_path": {"vector_steps": 2, "last_to_reply": index, "wait_as_last_seconds": 0.1,
                           "wait_as_last_histogram": {"bounds_seconds": [0.001, 0.01], "counts": [0, 1, 0]}},
         "env_time": {"wall_seconds": 0.8, "cpu_seconds": 0.7, "calls": 2},
         "children": [{"name": "env.step", "total": 0.8, "count": 2, "min": 0.3, "max": 0.5,
                       "children": []}]}
        for index in range(2)
    ],
    "timeline": {"clock": "perf_counter", "dropped": 0, "processes": [
        {"pid": 10, "name": "trainer", "host": "vm", "clock_offset": 0.0, "clock_uncertainty": 0.001,
         "threads": [{"tid": 1, "name": "MainThread",
                      "spans": [["train", 100.0, 101.0], ["policy.act", 100.0, 100.5, SPAN_DETAILS]],
                      "instants": [["checkpoint", 100.2]]}],
         "counters": [["loss", 100.1, 0.5], ["loss", 100.9, "Infinity"]]},
        {"pid": 10, "name": "worker 0", "clock_offset": 0.01,
         "threads": [{"tid": 1, "name": "MainThread", "spans": [["env.step", 100.1, 100.4]], "instants": []}]},
    ]},
    "memory": {"unit": "bytes", "clock": "perf_counter", "processes": [
        {"pid": 10, "name": "trainer", "clock_offset": 0.0, "stride": 1,
         "samples": [[100.0, 1000000, None], [100.5, 3000000, 200000]],
         "blocks": [{"path": ["train", "policy.act"], "calls": 2, "net_bytes": -10, "peak_bytes": 5000}]},
    ]},
}

BIG_INTEGER = "9" * 5000
"""Python's parser refuses integers of more than 4,300 digits (int_max_str_digits)."""

HOSTILE_VALUES = [
    "<big integer>", "<negative big integer>",
    1.9e299, 9.99e299, 1e300, -1e299, 5e-324, -0.0, 2**63, 2**64, -1, 0, True, None,
    "", "x" * 300, "\ud800", "NaN", "Infinity", [], [1], [[1, 2, 3]], {}, {"a": 1}, {"name": "x"},
]


def text_of(document: Any) -> str:
    text = json.dumps(document)
    return (text.replace('"<big integer>"', BIG_INTEGER)
                .replace('"<negative big integer>"', "-" + BIG_INTEGER))


@st.composite
def mutated_files(draw: st.DrawFn) -> str:
    """The text of a base document with one value replaced, one key dropped, or the text cut."""
    base = draw(st.sampled_from(["every section", "mlagents"]))
    document = copy.deepcopy(EVERY_SECTION) if base == "every section" else json.loads(MLAGENTS_FILE.read_text())
    for _ in range(draw(st.integers(1, 3))):
        container, key = draw(_place_in(document))
        action = draw(st.sampled_from(["replace", "replace", "replace", "drop"]))
        if action == "drop" and isinstance(container, dict):
            del container[key]
        else:
            container[key] = copy.deepcopy(draw(st.sampled_from(HOSTILE_VALUES)))
    text = text_of(document)
    if draw(st.integers(0, 9)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


@st.composite
def _place_in(draw: st.DrawFn, document: Any) -> tuple[Any, Any]:
    """A (container, key) of ``document``, reached by walking down from the top at random."""
    container: Any = document
    while True:
        keys = list(container) if isinstance(container, dict) else list(range(len(container)))
        key = draw(st.sampled_from(keys))
        value = container[key]
        deeper = isinstance(value, (dict, list)) and value and draw(st.integers(0, 3)) > 0
        if not deeper:
            return container, key
        container = value


def run_command(arguments: list[str]) -> tuple[int, str]:
    """``rlprof ARGUMENTS`` in this process: its exit code and stderr. An exception fails the test."""
    errors = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
        code = main(arguments)
    return code, errors.getvalue()


def assert_exit_0_or_one_line_with_exit_2(code: int, stderr: str, *, may_exit_1: bool = False) -> None:
    allowed = {0, 2, 1} if may_exit_1 else {0, 2}
    assert code in allowed, stderr
    if code == 2:
        assert stderr.startswith("rlprof: error: ") and stderr.count("\n") == 1, stderr


HYPOTHESIS_SETTINGS = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", 60)), deadline=None, derandomize=not os.environ.get("FUZZ_EXAMPLES"), suppress_health_check=[HealthCheck.too_slow]
)


@HYPOTHESIS_SETTINGS
@given(text=mutated_files())
def test_load_timing_tree_refuses_a_hostile_file_with_a_timer_file_error_only(text):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run_timers.json"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        with contextlib.suppress(TimerFileError):  # any other exception fails the test
            load_timing_tree(path)


@HYPOTHESIS_SETTINGS
@given(text=mutated_files())
def test_every_command_ends_a_hostile_file_with_exit_0_or_one_line_and_exit_2(text):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run_timers.json"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        base = Path(folder) / "base_timers.json"
        base.write_text(json.dumps(EVERY_SECTION))
        run = str(path)
        for arguments in (
            ["analyze", run],
            ["analyze", run, "--format", "json"],
            ["analyze", run, "--aggregate-by", "worker", "--top", "0"],
            *(["convert", run, "--to", name, "-o", str(Path(folder) / f"out.{name}")] for name in EXPORT_FORMATS),
            ["report", run],
        ):
            assert_exit_0_or_one_line_with_exit_2(*run_command(arguments))
        code, stderr = run_command(["diff", str(base), run, "--fail-on-regression"])
        assert_exit_0_or_one_line_with_exit_2(code, stderr, may_exit_1=True)
        if code == 1:
            assert "regressed beyond" in stderr and "Traceback" not in stderr


# --- the cases the fuzzing found ----------------------------------------------------------------

ALL_COMMANDS = [
    ["analyze"], ["diff", "{base}"], ["diff", "{base}", "--fail-on-regression"],
    *(["convert", "--to", name, "-o", "{out}"] for name in EXPORT_FORMATS), ["report"],
]


def command_line(words, run, folder):
    """``words`` with the run inserted after the command (after the base, for diff)."""
    filled = [word.format(base=folder / "base_timers.json", out=folder / "out") for word in words]
    at = 2 if words[0] == "diff" else 1
    return [*filled[:at], str(run), *filled[at:]]


@pytest.mark.parametrize("words", ALL_COMMANDS, ids=lambda words: " ".join(words[:3]))
def test_an_integer_of_5000_digits_is_one_line_and_exit_2_in_every_command(tmp_path, words):
    (tmp_path / "base_timers.json").write_text(json.dumps(EVERY_SECTION))
    document = copy.deepcopy(EVERY_SECTION)
    document["workers"][0]["unknown_field"] = "<big integer>"  # not even a field rlprof reads
    run = tmp_path / "run_timers.json"
    run.write_text(text_of(document))
    code, stderr = run_command(command_line(words, run, tmp_path))
    assert code == 2
    assert stderr.count("\n") == 1 and "an integer of more than 4300 digits" in stderr


@pytest.mark.parametrize("seconds", [1.8e299, 9.99e299])
def test_times_too_far_apart_for_a_trace_are_one_line_and_exit_2(tmp_path, seconds):
    document = copy.deepcopy(EVERY_SECTION)
    del document["timeline"], document["memory"]
    document["children"][0]["total"] = seconds  # a total the loader accepts (under 1e300)
    run = tmp_path / "run_timers.json"
    run.write_text(json.dumps(document))
    code, stderr = run_command(["convert", str(run), "--to", "chrome", "-o", str(tmp_path / "t.json")])
    assert code == 2 and "too far for a trace" in stderr and stderr.count("\n") == 1
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("manager_id", [[1], {"a": 1}, "one"])
@pytest.mark.parametrize("command", ["analyze", "report"])
def test_a_worker_manager_id_that_is_not_a_number_is_one_line_and_exit_2(tmp_path, manager_id, command):
    document = copy.deepcopy(EVERY_SECTION)
    for worker in document["workers"]:
        worker["manager_id"] = manager_id
    run = tmp_path / "run_timers.json"
    run.write_text(json.dumps(document))
    code, stderr = run_command([command, str(run)])
    assert code == 2 and "workers[0].manager_id" in stderr and stderr.count("\n") == 1


def test_the_every_section_document_itself_passes_every_command(tmp_path):
    """The fuzzing's base is a valid run: mutations start from something every command reads."""
    (tmp_path / "base_timers.json").write_text(json.dumps(EVERY_SECTION))
    run = tmp_path / "run_timers.json"
    run.write_text(json.dumps(EVERY_SECTION))
    for words in ALL_COMMANDS:
        assert run_command(command_line(words, run, tmp_path)) == (0, "")
