"""Specification of device time per PyTorch operator (profiler.gpu.torch_ops): kernels found by
their operator's correlation id, folded as device self and total time, and kept for the trace's
GPU track. PyTorch's raw events are stood in for by plain objects with the same methods (CI has no
GPU to make kernels); the CPU-only case runs real torch."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from tree_paths import find

import profiler
from profiler import hierarchical_timer
from profiler.export.chrome_trace import to_chrome_trace
from profiler.gpu import torch_ops
from profiler.recording import events
from profiler.timing.timers import TimerNode

torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch runs these")


@dataclass
class Device:
    name: str


@dataclass
class RawEvent:
    """The methods of torch's ``_KinetoEvent`` that folding reads."""

    event_name: str
    start: int
    duration: int
    device: str = "CPU"
    correlation: int = 0
    linked: int = 0
    index: int = 0
    thread: int = 1
    sizes: list = field(default_factory=list)
    activity: str = "cpu_op"

    def name(self): return self.event_name
    def start_ns(self): return self.start
    def duration_ns(self): return self.duration
    def device_type(self): return Device(self.device)
    def device_index(self): return self.index
    def correlation_id(self): return self.correlation
    def linked_correlation_id(self): return self.linked
    def start_thread_id(self): return self.thread
    def flops(self): return 0
    def shapes(self): return self.sizes
    def dtypes(self): return []
    def stack(self): return []
    def nbytes(self): return 0
    def activity_type(self): return self.activity


def fold(events):
    root = TimerNode("root")
    block = root.get_child("update")
    figures: dict = {}
    kernels: list = []
    torch_ops.fold_events(events, {1: block}, root, figures, kernels)
    return block, figures, kernels


LINEAR_ON_GPU = [
    RawEvent("rlprof:1 update", 0, 1000),
    RawEvent("aten::linear", 100, 500, correlation=11),
    RawEvent("aten::addmm", 200, 300, correlation=12),
    RawEvent("gemm_kernel", 400, 4000, device="CUDA", linked=12),
    RawEvent("bias_kernel", 4400, 600, device="CUDA", linked=11),
]


def test_a_kernel_is_the_device_self_time_of_the_operator_that_launched_it():
    block, figures, _ = fold(LINEAR_ON_GPU)
    addmm = block.children["aten::linear"].children["aten::addmm"]
    assert figures[addmm].device_self == pytest.approx(4e-6)


def test_an_operator_s_device_total_holds_the_kernels_of_the_operators_it_ran():
    block, figures, _ = fold(LINEAR_ON_GPU)
    linear = block.children["aten::linear"]
    assert (figures[linear].device_self, figures[linear].device_total) == pytest.approx((0.6e-6, 4.6e-6))


def test_every_kernel_is_kept_for_the_gpu_track_with_its_device():
    _, _, kernels = fold(LINEAR_ON_GPU)
    assert kernels == [("cuda:0", "gemm_kernel", 400, 4400), ("cuda:0", "bias_kernel", 4400, 5000)]


def test_cuda_runtime_calls_are_not_folded_as_operators():
    launch = RawEvent("cudaLaunchKernel", 250, 20, linked=12, thread=4058, activity="cuda_runtime")
    block, _, _ = fold([*LINEAR_ON_GPU, launch])
    assert [child.name for child in block.parent.children.values()] == ["update"]


def test_a_kernel_whose_operator_was_not_recorded_adds_to_no_operator():
    block, figures, kernels = fold([*LINEAR_ON_GPU[:3], RawEvent("stray", 10, 50, device="CUDA", linked=99)])
    assert sum(figure.device_total for figure in figures.values()) == 0 and len(kernels) == 1


def test_without_cuda_the_operators_section_says_device_time_is_unavailable():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the section has device time")
    torch_ops.start_operators()
    try:
        with hierarchical_timer("forward"):
            torch.ones(4) + 1
        section = profiler.get_timer_tree()["operators"]
    finally:
        torch_ops.stop_operators()
    assert section["device_time"] is False
    assert "torch.cuda.is_available() is False" in section["device_time_unavailable"]


def test_the_trace_has_a_gpu_track_per_device_on_rlprof_s_clock():
    events.start_recording()
    recording = torch_ops.start_operators()
    try:
        with hierarchical_timer("forward"):
            torch.ones(4) + 1
        recording.kernels.append(("cuda:0", "gemm_kernel", 1.0, 1.5))  # as CUDA activity gives them
        tree = profiler.get_timer_tree()
    finally:
        torch_ops.stop_operators()
        events.stop_recording()
        events.clear_recording()
    trainer = tree["timeline"]["processes"][0]
    gpu = next(thread for thread in trainer["threads"] if thread.get("device") == "cuda:0")
    trace = to_chrome_trace(tree)["traceEvents"]
    kernel = next(event for event in trace if event["name"] == "gemm_kernel")
    names = {event["args"]["name"] for event in trace if event["name"] == "thread_name"}
    assert (gpu["name"], gpu["spans"], kernel["ph"]) == ("GPU cuda:0", [["gemm_kernel", 1.0, 1.5]], "X")
    assert "GPU cuda:0" in names


def test_a_process_forked_after_cuda_records_operators_without_device_time(monkeypatch):
    monkeypatch.setattr(torch_ops, "_forked_after_cuda", True)
    assert "forked from one that had initialised CUDA" in torch_ops.device_unavailable_reason(torch)
