"""Specification of PyTorch's operators folded into rlprof's tree (profiler.gpu.torch_ops), with
real torch on CPU: each operator under the block that ran it, with its shapes, FLOPs and memory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from not_installed import run_without
from tree_paths import find, operators_by_path

import profiler
from profiler import Profiler, hierarchical_timer, load_timing_tree
from profiler.control import controls as control
from profiler.export.chrome_trace import to_chrome_trace
from profiler.recording import events
from profiler.gpu import operator_calls, torch_ops

torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch runs these")

BATCH, IN_FEATURES, OUT_FEATURES = 64, 32, 16


@pytest.fixture
def recording() -> Iterator[torch_ops.OperatorRecording]:
    recording = torch_ops.start_operators()
    yield recording
    torch_ops.stop_operators()


@pytest.fixture
def linear():
    torch.manual_seed(0)
    return torch.nn.Linear(IN_FEATURES, OUT_FEATURES), torch.randn(BATCH, IN_FEATURES)


def test_an_operator_is_folded_under_the_block_that_ran_it(recording, linear):
    layer, batch = linear
    with hierarchical_timer("policy.forward"):
        layer(batch)
    addmm = find(profiler.get_timer_tree(), "policy.forward", "aten::linear", "aten::addmm")
    assert (addmm["count"], addmm["object_type"]) == (1, "operator")


def test_operators_run_in_no_block_go_under_the_root(recording, linear):
    layer, batch = linear
    layer(batch)
    assert find(profiler.get_timer_tree(), "aten::linear")["count"] == 1


def test_a_matrix_multiplication_has_its_flops(recording, linear):
    layer, batch = linear
    with hierarchical_timer("forward"):
        layer(batch)
    addmm = operators_by_path(profiler.get_timer_tree())[("forward", "aten::linear", "aten::addmm")]
    assert addmm["flops"] == 2 * BATCH * IN_FEATURES * OUT_FEATURES


def test_a_convolution_has_its_flops(recording):
    convolution, images = torch.nn.Conv2d(3, 8, kernel_size=3), torch.randn(2, 3, 10, 10)
    with hierarchical_timer("encoder"):
        convolution(images)
    conv2d = operators_by_path(profiler.get_timer_tree())[("encoder", "aten::conv2d")]
    output_elements = 2 * 8 * 8 * 8
    assert conv2d["flops"] == 2 * output_elements * 3 * 3 * 3


def test_input_shapes_are_counted_per_operator(recording, linear):
    layer, batch = linear
    with hierarchical_timer("forward"):
        layer(batch)
        layer(batch[:8])
    shapes = operators_by_path(profiler.get_timer_tree())[("forward", "aten::linear")]["input_shapes"]
    assert shapes == {"[[64, 32], [16, 32], [16]]": 1, "[[8, 32], [16, 32], [16]]": 1}


def test_input_dtypes_are_counted_per_operator_with_torch_s_names(recording):
    with hierarchical_timer("returns"):
        torch.add(torch.ones(4, dtype=torch.float64), torch.arange(4))
    dtypes = operators_by_path(profiler.get_timer_tree())[("returns", "aten::add")]["input_dtypes"]
    assert dtypes == {"[float64, int64, Scalar]": 1}


def act(layer, batch):
    """A policy's call site, for the backtraces."""
    return layer(batch)


def test_with_stack_keeps_each_operator_s_python_call_stack_innermost_first(linear):
    layer, batch = linear
    torch_ops.start_operators(with_stack=True)
    try:
        with hierarchical_timer("rollout"):
            act(layer, batch)
        tree = profiler.get_timer_tree()
    finally:
        torch_ops.stop_operators()
    (backtrace, calls), = operators_by_path(tree)[("rollout", "aten::linear")]["backtraces"].items()
    frames = backtrace.split(" <- ")
    act_frame = next(index for index, frame in enumerate(frames)
                     if frame.endswith(f"test_torch_ops.py({act.__code__.co_firstlineno}): act"))
    assert calls == 1 and tree["operators"]["with_stack"]
    assert frames.index("nn.Module: Linear_0") < act_frame


