"""Specification of GPU memory per block (profiler.gpu.block_device_memory): each block's net
allocation and its peak above what was allocated as it opened, an outer block's peak covering
its inner blocks'. A fake allocator stands in for torch.cuda (CI has no GPU)."""

from __future__ import annotations

from typing import Iterator

import pytest
from fake_device import fake_gpu

import profiler
from profiler import hierarchical_timer
from profiler.control import controls as control
from profiler.gpu import block_device_memory

MIB = 1024 * 1024


class FakeAllocator:
    """torch.cuda's allocated and peak counters, moved by the test."""

    def __init__(self) -> None:
        self.current = 100 * MIB
        self.highest = self.current

    def allocate(self, size: int) -> None:
        self.current += size
        self.highest = max(self.highest, self.current)

    def free(self, size: int) -> None:
        self.current -= size

    def allocated(self) -> int:
        return self.current

    def peak(self) -> int:
        return self.highest

    def reset_peak(self) -> None:
        self.highest = self.current


@pytest.fixture
def allocator() -> Iterator[FakeAllocator]:
    fake = FakeAllocator()
    block_device_memory.set_block_memory_backend(fake)
    block_device_memory.track_block_memory("cuda")
    yield fake
    block_device_memory.stop_tracking_block_memory()
    block_device_memory.set_block_memory_backend(None)


def section() -> dict[tuple[str, ...], dict]:
    return {tuple(entry["path"]): entry for entry in profiler.get_timer_tree()["device_memory"]}


def test_a_block_s_net_allocation_is_what_it_left_allocated(allocator):
    with hierarchical_timer("update"):
        allocator.allocate(64 * MIB)
    assert section()[("update",)]["net_bytes"] == 64 * MIB


def test_a_block_s_peak_is_the_most_it_held_above_its_start(allocator):
    with hierarchical_timer("update"):
        allocator.allocate(256 * MIB)
        allocator.free(256 * MIB)
    assert (section()[("update",)]["net_bytes"], section()[("update",)]["peak_bytes"]) == (0, 256 * MIB)


def test_an_outer_block_s_peak_covers_its_inner_blocks(allocator):
    with hierarchical_timer("step"):
        with hierarchical_timer("forward"):
            allocator.allocate(300 * MIB)
            allocator.free(300 * MIB)
        with hierarchical_timer("backward"):
            allocator.allocate(10 * MIB)
    figures = section()
    assert figures[("step",)]["peak_bytes"] == 300 * MIB
    assert figures[("step", "backward")]["peak_bytes"] == 10 * MIB


def test_calls_add_up_net_and_keep_the_largest_peak(allocator):
    for size in (10 * MIB, 30 * MIB):
        with hierarchical_timer("update"):
            allocator.allocate(size)
    entry = section()[("update",)]
    assert (entry["calls"], entry["net_bytes"], entry["peak_bytes"]) == (2, 40 * MIB, 30 * MIB)


def test_without_a_gpu_tracking_says_what_is_missing():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="needs PyTorch with a GPU visible"):
        block_device_memory.track_block_memory("cuda")


# --- set_config(device_memory_per_block=True) ----------------------------------------------------


@pytest.fixture
def fake_allocator() -> Iterator[FakeAllocator]:
    """The fake allocator as the backend, no tracking started: set_config starts it."""
    fake = FakeAllocator()
    block_device_memory.set_block_memory_backend(fake)
    yield fake
    profiler.set_config(device_memory_per_block=False, device=None)
    block_device_memory.set_block_memory_backend(None)


def test_set_config_measures_every_block_s_gpu_memory_when_asked(fake_allocator):
    profiler.set_config(device_memory_per_block=True)
    profiler.set_state("run")
    with hierarchical_timer("update"):
        fake_allocator.allocate(64 * MIB)
    assert section()[("update",)] == {"path": ["update"], "device": "cuda", "calls": 1,
                                      "net_bytes": 64 * MIB, "peak_bytes": 64 * MIB}


def test_the_memory_per_block_is_measured_on_the_default_device(fake_allocator):
    with fake_gpu():
        profiler.set_config(device="cuda:1", device_memory_per_block=True)
        profiler.set_state("run")
        with hierarchical_timer("update"):
            fake_allocator.allocate(MIB)
        entry = section()[("update",)]
        profiler.set_config(device=None)
    assert entry["device"] == "cuda:1"


def test_turned_off_the_blocks_after_are_not_measured(fake_allocator):
    profiler.set_config(device_memory_per_block=True)
    profiler.set_state("run")
    with hierarchical_timer("before"):
        fake_allocator.allocate(MIB)
    profiler.set_config(device_memory_per_block=False)
    with hierarchical_timer("after"):
        fake_allocator.allocate(MIB)
    assert set(section()) == {("before",)}


def test_memory_per_block_is_off_by_default(fake_allocator):
    profiler.set_config(profile_memory=False)
    profiler.set_state("run")
    with hierarchical_timer("update"):
        fake_allocator.allocate(MIB)
    assert "device_memory" not in profiler.get_timer_tree()


def test_set_config_without_a_gpu_refuses_memory_per_block_and_changes_nothing():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="needs PyTorch with a GPU visible"):
        profiler.set_config(device_memory_per_block=True, dump_period=5.0)
    assert not control.get_settings().device_memory_per_block
    assert control.get_settings().dump_period == 1.0
