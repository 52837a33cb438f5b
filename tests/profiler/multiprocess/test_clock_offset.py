"""Specification of the clock offset estimated from round trips."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from profiler.multiprocess.clock_offset import ClockOffset, monotonic_clock_id


def test_nothing_is_known_before_the_first_round_trip():
    clock = ClockOffset()
    assert clock.offset == 0.0
    assert math.isinf(clock.uncertainty)
    assert clock.section()["uncertainty_seconds"] is None


def test_the_offset_is_the_middle_of_the_round_trip_and_the_uncertainty_half_of_it():
    clock = ClockOffset()
    clock.update([(100.0, 40.0, 100.004)])  # its clock read 40 while ours went 100 -> 100.004
    assert clock.offset == pytest.approx(60.002)
    assert clock.uncertainty == pytest.approx(0.002)
    assert clock.to_ours(41.0) == pytest.approx(101.002)


def test_the_shortest_round_trip_sets_the_estimate():
    clock = ClockOffset()
    clock.update([(0.0, 5.0, 0.010), (1.0, 5.9995, 1.001), (2.0, 7.0, 2.030)])
    assert clock.offset == pytest.approx(-4.999)
    assert clock.uncertainty == pytest.approx(0.0005)


def test_the_true_offset_always_lies_within_the_uncertainty():
    true_offset = 12.5
    for sent_at, delay_out, delay_back in [(0.0, 0.001, 0.009), (3.0, 0.02, 0.0), (7.0, 0.0, 0.3)]:
        clock = ClockOffset()
        remote_at = sent_at + delay_out - true_offset
        clock.update([(sent_at, remote_at, sent_at + delay_out + delay_back)])
        assert abs(clock.offset - true_offset) <= clock.uncertainty + 1e-12


def test_each_update_estimates_afresh_so_drift_is_followed_and_reported():
    clock = ClockOffset()
    clock.update([(0.0, 10.0, 0.0)])
    clock.update([(60.0, 69.999, 60.0)])  # a millisecond of drift in a minute
    assert clock.offset == pytest.approx(-9.999)
    assert clock.drift == pytest.approx(0.001)
    assert clock.section()["estimates"] == 2


def test_a_shared_clock_has_no_offset_and_no_doubt_whatever_the_round_trips():
    clock = ClockOffset()
    clock.share_clock()
    clock.update([(0.0, 5.0, 0.5)])
    assert (clock.offset, clock.uncertainty, clock.shared) == (0.0, 0.0, True)


def test_a_round_trip_that_ends_before_it_starts_is_refused():
    with pytest.raises(ValueError, match="cannot end before it starts"):
        ClockOffset().update([(2.0, 1.0, 1.0)])


def test_an_update_needs_a_round_trip():
    with pytest.raises(ValueError, match="at least one round trip"):
        ClockOffset().update([])


def test_every_process_of_this_machine_names_the_same_monotonic_clock():
    child = subprocess.run(
        [sys.executable, "-c", "from profiler.multiprocess.clock_offset import monotonic_clock_id; print(monotonic_clock_id())"],
        capture_output=True, text=True, check=True, timeout=60,
    )
    assert child.stdout.strip() == monotonic_clock_id()
