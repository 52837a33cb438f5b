"""The README's quick start is what CI runs: the two must never drift apart."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_the_quick_start_has_exactly_two_commands():
    commands = quick_start_commands()
    assert len(commands) == 2
    assert commands[0].endswith("rlprof demo")
    assert commands[1].endswith("-m pytest")


def test_ci_runs_the_readmes_test_command_word_for_word():
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert quick_start_commands()[1] in ci_lines


def test_the_test_command_installs_the_extras_whose_tests_would_otherwise_skip():
    assert "pip install -e '.[test,tensorboard,ray,nvtx,sb3]'" in quick_start_commands()[1]


def test_the_test_command_pins_torch_to_the_release_with_a_small_cpu_wheel():
    # torch 2.13.0's CPU wheel installs without the CUDA libraries; SB3 and the torch phases'
    # tests run on it.
    assert " torch==2.13.0 " in quick_start_commands()[1]


def performance_section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("## Performance", 1)[1].split("\n## ", 1)[0]


def test_the_performance_figures_name_the_benchmark_that_prints_them_and_it_exists():
    command = re.search(r"`python (benchmarks/\S+\.py)`", performance_section())
    assert command is not None, "the section must say the command that printed its figures"
    assert (ROOT / command.group(1)).is_file()


def test_the_performance_figures_stand_next_to_every_goal_the_benchmarks_table_prints():
    benchmark = (ROOT / "benchmarks" / "vector_throughput.py").read_text()
    table = benchmark.split("def print_table", 1)[1]
    goals = set(re.findall(r"goal [<>]= [\d.]+%?", table))
    assert goals, "the benchmark prints its goals"
    section = performance_section()
    assert {goal for goal in goals if goal not in section} == set()
