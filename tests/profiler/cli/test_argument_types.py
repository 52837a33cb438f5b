"""Specification of the command line's argument types: a bad value is argparse's one-line error."""

from __future__ import annotations

import argparse

import pytest

from profiler.cli.argument_types import envs_per_worker, positive_seconds, seconds, top_count


def test_a_positive_number_of_seconds_is_taken_as_a_float():
    assert positive_seconds("0.2") == 0.2
    assert positive_seconds("3") == 3.0


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "soon", ""])
def test_an_interval_that_is_not_a_finite_number_above_zero_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="seconds"):
        positive_seconds(text)


def test_a_threshold_in_seconds_may_be_zero_but_not_negative():
    assert seconds("0") == 0.0
    with pytest.raises(argparse.ArgumentTypeError, match=">= 0"):
        seconds("-0.5")


def test_a_top_count_is_a_whole_number_from_zero():
    assert top_count("0") == 0
    with pytest.raises(argparse.ArgumentTypeError, match="whole number"):
        top_count("2.5")


def test_envs_per_worker_is_auto_or_a_whole_number_from_one():
    assert (envs_per_worker("auto"), envs_per_worker("3")) == ("auto", 3)
    with pytest.raises(argparse.ArgumentTypeError, match="auto"):
        envs_per_worker("0")
