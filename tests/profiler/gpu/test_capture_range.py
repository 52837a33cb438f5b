"""capture_range and capture_steps: cudaProfilerStart/Stop around the steps worth capturing
under ``nsys profile --capture-range=cudaProfilerApi``. A backend that writes down its calls
stands in for CUDA, which does not run here."""

from __future__ import annotations

import pytest
import torch
from not_installed import run_without

from profiler.gpu.capture_range import CaptureUnavailableError, capture_range, capture_steps


class RecordedCapture:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")


def test_a_with_block_is_captured_from_its_start_to_its_end():
    backend = RecordedCapture()
    with capture_range(backend=backend):
        assert backend.calls == ["start"]
    assert backend.calls == ["start", "stop"]


def test_a_block_that_raises_still_stops_the_capture():
    backend = RecordedCapture()
    with pytest.raises(KeyError):
        with capture_range(backend=backend):
            raise KeyError("boom")
    assert backend.calls == ["start", "stop"]


def test_a_disabled_capture_range_does_nothing_and_needs_no_cuda():
    with capture_range(enabled=False):
        pass


def test_capture_steps_starts_as_the_first_step_begins_and_stops_as_the_step_after_the_last_begins():
    backend = RecordedCapture()
    capture = capture_steps(2, 4, backend=backend)
    seen = []
    for step in range(8):
        capture.step()
        seen.append((step, list(backend.calls)))
    assert seen[1] == (1, [])
    assert seen[2] == (2, ["start"])
    assert seen[4] == (4, ["start"])
    assert seen[5] == (5, ["start", "stop"])
    assert backend.calls == ["start", "stop"]


def test_a_loop_that_ends_inside_the_range_stops_the_capture_at_close():
    backend = RecordedCapture()
    with capture_steps(1, 100, backend=backend) as capture:
        for _ in range(3):
            capture.step()
    assert backend.calls == ["start", "stop"]


def test_a_loop_that_ends_before_the_range_never_starts_it():
    backend = RecordedCapture()
    with capture_steps(10, 20, backend=backend) as capture:
        capture.step()
    assert backend.calls == []


@pytest.mark.parametrize("first, last, message", [
    (5, 4, r"last \(4\) is before first \(5\)"),
    (-1, 4, "first must be a step number >= 0"),
    (True, 4, "first must be a step number >= 0"),
    (0, 2.5, "last must be a step number >= 0"),
])
def test_steps_that_are_not_a_range_are_refused(first, last, message):
    with pytest.raises(ValueError, match=message):
        capture_steps(first, last, backend=RecordedCapture())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only build of torch")
def test_a_cpu_only_torch_is_refused_when_the_capture_is_made():
    with pytest.raises(CaptureUnavailableError, match=r"needs CUDA \(cudaProfilerStart\): this torch .* CPU-only build"):
        capture_steps(100, 110)
    with pytest.raises(CaptureUnavailableError, match="CPU-only build"):
        capture_range()


def test_without_torch_the_error_says_so():
    result = run_without(("torch",), """
        from profiler.gpu.capture_range import CaptureUnavailableError, capture_range
        try:
            capture_range()
        except CaptureUnavailableError as error:
            print(error)
    """)
    assert "PyTorch is not installed" in result.stdout, result.stderr
