"""Specification of the collapsed stacks: one `a;b;c 123` line per block with self time in whole
microseconds, adding up to the tree's totals."""

from __future__ import annotations

import re

import pytest

from profiler import get_timer_tree, hierarchical_timer
from profiler.export.collapsed import to_collapsed

LINE = re.compile(r"^[^;\n]+(;[^;\n]+)* \d+$")


def parse(text):
    """``{stack tuple: microseconds}``, checking each line's shape on the way."""
    assert text.endswith("\n")
    stacks = {}
    for line in text.splitlines():
        assert LINE.match(line), line
        stack, microseconds = line.rsplit(" ", 1)
        stacks[tuple(stack.split(";"))] = int(microseconds)
    return stacks


def time_under(stacks, prefix):
    return sum(value for stack, value in stacks.items() if stack[: len(prefix)] == prefix)


@pytest.mark.parametrize("run", ["trainer_tree", "run_with_workers", "mlagents_tree"])
def test_every_line_is_a_stack_and_a_whole_number(run, request):
    parse(to_collapsed(request.getfixturevalue(run)))


def test_a_line_holds_the_self_time_of_its_block_in_microseconds(trainer_tree):
    stacks = parse(to_collapsed(trainer_tree))
    assert stacks[("root", "train", "vector.step", "wait")] == 12_000
    assert stacks[("root", "train", "vector.step")] == 3_000


def test_the_lines_add_up_to_the_root_total(trainer_tree):
    assert sum(parse(to_collapsed(trainer_tree)).values()) == round(trainer_tree["total"] * 1e6)


def test_the_lines_under_a_block_add_up_to_its_total(trainer_tree):
    stacks = parse(to_collapsed(trainer_tree))
    train = trainer_tree["children"][0]
    assert time_under(stacks, ("root", "train")) == round(train["total"] * 1e6)


def test_lines_under_a_block_include_the_parallel_time_merged_below_it(run_with_workers):
    stacks = parse(to_collapsed(run_with_workers))
    worker_time = sum(worker["total"] for worker in run_with_workers["workers"])
    step = run_with_workers["children"][0]["children"][0]
    assert time_under(stacks, ("root", "train", "vector.step")) == pytest.approx(
        (step["total"] + worker_time) * 1e6, abs=1
    )


def test_the_mlagents_file_adds_up_to_its_totals_within_a_microsecond(mlagents_tree):
    # ML-Agents takes parallel children out of their parent's self time, so its totals add up
    # without the extra parallel time that rlprof's own trees show.
    stacks = parse(to_collapsed(mlagents_tree))
    learning = mlagents_tree["children"][0]
    assert time_under(stacks, ("root", learning["name"])) == pytest.approx(learning["total"] * 1e6, abs=1)
    assert sum(stacks.values()) == pytest.approx(mlagents_tree["total"] * 1e6, abs=1)


def test_rounding_never_drifts_over_many_tiny_blocks(fake_clock):
    with hierarchical_timer("loop"):
        for index in range(300):
            with hierarchical_timer(f"tiny {index}"):
                fake_clock.advance(0.4e-6)  # each rounds to 0 µs on its own

    tree = get_timer_tree()
    assert sum(parse(to_collapsed(tree)).values()) == round(tree["total"] * 1e6)


def test_blocks_with_no_self_time_get_no_line(trainer_tree):
    assert ("root", "train") not in parse(to_collapsed(trainer_tree))


def test_semicolons_and_line_breaks_in_names_cannot_break_the_format(fake_clock):
    with hierarchical_timer("load;parse\nall"):
        fake_clock.advance(0.001)

    stacks = parse(to_collapsed(get_timer_tree()))
    assert stacks[("root", "load_parse_all")] == 1000
