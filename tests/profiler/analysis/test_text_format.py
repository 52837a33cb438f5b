"""Specification of how durations, shares and long names are printed."""

from __future__ import annotations

import pytest

from profiler.analysis.text_format import (
    LONGEST_WORD,
    fit_left,
    format_percent,
    format_seconds,
    signed_seconds,
    wrap_text,
)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(12.345, "12.35 s"), (0.0042, "4.20 ms"), (0.000087, "87.0 us"), (0.0, "0 s"),
     (0.0009999999, "1.00 ms"), (0.9999999, "1.00 s")],
)
def test_a_duration_gets_a_unit_that_suits_it(seconds, text):
    assert format_seconds(seconds) == text


def test_a_change_of_duration_always_shows_its_sign():
    assert (signed_seconds(1.2), signed_seconds(-0.0003)) == ("+1.20 s", "-300.0 us")


def test_a_missing_share_prints_as_a_dash():
    assert (format_percent(None), format_percent(0.256), format_percent(0.1, signed=True)) == (
        "-", "25.6%", "+10.0%")


def test_a_long_name_is_cut_at_its_start_so_the_innermost_block_stays():
    assert fit_left("train/vector.step/env.step", 12) == ".../env.step"


def test_a_name_that_fits_is_left_alone():
    assert fit_left("train", 12) == "train"


def test_wrap_text_wraps_as_textwrap_does():
    assert wrap_text("the trainer is the limit", 12, initial_indent="- ") == ["- the", "trainer is", "the limit"]


def test_wrap_text_keeps_the_ends_of_a_megabyte_long_word():
    name = "head" + "x" * 1_000_000 + "tail"
    lines = wrap_text(f"led by {name} (90%)", 100)
    text = "".join(lines)
    assert text.startswith("led by headxxx") and text.endswith("xxtail (90%)")
    assert "..." in text and len(text) < LONGEST_WORD + 40
