"""emit_nvtx: every rlprof block an NVTX range, numbered like its span on rlprof's timeline."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from nvtx_calls import RecordedCalls, skip_without_nvtx_package

import profiler
from profiler import hierarchical_timer, timed
from profiler.gpu import emit_nvtx, is_emitting
from profiler.gpu.nvtx_bridge import NvtxUnavailableError, resolve_backend
from profiler.tree.timer_tree import get_timer_tree
from profiler.timing.timer_node import PLAIN_ENTER
from profiler.timing.timers import TimerNode

TRAINER = f"trainer (pid {os.getpid()})"


@pytest.fixture
def calls(tmp_path) -> RecordedCalls:
    return RecordedCalls(tmp_path / "calls.jsonl")


def spans_of_this_thread() -> list[list]:
    return get_timer_tree()["timeline"]["processes"][0]["threads"][0]["spans"]


def test_every_block_opens_a_range_of_its_name_and_closes_it(calls):
    with emit_nvtx(backend=calls):
        with hierarchical_timer("step"):
            with hierarchical_timer("policy"):
                pass
    first = calls.calls()[0][2]
    assert calls.calls() == [
        ["push", "step", first, TRAINER, os.getpid()],
        ["push", "policy", first + 1, TRAINER, os.getpid()],
        ["pop", os.getpid()],
        ["pop", os.getpid()],
    ]


def test_sequence_numbers_run_on_across_blocks_and_activations(calls):
    for _ in range(2):
        with emit_nvtx(backend=calls):
            with hierarchical_timer("step"):
                pass
    numbers = [call[2] for call in calls.calls() if call[0] == "push"]
    assert numbers[1] == numbers[0] + 1


def test_a_span_carries_the_seq_of_its_range(calls, recording):
    with emit_nvtx(backend=calls):
        with hierarchical_timer("step"):
            with hierarchical_timer("policy"):
                pass
    pushed = {call[1]: call[2] for call in calls.calls() if call[0] == "push"}
    spans = {span[0]: span[3] for span in spans_of_this_thread()}
    assert spans == {"step": {"seq": pushed["step"]}, "policy": {"seq": pushed["policy"]}}


def test_the_seq_of_a_span_reaches_the_chrome_trace_args(calls, recording):
    from profiler.export.chrome_trace import to_chrome_trace

    with emit_nvtx(backend=calls):
        with hierarchical_timer("update"):
            pass
    sequence = calls.calls()[0][2]
    events = [event for event in to_chrome_trace(get_timer_tree())["traceEvents"] if event.get("name") == "update"]
    assert events[0]["args"]["seq"] == sequence


def test_a_block_that_raises_still_closes_its_range(calls):
    with emit_nvtx(backend=calls):
        with pytest.raises(KeyError):
            with hierarchical_timer("step"):
                raise KeyError("boom")
    assert [call[0] for call in calls.calls()] == ["push", "pop"]


def test_a_block_open_before_emit_nvtx_began_closes_no_range(calls):
    with hierarchical_timer("outer"):
        with emit_nvtx(backend=calls):
            with hierarchical_timer("inner"):
                pass
    assert [call[:2] for call in calls.calls()] == [["push", "inner"], ["pop", os.getpid()]]


def test_no_range_once_emit_nvtx_ended(calls):
    with emit_nvtx(backend=calls):
        pass
    with hierarchical_timer("step"):
        pass
    assert calls.calls() == []
    assert TimerNode.__enter__ is PLAIN_ENTER


def test_enabled_false_emits_nothing_and_needs_no_backend(calls):
    with emit_nvtx(enabled=False, backend="no such backend"):
        with hierarchical_timer("step"):
            pass
    assert not is_emitting()
    assert TimerNode.__enter__ is PLAIN_ENTER


def test_leaving_a_nested_emit_nvtx_restores_the_outer_settings(calls, tmp_path):
    inner_calls = RecordedCalls(tmp_path / "inner.jsonl")
    with emit_nvtx(backend=calls):
        with emit_nvtx(record_shapes=True, backend=inner_calls):
            pass
        with hierarchical_timer("after_inner"):
            pass
    assert [call[1] for call in calls.calls() if call[0] == "push"] == ["after_inner"]
    assert not is_emitting()


def test_ranges_come_from_each_thread_that_times_blocks(calls):
    def work() -> None:
        with hierarchical_timer("fetch"):
            pass

    with emit_nvtx(backend=calls):
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    assert [call[:2] for call in calls.calls()] == [["push", "fetch"], ["pop", os.getpid()]]


def test_memory_sampling_and_nvtx_observe_blocks_together(calls):
    from profiler.recording import memory

    memory.start_sampling(every_blocks=1)
    with emit_nvtx(backend=calls):
        with hierarchical_timer("step"):
            pass
    memory.stop_sampling()
    assert [call[0] for call in calls.calls()] == ["push", "pop"]
    assert memory.drain_memory(profiler.get_timer_stack_for_thread(threading.current_thread())) is not None


def test_record_shapes_puts_sizes_and_dtypes_in_the_range_name_and_the_span(calls, recording):
    @timed(name="act")
    def act(observation, action_mask, temperature):
        return observation

    with emit_nvtx(record_shapes=True, backend=calls):
        act(np.zeros((4, 3), dtype=np.float32), action_mask=np.ones(2, dtype=bool), temperature=0.5)
    assert calls.calls()[0][1] == "act, sizes = [[4, 3], [2], []], dtypes = [float32, bool, -]"
    assert spans_of_this_thread()[0][3] == {
        "seq": calls.calls()[0][2],
        "sizes": "[[4, 3], [2], []]",
        "dtypes": "[float32, bool, -]",
    }


def test_record_shapes_leaves_plain_blocks_and_blocks_inside_timed_functions_unlabelled(calls):
    @timed(name="update")
    def update(batch):
        with hierarchical_timer("backward"):
            pass

    with emit_nvtx(record_shapes=True, backend=calls):
        update(np.zeros(8))
        with hierarchical_timer("log"):
            pass
    assert [call[1] for call in calls.calls() if call[0] == "push"] == [
        "update, sizes = [[8]], dtypes = [float64]",
        "backward",
        "log",
    ]


def test_without_record_shapes_timed_ranges_are_named_only(calls):
    @timed(name="act")
    def act(observation):
        return observation

    with emit_nvtx(backend=calls):
        act(np.zeros(3))
    assert calls.calls()[0][1] == "act"


def test_the_real_nvtx_package_takes_every_call():
    # Without Nsight attached the package's calls do nothing, but they must be made without error.
    skip_without_nvtx_package()
    with emit_nvtx(record_shapes=True, backend="nvtx"):
        with hierarchical_timer("step"):
            timed(name="act")(lambda x: x)(np.zeros(2))
    assert resolve_backend().name == "nvtx"


def test_the_torch_backend_sends_each_block_through_torch_cuda_nvtx_naming_its_seq_and_process(monkeypatch):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch.cuda.nvtx needs a CUDA build of torch and a GPU (benchmarks/nvtx_check.py checks it there)")
    sent = []
    push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda message: sent.append(message) or push(message))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: sent.append("pop") or pop())
    with emit_nvtx(backend="torch", autograd=False):
        with hierarchical_timer("step"):
            torch.ones(4, device="cuda").sum().item()
    sequence = int(sent[0].split("seq = ")[1].split(",")[0])
    assert sent == [f"step, seq = {sequence}, rlprof {TRAINER}", "pop"]


def test_the_torch_backend_of_a_cpu_only_torch_is_refused_saying_what_to_install():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("checks a CPU-only build of torch")
    with pytest.raises(NvtxUnavailableError, match=r"CPU-only build.*pip install 'rlprof\[nvtx\]'"):
        with emit_nvtx(backend="torch"):
            pass
    assert not is_emitting()


def test_an_unknown_backend_name_is_refused_naming_the_backends():
    with pytest.raises(ValueError, match="unknown backend 'cuda'.*nvtx, torch"):
        with emit_nvtx(backend="cuda"):
            pass
    assert not is_emitting()


def test_without_nvtx_or_torch_asking_for_ranges_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "nvtx", None)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(NvtxUnavailableError, match=r"pip install 'rlprof\[nvtx\]'"):
        with emit_nvtx():
            pass
    assert not is_emitting()


def test_arguments_are_checked():
    with pytest.raises(TypeError, match="record_shapes"):
        emit_nvtx(record_shapes="yes")
    with pytest.raises(TypeError, match="enabled"):
        emit_nvtx(enabled=1)