def test_without_with_stack_no_backtrace_is_kept(recording, linear):
    layer, batch = linear
    with hierarchical_timer("rollout"):
        act(layer, batch)
    tree = profiler.get_timer_tree()
    assert "backtraces" not in operators_by_path(tree)[("rollout", "aten::linear")]
    assert tree["operators"]["with_stack"] is False


def test_a_backtrace_leaves_rlprof_s_frames_and_addresses_out():
    stack = ["<built-in method randn of type object at 0x7fa8c2ccea40>",
             f"{torch_ops.__file__.replace('.pyc', '.py')}(40): _annotate", "train.py(12): update"]
    assert operator_calls.backtrace_text(stack) == "<built-in method randn of type object> <- train.py(12): update"


def test_the_cpu_memory_an_operator_allocated_is_kept(recording, linear):
    layer, batch = linear
    with hierarchical_timer("forward"):
        output = layer(batch)
    addmm = operators_by_path(profiler.get_timer_tree())[("forward", "aten::linear", "aten::addmm")]
    assert addmm["cpu_memory_bytes"] == output.numel() * output.element_size()


def test_reading_the_tree_inside_a_block_keeps_later_operators_under_it(recording, linear):
    layer, batch = linear
    with hierarchical_timer("rollout"):
        layer(batch)
        profiler.get_timer_tree()
        layer(batch)
    assert find(profiler.get_timer_tree(), "rollout", "aten::linear")["count"] == 2


def test_a_block_s_self_time_leaves_its_operators_out(recording, linear):
    layer, batch = linear
    with hierarchical_timer("forward"):
        layer(batch)
    forward = find(profiler.get_timer_tree(), "forward")
    operators = sum(child["total"] for child in forward["children"])
    assert forward["self"] == pytest.approx(max(0.0, forward["total"] - operators))


def test_nothing_is_recorded_once_stopped(linear):
    layer, batch = linear
    torch_ops.start_operators()
    torch_ops.stop_operators()
    with hierarchical_timer("forward"):
        layer(batch)
    assert find(profiler.get_timer_tree(), "forward").get("children", []) == []


def test_a_second_recording_is_refused(recording):
    with pytest.raises(RuntimeError, match="already being recorded"):
        torch_ops.start_operators()


def test_without_torch_asking_for_operators_says_what_to_install():
    completed = run_without(("torch",), """
        from profiler.gpu import torch_ops
        try:
            torch_ops.start_operators()
        except torch_ops.OperatorsUnavailableError as error:
            print(error)
    """)
    assert "needs PyTorch: pip install torch" in completed.stdout, completed.stderr


# --- the MXNet surface ---------------------------------------------------------------------------


def test_profile_imperative_records_operators_while_running(linear):
    layer, batch = linear
    profiler.set_config(profile_imperative=True, formats="timers")
    profiler.set_state("run")
    with hierarchical_timer("forward"):
        layer(batch)
    profiler.set_state("stop")
    assert not torch_ops.is_recording_operators()
    assert find(profiler.get_timer_tree(), "forward", "aten::linear")["count"] == 1


def test_profile_all_records_operators():
    profiler.set_config(profile_all=True)
    profiler.set_state("run")
    assert torch_ops.is_recording_operators()
    profiler.set_state("stop")


def test_operators_are_off_by_default():
    profiler.set_config(formats="timers")
    profiler.set_state("run")
    assert not torch_ops.is_recording_operators() and not control.get_settings().record_operators


# --- the MegEngine surface -----------------------------------------------------------------------


def test_a_session_with_record_operators_writes_them_to_its_files(tmp_path, linear):
    layer, batch = linear
    with Profiler(path=tmp_path, format="timers.json", name="step", record_operators=True) as session:
        layer(batch)
    tree = load_timing_tree(session.paths["timers.json"])
    assert find(tree, "step", "aten::linear")["count"] == 1
    assert ("step", "aten::linear", "aten::addmm") in operators_by_path(tree)
    assert not torch_ops.is_recording_operators()


