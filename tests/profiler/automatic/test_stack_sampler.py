"""Specification: the stack sampler names where the trainer's time outside any block went, and
never counts time inside a block.

The in-process tests sample this very thread; they wait for a number of samples, never for a
duration. The last tests read a real ``rlprof run`` of a CleanRL-style PPO with a slow function
planted between updates.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

import pytest

from profiler import hierarchical_timer
from profiler.automatic import stack_sampler
from profiler.automatic.stack_sampler import StackSampler, forget_samples, next_wait
from profiler.timing import timers

SAMPLES = 20


@pytest.fixture(autouse=True)
def no_samples_left_behind():
    """A sampler's counts stay with its thread's stack until forgotten (``rlprof run`` forgets
    them once its files are written): later dumps in this process must not carry them."""
    yield
    forget_samples()
    timers.reset_timers()


@pytest.fixture(params=["C wait", "Python wait"])
def sampler_wait(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where the sampler waits and looks inside blocks: in C without the GIL (skipped where it was
    not built) or in Python, the reference, which must count the same."""
    if request.param == "Python wait":
        monkeypatch.setattr(stack_sampler, "_block_watch", None)
    elif stack_sampler._block_watch is None:  # noqa: SLF001
        pytest.skip("the stack sampler's C wait was not built here")
    return request.param


def wait_for_samples(sampler: StackSampler, count: int) -> None:
    while sampler.samples < count:
        time.sleep(0.0005)


def planted_slow_function(sampler: StackSampler) -> None:
    wait_for_samples(sampler, sampler.samples + SAMPLES)


def sampled_while(run: Callable[[StackSampler], None]) -> StackSampler:
    """A sampler, looking every millisecond, that watched this thread while ``run`` ran (given it)."""
    timers.reset_timers()
    sampler = StackSampler(interval=0.001).start()
    try:
        run(sampler)
    finally:
        sampler.stop()
    return sampler


def sampled_functions(sampler: StackSampler) -> dict[str, int]:
    return {place["function"]: place["samples"] for place in sampler.section()["places"]}


def test_a_slow_function_outside_any_block_is_named_with_its_file_and_line(sampler_wait):
    sampler = sampled_while(planted_slow_function)
    places = [place for place in sampler.section()["places"] if place["function"] == "wait_for_samples"]
    assert places and places[0]["file"] == __file__
    assert sum(place["samples"] for place in places) >= SAMPLES - 2  # the first and last may straddle


def test_the_looks_start_at_the_first_interval_and_thin_out_to_the_longest_as_the_run_goes_on():
    assert [next_wait(seconds, 0.02, 0.1) for seconds in (0.0, 1.0, 2.0, 5.0, 10.0, 3600.0)] \
        == [0.02, 0.02, 0.02, pytest.approx(0.05), 0.1, 0.1]


def test_a_sampler_asked_for_a_longest_interval_below_its_first_looks_at_one_rate():
    assert StackSampler(interval=0.1, longest_interval=0.02).longest_interval == 0.1


def test_each_place_keeps_its_samples_seconds_squared_for_the_sampling_error(sampler_wait):
    sampler = sampled_while(planted_slow_function)
    section = sampler.section()
    assert (section["interval_seconds"], section["longest_interval_seconds"]) == (0.001, 0.1)
    for place in section["places"]:
        # Each sample's seconds are positive, so their squares sum to between (sum)^2 / n and (sum)^2.
        assert place["seconds"] ** 2 / place["samples"] <= place["seconds_squared"] * (1 + 1e-9)
        assert place["seconds_squared"] <= place["seconds"] ** 2 * (1 + 1e-9)


def test_each_place_keeps_when_it_was_first_and_last_seen_on_the_timelines_clock(sampler_wait):
    started = time.perf_counter()
    sampler = sampled_while(planted_slow_function)
    ended = time.perf_counter()
    (slow,) = [place for place in sampler.section()["places"] if place["function"] == "wait_for_samples"]
    assert started <= slow["first_look"] < slow["last_look"] <= ended


def test_stop_ends_a_long_wait_at_once(sampler_wait):
    sampler = StackSampler(interval=600.0).start()
    stopping = threading.Thread(target=sampler.stop)
    stopping.start()
    stopping.join(timeout=60)  # a wait that stop() could not end would last ten minutes
    assert not stopping.is_alive()
    assert sampler.samples == 0


class LookEndingAfterStop(StackSampler):
    """A sampler whose only look outside any block is handed over once ``stop()`` has begun, as
    when the program ends while the sampling thread has a look in hand (no timing forces that)."""

    def _looks_outside_any_block(self):
        self._stop.set()
        yield 0.02


def test_a_look_that_ends_after_stop_began_names_no_place():
    sampler = LookEndingAfterStop(interval=0.001).start()
    sampler.stop()
    assert sampler.places == {}
    assert sampler.samples == 0


