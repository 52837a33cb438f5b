"""Specification: a whole number read from the metadata (text, as a dump holds it) is read as
written; a value that is none, or is below what the figure can be, is read as unsaid and said."""

from __future__ import annotations

import pytest

from profiler.analysis.metadata_numbers import whole_number


@pytest.mark.parametrize(("value", "number"), [("4", 4), (" 12 ", 12), (4, 4), ("0", 0)])
def test_a_whole_number_is_read_as_written(value, number):
    problems: list[str] = []
    assert whole_number({"envs": value}, "envs", problems, at_least=0) == number
    assert problems == []


def test_a_value_the_metadata_does_not_hold_is_unsaid_and_no_problem():
    problems: list[str] = []
    assert whole_number({}, "envs", problems, at_least=1) is None
    assert problems == []


@pytest.mark.parametrize("value", ["four", "2.5", "", True, 2.0, "-3", "0"])
def test_a_value_that_is_no_whole_number_of_at_least_one_is_unsaid_and_said(value):
    problems: list[str] = []
    assert whole_number({"envs": value}, "envs", problems, at_least=1) is None
    assert problems == [f"metadata envs={value!r} is not a whole number >= 1; ignored"]
