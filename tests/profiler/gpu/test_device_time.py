"""hierarchical_timer(name, device="cuda"): device time from event pairs, read without waiting.

Most tests run no GPU: the event backend is a fake whose events the test marks done and gives
device times to, as a GPU would. The tests at the end run on a real CUDA GPU, and skip without one.
"""

from __future__ import annotations

import sys
from typing import Iterator

import pytest

from fake_device import FakeDevice, fake_gpu

from profiler import hierarchical_timer
from profiler.gpu import DeviceTimingUnavailableError, device_time, set_device_events
from profiler.tree.timer_tree import get_timer_tree


@pytest.fixture
def gpu() -> Iterator[FakeDevice]:
    with fake_gpu() as fake:
        yield fake


def device_entries() -> dict[tuple[str, ...], dict]:
    return {tuple(entry["path"]): entry for entry in get_timer_tree().get("device_time", [])}


def test_a_device_block_reports_the_time_between_its_events(gpu):
    with hierarchical_timer("update", device="cuda"):
        gpu.run_for(0.25)
    entry = device_entries()[("update",)]
    assert entry["total"] == pytest.approx(0.25)
    assert (entry["count"], entry["device"], entry["mode"]) == (1, "cuda", "events")


def test_closing_a_block_never_waits_for_the_device(gpu):
    with hierarchical_timer("update", device="cuda"):
        gpu.run_for(0.1)
    assert gpu.waited == 0
    assert len(device_time._timer.pending) == 1


def test_finished_pairs_are_read_as_later_device_blocks_close(gpu):
    with hierarchical_timer("update", device="cuda"):
        gpu.run_for(0.1)
    gpu.finish_all()
    with hierarchical_timer("update", device="cuda"):
        gpu.run_for(0.3)
    # The first pair was read without waiting; the second is still on the device.
    assert len(device_time._timer.pending) == 1
    assert device_time._timer.times[next(iter(device_time._timer.times))].total == pytest.approx(0.1)
    assert gpu.waited == 0


def test_a_dump_waits_for_the_pairs_still_on_the_device(gpu):
    for seconds in (0.1, 0.3):
        with hierarchical_timer("update", device="cuda"):
            gpu.run_for(seconds)
    entry = device_entries()[("update",)]
    assert (entry["count"], entry["total"], entry["min"], entry["max"]) == (
        2,
        pytest.approx(0.4),
        pytest.approx(0.1),
        pytest.approx(0.3),
    )


def test_nested_device_blocks_each_get_their_own_time_under_their_path(gpu):
    with hierarchical_timer("step"):
        with hierarchical_timer("update", device="cuda:1"):
            gpu.run_for(0.2)
            with hierarchical_timer("backward", device="cuda:1"):
                gpu.run_for(0.5)
    entries = device_entries()
    assert entries[("step", "update")]["total"] == pytest.approx(0.7)
    assert entries[("step", "update", "backward")]["total"] == pytest.approx(0.5)
    assert ("step",) not in entries
    assert {event.device for event in gpu.recorded} == {"cuda:1"}


def test_the_host_time_is_kept_beside_the_device_time(gpu, fake_clock):
    with hierarchical_timer("update", device="cuda") as node:
        fake_clock.advance(0.01)  # launching the kernels
        gpu.run_for(0.5)  # running them
    assert node.total == pytest.approx(0.01)
    assert device_entries()[("update",)]["total"] == pytest.approx(0.5)


def test_cuda_sync_synchronises_at_both_ends_and_reports_the_host_time_as_device_time(gpu, fake_clock):
    with hierarchical_timer("update", device="cuda", cuda_sync=True) as node:
        fake_clock.advance(0.4)
    assert gpu.synchronized == ["cuda", "cuda"]
    entry = device_entries()[("update",)]
    assert (entry["mode"], entry["total"], node.total) == ("sync", pytest.approx(0.4), pytest.approx(0.4))
    assert gpu.recorded == []


def test_a_block_that_raises_still_records_its_device_time(gpu):
    with pytest.raises(ValueError):
        with hierarchical_timer("update", device="cuda") as node:
            gpu.run_for(0.2)
            raise ValueError("nan loss")
    assert node.errors == 1
    assert device_entries()[("update",)]["count"] == 1


def test_a_bad_device_is_refused_naming_it(gpu):
    with pytest.raises(ValueError, match="device must name a device"):
        hierarchical_timer("update", device="")


def test_without_torch_a_device_block_says_what_it_needs_and_plain_blocks_still_work(monkeypatch):
    set_device_events(None)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(DeviceTimingUnavailableError, match="needs PyTorch with CUDA"):
        with hierarchical_timer("update", device="cuda"):
            pass
    with hierarchical_timer("update") as node:
        pass
    assert node.count == 1
    assert "device_time" not in get_timer_tree()


def test_no_device_time_section_without_device_blocks():
    with hierarchical_timer("update"):
        pass
    assert "device_time" not in get_timer_tree()


@pytest.fixture
def cuda() -> Iterator[object]:
    """PyTorch on a real CUDA GPU, its events timing device blocks (skips without one)."""
    torch = pytest.importorskip("torch", reason="needs PyTorch with CUDA")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: torch.cuda.is_available() is False")
    set_device_events(None)
    try:
        yield torch
    finally:
        device_time.clear_device_times()


def gpu_bound_work(matrix: object, products: int = 20) -> object:
    """About 2.7 TFLOP of matrix products for a 4096 x 4096 matrix: tens of milliseconds of a GPU
    (55 ms on an H100), which the host launches in about one (docs/gpu.md)."""
    for _ in range(products):
        matrix = matrix @ matrix
        matrix = matrix / matrix.norm()
    return matrix


def warmed_up_matrix(torch: object) -> object:
    """A matrix on the GPU, with CUDA and cuBLAS set up first: their start-up blocks the host,
    and must not fall inside a timed block."""
    matrix = torch.randn(4096, 4096, device="cuda")
    gpu_bound_work(matrix, products=2)
    torch.cuda.synchronize()
    return matrix


def test_on_a_real_gpu_device_time_covers_the_kernels_the_host_only_launched(cuda):
    matrix = warmed_up_matrix(cuda)
    with hierarchical_timer("matmul", device="cuda") as node:
        gpu_bound_work(matrix)
    entry = device_entries()[("matmul",)]
    assert (entry["count"], entry["mode"], node.count) == (1, "events", 1)
    assert entry["total"] > node.total  # the host time is the launches; the device ran the products


def test_on_a_real_gpu_event_pairs_and_synchronised_blocks_give_the_same_device_time(cuda):
    matrix = warmed_up_matrix(cuda)
    with hierarchical_timer("events", device="cuda"):
        gpu_bound_work(matrix)
    with hierarchical_timer("synchronised", device="cuda", cuda_sync=True):
        gpu_bound_work(matrix)
    entries = device_entries()
    assert (entries[("events",)]["mode"], entries[("synchronised",)]["mode"]) == ("events", "sync")
    assert entries[("events",)]["total"] == pytest.approx(entries[("synchronised",)]["total"], rel=0.2)