def test_looks_inside_a_block_need_not_take_the_gil_from_the_watched_thread():
    # The watched thread runs Python in a block and never lets the GIL go (the switch interval
    # set beyond the test's length): the C wait still counts its looks; a Python one could not.
    if stack_sampler._block_watch is None:  # noqa: SLF001
        pytest.skip("the stack sampler's C wait was not built here")
    timers.reset_timers()
    sampler = StackSampler(interval=0.001).start()
    switch_interval = sys.getswitchinterval()
    try:
        with hierarchical_timer("update"):
            # The sampling thread needs the GIL once, to reach its C wait: on a loaded machine it
            # may not have run yet. Its first look counted in the block says it is there.
            deadline = time.perf_counter() + 60.0
            while sampler.in_blocks < 1 and time.perf_counter() < deadline:
                time.sleep(0.001)
            reached_the_wait = sampler.in_blocks
            sys.setswitchinterval(120.0)
            while sampler.in_blocks < reached_the_wait + SAMPLES and time.perf_counter() < deadline:
                pass
    finally:
        sys.setswitchinterval(switch_interval)
        sampler.stop()
    assert reached_the_wait >= 1
    assert sampler.in_blocks >= reached_the_wait + SAMPLES


LONG_MODULE = """
import time
sampler = globals()["sampler"]
padding = [{padding}]
while sampler.samples < {first}:
    time.sleep(0.0005)
while sampler.samples < {second}:
    time.sleep(0.0005)
"""


def test_two_lines_of_one_long_module_are_two_places_each_named_by_its_line(tmp_path, sampler_wait):
    # A CleanRL script runs its training loop at the top level of one long module: the sampler
    # remembers lines per instruction, and two loops of the same code object stay two places.
    script = tmp_path / "long_script.py"
    script.write_text(LONG_MODULE.format(padding=", ".join(map(str, range(3000))), first=SAMPLES,
                                         second=2 * SAMPLES))
    timers.reset_timers()
    sampler = StackSampler(interval=0.001).start()
    try:
        exec(compile(script.read_text(), str(script), "exec"), {"sampler": sampler})
    finally:
        sampler.stop()
    lines = {place["line"]: place["samples"] for place in sampler.section()["places"]
             if place["file"] == str(script) and place["function"] == "<module>"}
    # The sampler runs from before the module's first line, so a loaded machine may also catch its
    # prologue (lines 2 to 4), and the loops' tests (lines 5 and 7) when a sleep's thread waits
    # for a core: every line named must still be one the module ran, and most of each loop's
    # samples fall on its sleep.
    assert set(lines) >= {6, 8} and set(lines) <= {2, 3, 4, 5, 6, 7, 8}
    assert lines[6] > SAMPLES / 2 and lines[8] > SAMPLES / 2


def test_time_inside_a_block_is_counted_apart_and_named_nowhere(sampler_wait):
    timers.reset_timers()
    sampler = StackSampler(interval=0.001).start()
    try:
        with hierarchical_timer("update"):
            planted_slow_function(sampler)
    finally:
        sampler.stop()
    section = sampler.section()
    assert section["in_blocks"] >= SAMPLES - 2
    assert sampled_functions(sampler).get("wait_for_samples", 0) <= 2


def test_the_places_are_in_the_runs_dump_and_the_analysis(cleanrl_run):
    places = cleanrl_run["untimed"]["places"]
    write_logs = next(place for place in places if place["function"] == "write_logs")
    assert write_logs["file"].endswith("cleanrl_torch_ppo.py")
    assert write_logs["seconds"] > 0 and write_logs["error_seconds"] > 0
    assert cleanrl_run["tree"]["untimed_samples"]["samples"] > 0


def test_the_analysis_reports_the_unexplained_share_beside_the_untimed_share(cleanrl_run):
    untimed = cleanrl_run["untimed"]
    assert 0.0 <= untimed["unexplained_share"] <= untimed["share"]


def test_the_untimed_verdict_names_where_the_time_went(cleanrl_run):
    verdict = next(verdict for verdict in cleanrl_run["verdicts"] if verdict["kind"] == "untimed")
    assert "the stack samples place it" in verdict["title"]
    assert "nothing here says what it was" not in verdict["title"]


class LookOutsideThenBlockOpened(StackSampler):
    """A sampler whose one look found no block open, handed over once the watched thread has
    opened a block: as when the thread opens one while the look waits for the GIL to read its
    frame (no timing forces that)."""

    def __init__(self, block_open: threading.Event, **options) -> None:
        super().__init__(**options)
        self.block_open = block_open

    def _looks_outside_any_block(self):
        self.block_open.wait(60)
        yield 0.02


def test_a_look_whose_thread_opened_a_block_before_its_frame_was_read_is_a_look_inside_it():
    block_open = threading.Event()
    sampler = LookOutsideThenBlockOpened(block_open, interval=0.001)
    with hierarchical_timer("vector.step"):
        sampler.start()
        block_open.set()
        sampler._sampler.join(timeout=60)  # noqa: SLF001 - its one look is taken
    sampler.stop()
    assert sampler.places == {}
    assert sampler.in_blocks == 1 and sampler.samples == 1