def test_a_session_with_backtrace_records_the_operators_with_their_call_stacks(tmp_path, linear):
    layer, batch = linear
    with Profiler(path=tmp_path, format="timers.json", name="step", with_backtrace=True) as session:
        act(layer, batch)
    tree = load_timing_tree(session.paths["timers.json"])
    backtraces = operators_by_path(tree)[("step", "aten::linear")]["backtraces"]
    assert [calls for calls in backtraces.values()] == [1]
    assert f"({act.__code__.co_firstlineno}): act" in next(iter(backtraces))
    assert not torch_ops.is_recording_operators()


def test_enable_cupti_without_a_gpu_is_refused_saying_why(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: benchmarks/gpu_check.py checks enable_cupti there")
    with pytest.raises(ValueError, match=r"enable_cupti: no device time per operator: torch.cuda.is_available\(\) is False"):
        Profiler(path=tmp_path, enable_cupti=True)
    assert not torch_ops.is_recording_operators() and not list(tmp_path.iterdir())


def test_the_trace_has_the_operators_as_spans_nested_as_they_ran_inside_their_block(linear):
    layer, batch = linear
    events.start_recording()
    torch_ops.start_operators()
    try:
        with hierarchical_timer("policy.forward"):
            layer(batch)
        tree = profiler.get_timer_tree()
    finally:
        torch_ops.stop_operators()
        events.stop_recording()
        events.clear_recording()
    trace = to_chrome_trace(tree)["traceEvents"]
    track = next(event["tid"] for event in trace
                 if event["name"] == "thread_name" and event["args"]["name"] == torch_ops.OPERATOR_TRACK)
    spans = {event["name"]: event for event in trace if event["ph"] == "X" and event.get("tid") == track}
    block = next(event for event in trace if event["ph"] == "X" and event["name"] == "policy.forward")
    linear_span, addmm = spans["aten::linear"], spans["aten::addmm"]
    assert linear_span["ts"] <= addmm["ts"] and addmm["ts"] + addmm["dur"] <= linear_span["ts"] + linear_span["dur"]
    # On rlprof's clock: inside the block that ran it (give or take the reading of two clocks).
    slack = 1000  # microseconds
    assert block["ts"] - slack <= linear_span["ts"]
    assert linear_span["ts"] + linear_span["dur"] <= block["ts"] + block["dur"] + slack


def test_without_the_timeline_there_is_no_operator_track(recording, linear):
    layer, batch = linear
    layer(batch)
    assert torch_ops.gpu_tracks(profiler.timing.timers.current_thread_stack()) == []


def test_a_process_forked_while_recording_records_no_operators(recording):
    import multiprocessing

    def child(connection):
        from profiler.timing import timers

        with hierarchical_timer("env.step"):
            pass
        connection.send((torch_ops.is_recording_operators(), timers.plain_blocks))

    receiving, sending = multiprocessing.get_context("fork").Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(target=child, args=(sending,))
    process.start()
    recording_in_child, plain_blocks_in_child = receiving.recv()
    process.join(timeout=60)
    assert (recording_in_child, plain_blocks_in_child, process.exitcode) == (False, True, 0)


def test_operators_run_before_a_reset_are_forgotten_with_the_tree(recording, linear):
    layer, batch = linear
    with hierarchical_timer("forward"):
        layer(batch)
    profiler.reset_timers()
    with hierarchical_timer("forward"):
        layer(batch[:8])
    tree = profiler.get_timer_tree()
    assert find(tree, "forward", "aten::linear")["count"] == 1
    assert list(operators_by_path(tree)[("forward", "aten::linear")]["input_shapes"]) == ["[[8, 32], [16, 32], [16]]"]


def test_without_torch_set_config_refuses_operators_and_changes_nothing():
    completed = run_without(("torch",), """
        import profiler
        from profiler.control import controls
        from profiler.gpu import torch_ops
        try:
            profiler.set_config(profile_all=True, run_id="changed")
        except torch_ops.OperatorsUnavailableError as error:
            print(error)
        print(controls.get_settings().run_id, controls.get_settings().profile_all)
    """)
    assert completed.stdout.splitlines()[-2:] == [
        "recording PyTorch operators needs PyTorch: pip install torch (or turn operators off)",
        "profile False"], completed.stderr
