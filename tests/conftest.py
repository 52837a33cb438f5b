"""Fixtures shared by the whole suite: a fake clock and a clean default timer stack."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from profiler import timers


class FakeClock:
    """A clock that moves only when told to, so timings in tests are exact."""

    def __init__(self, start: float = 1000.0) -> None:
        self.time = start

    def __call__(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds


@pytest.fixture
def fake_clock() -> Iterator[FakeClock]:
    clock = FakeClock()
    previous = timers.set_clock(clock)
    timers.reset_timers()
    try:
        yield clock
    finally:
        timers.set_clock(previous)


@pytest.fixture(autouse=True)
def clean_timers() -> Iterator[None]:
    """Every test starts with an empty tree in the calling thread, and profiling enabled."""
    timers.enable()
    timers.reset_timers()
    yield
    timers.enable()
    timers.reset_timers()
