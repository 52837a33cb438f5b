"""Specification of the frames section: count, mean/min/max frame time and rate per Frame."""

from __future__ import annotations

import pytest

from profiler import Domain, get_timer_tree, hierarchical_timer
from profiler.analysis.frames import frame_stats, frames_as_text


@pytest.fixture
def four_frames(fake_clock):
    frame = Domain("game").new_frame("frame")
    with hierarchical_timer("play"):
        for seconds in (0.010, 0.020, 0.010, 0.040):
            with frame:
                fake_clock.advance(seconds)
    return get_timer_tree()


def test_each_frame_block_gives_count_mean_extremes_and_rate(four_frames):
    (frames,) = frame_stats(four_frames)
    assert (frames.label, frames.domain, frames.count) == ("play/frame", "game", 4)
    assert frames.mean == pytest.approx(0.020)
    assert (frames.min_time, frames.max_time) == (pytest.approx(0.010), pytest.approx(0.040))
    assert frames.rate == pytest.approx(50.0)


def test_plain_blocks_are_not_frames(fake_clock):
    with hierarchical_timer("frame"):
        pass
    assert frame_stats(get_timer_tree()) == []


def test_the_text_lists_the_figures_of_each_frame_block(four_frames):
    header, columns, row = frames_as_text(frame_stats(four_frames)).splitlines()
    assert header == "Frames"
    assert row.split() == ["4", "20.00", "ms", "10.00", "ms", "40.00", "ms", "50.0", "play/frame", "(game)"]
