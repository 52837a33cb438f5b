"""emit_nvtx also runs PyTorch's emit_nvtx (a range per autograd op, with seq and stashed seq)
where torch has a GPU, nested inside rlprof's block ranges.

The CPU build of torch installed here refuses PyTorch's emit_nvtx (it synchronises CUDA), so the
order in which rlprof's emit_nvtx starts and stops it is checked with a context that writes down
its entry and exit beside the recorded NVTX calls; the ranges themselves are checked on a GPU by
benchmarks/nvtx_check.py.
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from nvtx_calls import RecordedCalls

from profiler import hierarchical_timer
from profiler.gpu import emit_nvtx, is_emitting
from profiler.gpu.autograd_ranges import set_autograd_ranges
from profiler.gpu.nvtx_bridge import NvtxUnavailableError, autograd_ranges_on

CPU_ONLY = not torch.cuda.is_available()


class RecordedAutogradRanges:
    """Stands in for torch.autograd.profiler.emit_nvtx: writes its entry and exit (and whether
    rlprof's bridge was on at each) into the same file as the NVTX calls."""

    def __init__(self, calls: RecordedCalls, record_shapes: bool) -> None:
        self.calls = calls
        self.record_shapes = record_shapes

    def __enter__(self):
        self._write(["autograd enter", self.record_shapes, is_emitting()])
        return self

    def __exit__(self, *exc_info):
        self._write(["autograd exit", is_emitting()])

    def _write(self, call):
        with open(self.calls.path, "a") as file:
            file.write(json.dumps(call) + "\n")


@pytest.fixture
def calls(tmp_path):
    return RecordedCalls(tmp_path / "calls.jsonl")


@pytest.fixture
def autograd(calls):
    set_autograd_ranges(lambda record_shapes: RecordedAutogradRanges(calls, record_shapes))
    yield
    set_autograd_ranges(None)


def kinds(calls):
    return [call[0] if call[0] in ("push", "pop") else call for call in calls.calls()]


def test_pytorchs_ranges_run_inside_rlprofs_from_start_to_end(calls, autograd):
    with emit_nvtx(record_shapes=True, backend=calls, autograd=True):
        assert autograd_ranges_on()
        with hierarchical_timer("update"):
            pass
    # PyTorch's ranges start before the first block's range and stop while rlprof's bridge is
    # still on, so each op's range lies inside the block ranges open around it.
    assert kinds(calls) == [["autograd enter", True, False], "push", "pop", ["autograd exit", True]]
    assert not autograd_ranges_on()


def test_record_shapes_is_passed_to_pytorchs_emit_nvtx(calls, autograd):
    with emit_nvtx(backend=calls, autograd=True):
        pass
    assert calls.calls()[0] == ["autograd enter", False, False]


def test_nested_emit_nvtx_starts_pytorchs_once(calls, autograd):
    with emit_nvtx(backend=calls, autograd=True):
        with emit_nvtx(backend=calls, autograd=True):
            with hierarchical_timer("step"):
                pass
        assert autograd_ranges_on()
    entries = [call for call in calls.calls() if call[0] == "autograd enter"]
    assert len(entries) == 1


def test_an_inner_emit_nvtx_without_autograd_stops_pytorchs_until_it_ends(calls, autograd):
    with emit_nvtx(backend=calls, autograd=True):
        with emit_nvtx(backend=calls, autograd=False):
            assert not autograd_ranges_on()
        assert autograd_ranges_on()


def test_autograd_false_runs_rlprofs_ranges_only(calls, autograd):
    with emit_nvtx(backend=calls, autograd=False):
        with hierarchical_timer("step"):
            pass
    assert kinds(calls) == ["push", "pop"]


def test_autograd_must_be_a_yes_no_or_none():
    with pytest.raises(TypeError, match="autograd must be True, False or None"):
        emit_nvtx(autograd="yes")


@pytest.mark.skipif(not CPU_ONLY, reason="checks the CPU-only build of torch")
def test_pytorchs_own_emit_nvtx_refuses_a_cpu_only_build():
    # The fact the default rests on: torch 2.13.0+cpu cannot run its emit_nvtx at all.
    with pytest.raises(AssertionError, match="not compiled with CUDA"):
        with torch.autograd.profiler.emit_nvtx():
            pass


@pytest.mark.skipif(not CPU_ONLY, reason="checks the CPU-only build of torch")
def test_by_default_a_cpu_only_torch_gets_rlprofs_ranges_only(calls):
    with emit_nvtx(backend=calls):
        assert not autograd_ranges_on()
        with hierarchical_timer("step"):
            pass
    assert kinds(calls) == ["push", "pop"]


@pytest.mark.skipif(not CPU_ONLY, reason="checks the CPU-only build of torch")
def test_autograd_true_on_a_cpu_only_torch_says_why_and_changes_nothing(calls):
    with pytest.raises(NvtxUnavailableError, match=r"CPU-only build: PyTorch's emit_nvtx asserts"):
        with emit_nvtx(backend=calls, autograd=True):
            pass
    assert not is_emitting() and not autograd_ranges_on()


def test_pytorchs_ranges_are_refused_beside_rlprofs_operator_recording(calls, autograd):
    from profiler.gpu.torch_ops import start_operators, stop_operators

    start_operators()
    try:
        with pytest.raises(NvtxUnavailableError, match="torch.profiler runs once per thread"):
            with emit_nvtx(backend=calls, autograd=True):
                pass
        with emit_nvtx(backend=calls, autograd=False):  # rlprof's ranges alone still go
            assert is_emitting()
    finally:
        stop_operators()


def test_a_forked_child_does_not_stop_its_parents_pytorch_ranges(calls, autograd):
    with emit_nvtx(backend=calls, autograd=True):
        pid = os.fork()
        if pid == 0:  # the child leaves, as a worker's settings change would, without touching torch
            from profiler.gpu.nvtx_bridge import apply_nvtx

            apply_nvtx(None)
            os._exit(0)
        os.waitpid(pid, 0)
    exits = [call for call in calls.calls() if call[0] == "autograd exit"]
    assert len(exits) == 1
