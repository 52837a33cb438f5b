"""Specification of GPU memory counter tracks (profiler.gpu.device_memory): at every memory sample
each device's allocated and reserved memory become timeline counters, drawn as counter tracks in
the trace. A fake reader stands in for torch.cuda (CI has no GPU); the CPU-only case runs real torch."""

from __future__ import annotations

from typing import Iterator

import pytest

import profiler
from profiler import hierarchical_timer
from profiler.export.chrome_trace import to_chrome_trace
from profiler.gpu import device_memory
from profiler.recording import events, memory

MEBIBYTE = 1024 * 1024


class FakeGpuMemory:
    """A GPU whose allocator the test moves: allocated grows with what the test plants."""

    def __init__(self) -> None:
        self.allocated = 10 * MEBIBYTE

    def __call__(self) -> list[tuple[str, int, int]]:
        return [("cuda:0", self.allocated, 2 * self.allocated)]


@pytest.fixture
def gpu_memory() -> Iterator[FakeGpuMemory]:
    fake = FakeGpuMemory()
    device_memory.set_device_memory(fake)
    events.start_recording()
    memory.start_sampling(every_blocks=1)
    yield fake
    memory.stop_sampling()
    memory.clear_memory()
    events.stop_recording()
    events.clear_recording()
    device_memory.set_device_memory(None)


def counters(tree, name):
    return [row[2] for row in tree["timeline"]["processes"][0]["counters"] if row[0] == name]


def test_allocated_memory_is_a_counter_that_rises_with_an_allocation(gpu_memory):
    with hierarchical_timer("before"):
        pass
    with hierarchical_timer("plant"):
        gpu_memory.allocated += 256 * MEBIBYTE
    allocated = counters(profiler.get_timer_tree(), "GPU cuda:0 allocated (MiB)")
    assert (allocated[0], allocated[-1]) == (10.0, 266.0)


def test_reserved_memory_is_a_counter_beside_it(gpu_memory):
    with hierarchical_timer("block"):
        pass
    assert set(counters(profiler.get_timer_tree(), "GPU cuda:0 reserved (MiB)")) == {20.0}


def test_the_trace_draws_them_as_counter_tracks(gpu_memory):
    with hierarchical_timer("block"):
        pass
    trace = to_chrome_trace(profiler.get_timer_tree())["traceEvents"]
    assert any(event["ph"] == "C" and event["name"] == "GPU cuda:0 allocated (MiB)" for event in trace)


def test_a_process_without_a_gpu_in_use_records_no_gpu_counter(gpu_memory):
    device_memory.set_device_memory(lambda: [])
    events.clear_recording()  # the sample taken as sampling started read the fake GPU
    with hierarchical_timer("block"):
        pass
    assert not any(row[0].startswith("GPU") for row in profiler.get_timer_tree()["timeline"]["processes"][0]["counters"])


def test_a_failing_reader_leaves_the_host_sample_taken(gpu_memory):
    def broken():
        raise RuntimeError("driver gone")

    device_memory.set_device_memory(broken)
    with hierarchical_timer("block"):
        pass
    assert profiler.get_timer_tree()["memory"]["processes"][0]["samples"]


def test_torch_s_reader_initialises_no_cuda_of_its_own():
    torch = pytest.importorskip("torch")
    assert device_memory.read_torch_cuda_memory() == [] or torch.cuda.is_initialized()
    if not torch.cuda.is_available():
        assert not torch.cuda.is_initialized()
