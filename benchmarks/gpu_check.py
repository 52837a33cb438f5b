"""Check rlprof's GPU features for real on a CUDA GPU, and print the figures they rest on.

    python3 benchmarks/gpu_check.py                        # from the repository root
    python3 benchmarks/gpu_check.py --markdown figures.md  # also write the table as markdown

What CI checks through fake event and memory backends, this script checks on the real thing,
each check built to show the behaviour (and, for verdicts, a run built *not* to show it):

* device time per block vs the kernels torch.profiler saw in it (a matmul loop);
* device time per operator (``aten::mm`` self, ``aten::matmul`` total), no CUDA runtime call in the tree;
* the GPU track in the Chrome trace, its kernels inside their block on rlprof's clock;
* the ``launch_only`` verdict on a block that only launched its kernels, not on one that waited;
* the ``gpu_idle`` verdict on a run whose GPU waits for the host, not on one kept busy;
* reading the tree inside a block keeps the block's later operators under it (torch 2.11 lost them);
* ``Profiler(profile_device=...)`` by default times a session's blocks on the GPU;
* ``Profiler(enable_cupti=True)`` records the operators with their kernels' device time;
* GPU memory counter tracks: allocated rises with a planted allocation;
* GPU memory per block: a transient allocation's peak, a kept one's net bytes, the outer block's peak;
* an env worker (SubprocessEnvManager, spawned) that times a device block ships its device time.

It prints one row per check with PASS or FAIL and exits 1 on any FAIL (2 without a CUDA GPU).
It takes well under 90 seconds on an H100. Measured figures vary from run to run; the thresholds
are wide enough for that and narrow enough to catch a wrong attribution.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import profiler  # noqa: E402
from profiler import Profiler, hierarchical_timer  # noqa: E402
from profiler.analysis.device_report import device_blocks  # noqa: E402
from profiler.analysis.verdicts import judge_run  # noqa: E402
from profiler.export.chrome_trace import to_chrome_trace  # noqa: E402
from profiler.gpu import device_time, torch_ops  # noqa: E402
from profiler.recording import events, memory  # noqa: E402
from profiler.tree.tree_reader import normalize_timing_tree  # noqa: E402

import gymnasium  # noqa: E402
import numpy  # noqa: E402

SIZE = 4096
PRODUCTS = 20


class Check:
    """One row of the table: a name, the figures measured, PASS or FAIL."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.figures = ""
        self.passed = False

    def set(self, passed: bool, figures: str) -> None:
        self.passed, self.figures = bool(passed), figures


def fresh() -> None:
    """An empty tree, no device times, no recording left from the check before."""
    if torch_ops.is_recording_operators():
        torch_ops.stop_operators()
    if events.is_recording():
        events.stop_recording()
    events.clear_recording()
    profiler.reset_timers()
    device_time.clear_device_times()
    device_time.set_default_device(None)


def normalized(tree: dict[str, Any]) -> dict[str, Any]:
    """The tree as ``rlprof analyze`` reads it from its file."""
    return normalize_timing_tree(json.loads(json.dumps(tree)))


def milliseconds(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def find(tree: dict[str, Any], *path: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = tree
    for name in path:
        node = next((child for child in (node or {}).get("children", []) if child["name"] == name), None)
    return node


def operators_under(tree: dict[str, Any], prefix: tuple[str, ...]) -> list[dict[str, Any]]:
    return [entry for entry in tree.get("operators", {}).get("operators", [])
            if tuple(entry["path"][: len(prefix)]) == prefix]


def device_entry(tree: dict[str, Any], *path: str, process: str = "trainer") -> dict[str, Any] | None:
    return next((entry for entry in tree.get("device_time", [])
                 if entry["path"] == list(path) and entry.get("process", "trainer") == process), None)


def matmul_run(torch: Any, *, synchronize_inside: bool, record_timeline: bool) -> dict[str, Any]:
    """PRODUCTS products of SIZE x SIZE float32 matrices in a device block ``matmuls``, with
    PyTorch's operators recorded (CUDA activity on)."""
    fresh()
    a = torch.randn(SIZE, SIZE, device="cuda")
    b = torch.randn(SIZE, SIZE, device="cuda")
    (a @ b).sum().item()  # warm up cuBLAS outside the measurement
    # ... and PyTorch's profiler: its first start with CUDA activity loads CUPTI, seconds on some
    # machines, which would be most of the run's wall time and make the launches' share too small
    # for the launch_only verdict.
    torch_ops.start_operators()
    (a @ b).sum().item()
    fresh()
    torch.cuda.synchronize()
    if record_timeline:
        events.start_recording()
    torch_ops.start_operators()
    with hierarchical_timer("step"):
        with hierarchical_timer("matmuls", device="cuda"):
            for _ in range(PRODUCTS):
                c = a @ b
            if synchronize_inside:
                torch.cuda.synchronize()
        with hierarchical_timer("wait"):
            c.sum().item()
    tree = profiler.get_timer_tree()
    torch_ops.stop_operators()
    if record_timeline:
        events.stop_recording()
    return tree


def check_device_time_vs_kernels(torch: Any, check: Check, state: dict[str, Any]) -> None:
    tree = state["matmuls"] = matmul_run(torch, synchronize_inside=False, record_timeline=True)
    entry = device_entry(tree, "step", "matmuls")
    host = find(tree, "step", "matmuls")["total"]
    kernels = sum(op.get("device_self", 0.0) for op in operators_under(tree, ("step", "matmuls")))
    ratio = kernels / entry["total"] if entry and entry["total"] else 0.0
    check.set(entry is not None and 0.90 <= ratio <= 1.02,
              f"block device {milliseconds(entry['total']) if entry else 'missing'}, kernels "
              f"(torch.profiler) {milliseconds(kernels)}, kernels/device {ratio:.3f} (want 0.90-1.02), "
              f"host {milliseconds(host)}")


def check_operator_device_time(torch: Any, check: Check, state: dict[str, Any]) -> None:
    operators = {tuple(entry["path"]): entry for entry in operators_under(state["matmuls"], ("step", "matmuls"))}
    matmul = operators.get(("step", "matmuls", "aten::matmul"))
    mm = operators.get(("step", "matmuls", "aten::matmul", "aten::mm"))
    if matmul is None or mm is None:
        check.set(False, f"aten::matmul / aten::mm not found under step/matmuls: {sorted(operators)[:6]}")
        return
    # CUDA runtime calls (cudaLaunchKernel...) are not operators: none may land in the tree.
    runtime = [node["name"] for node in _walk(state["matmuls"]) if node["name"].startswith("cuda")]
    check.set(mm["device_self"] > 0 and matmul["device_total"] >= mm["device_self"] * 0.999 and not runtime,
              f"aten::mm device self {milliseconds(mm['device_self'])}, aten::matmul device total "
              f"{milliseconds(matmul['device_total'])} (self {milliseconds(matmul['device_self'])}); "
              f"CUDA runtime calls in the tree: {sorted(set(runtime))[:3] or 'none'}")


def _walk(node: dict[str, Any]) -> Any:
    yield node
    for child in node.get("children", []):
        yield from _walk(child)


def check_gpu_track(torch: Any, check: Check, state: dict[str, Any]) -> None:
    tree = state["matmuls"]
    trace = to_chrome_trace(tree)["traceEvents"]
    gpu_tids = {(event["pid"], event["tid"]) for event in trace
                if event["name"] == "thread_name" and event["args"]["name"].startswith("GPU cuda")}
    kernels = [event for event in trace if event.get("ph") == "X" and (event["pid"], event["tid"]) in gpu_tids]
    block = next((event for event in trace if event.get("ph") == "X" and event["name"] == "matmuls"), None)
    if not gpu_tids or not kernels or block is None:
        check.set(False, f"GPU tracks {len(gpu_tids)}, kernels on them {len(kernels)}, block span {block is not None}")
        return
    # The block's kernels run after it opened (queued by it) and, launches being asynchronous,
    # may end after its host span: within its device time, plus 5 ms for the clocks' alignment.
    entry = device_entry(tree, "step", "matmuls")
    first = min(kernel["ts"] for kernel in kernels)
    last = max(kernel["ts"] + kernel["dur"] for kernel in kernels)
    start_gap_us = first - block["ts"]
    end_over_us = last - (block["ts"] + block["dur"] + entry["total"] * 1e6)
    check.set(-5000 <= start_gap_us and end_over_us <= 5000,
              f"{len(gpu_tids)} GPU track(s), {len(kernels)} kernels; first kernel {start_gap_us / 1000:.2f} ms "
              f"after the block opened, last ends {end_over_us / 1000:.2f} ms past host end + device time "
              "(want >= -5 and <= 5)")


def check_launch_only(torch: Any, check: Check, state: dict[str, Any]) -> None:
    tree = normalized(state["matmuls"])
    launched = [v.title for v in judge_run(tree).of_kind("launch_only")]
    waited_tree = matmul_run(torch, synchronize_inside=True, record_timeline=False)
    waited = [v.title for v in judge_run(normalized(waited_tree)).of_kind("launch_only")]
    told = any("matmuls" in title for title in launched)
    check.set(told and not waited,
              f"launch-only run: {'told' if told else 'NOT told'}; synchronised run: "
              f"{'told (wrong)' if waited else 'not told'}; {launched[:1]}; the launch-only run's wall "
              f"{milliseconds(tree['total'])}"
              + ("" if told else f"; its device blocks: {[block.as_dict() for block in device_blocks(tree)]}"))


def idle_run(torch: Any, *, idle: bool) -> dict[str, Any]:
    fresh()
    small = torch.randn(64, 64, device="cuda")
    large = torch.randn(SIZE, SIZE, device="cuda")
    torch.cuda.synchronize()
    for _ in range(10):
        with hierarchical_timer("step"):
            with hierarchical_timer("forward", device="cuda"):
                if idle:
                    small @ small
                else:
                    for _ in range(5):
                        large @ large
                    torch.cuda.synchronize()
            if idle:
                time.sleep(0.02)  # host work the GPU waits for
    return profiler.get_timer_tree()


def check_gpu_idle(torch: Any, check: Check, state: dict[str, Any]) -> None:
    idle_tree = normalized(idle_run(torch, idle=True))
    busy_tree = normalized(idle_run(torch, idle=False))
    idle = judge_run(idle_tree).of_kind("gpu_idle")
    busy = judge_run(busy_tree).of_kind("gpu_idle")
    idle_share = idle[0].evidence["busy_share"] if idle else None
    busy_entry = device_entry(busy_tree, "step", "forward")
    busy_share = busy_entry["total"] / busy_tree["total"] if busy_entry else 0.0
    check.set(bool(idle) and not busy,
              f"idle run: {'told' if idle else 'NOT told'} (GPU busy share {idle_share}); busy run: "
              f"{'told (wrong)' if busy else 'not told'} (device share {busy_share:.2f})")


def check_tree_read_inside_block(torch: Any, check: Check, state: dict[str, Any]) -> None:
    fresh()
    layer = torch.nn.Linear(32, 16).cuda()
    batch = torch.randn(64, 32, device="cuda")
    torch_ops.start_operators()
    try:
        with hierarchical_timer("rollout"):
            layer(batch)
            profiler.get_timer_tree()
            layer(batch)
        linear = find(profiler.get_timer_tree(), "rollout", "aten::linear")
    finally:
        torch_ops.stop_operators()
    count = linear["count"] if linear else 0
    check.set(count == 2, f"aten::linear under rollout: {count} calls (want 2), torch {torch.__version__}")


def check_profile_device_session(torch: Any, check: Check, state: dict[str, Any]) -> None:
    fresh()
    a = torch.randn(SIZE, SIZE, device="cuda")
    with tempfile.TemporaryDirectory() as folder:
        with Profiler(path=folder, formats=["timers.json"]):  # profile_device: MegEngine's default
            with hierarchical_timer("update"):
                for _ in range(5):
                    a @ a
        entry = device_entry(profiler.get_timer_tree(), "update")
    check.set(entry is not None and entry["total"] > 0,
              f"update: device time {milliseconds(entry['total']) if entry else 'missing'} with no device= in the code")


def check_enable_cupti_session(torch: Any, check: Check, state: dict[str, Any]) -> None:
    fresh()
    a = torch.randn(SIZE, SIZE, device="cuda")
    with tempfile.TemporaryDirectory() as folder:
        with Profiler(path=folder, formats=["timers.json"], enable_cupti=True):  # MegEngine's option
            with hierarchical_timer("update"):
                for _ in range(5):
                    a @ a
            torch.cuda.synchronize()
        section = profiler.get_timer_tree().get("operators") or {}
    mm = next((entry for entry in section.get("operators", []) if entry["path"][-1] == "aten::mm"), None)
    check.set(section.get("device_time") is True and mm is not None and mm.get("device_self", 0) > 0,
              f"operators' device_time {section.get('device_time')}; aten::mm device self "
              f"{milliseconds(mm['device_self']) if mm and 'device_self' in mm else 'missing'}")


def check_memory_counters(torch: Any, check: Check, state: dict[str, Any]) -> None:
    fresh()
    torch.zeros(1, device="cuda")
    events.start_recording()
    memory.start_sampling(every_blocks=1)
    planted_mib = 256
    try:
        with hierarchical_timer("before"):
            pass
        with hierarchical_timer("plant"):
            planted = torch.empty(planted_mib * 1024 * 1024, dtype=torch.uint8, device="cuda")
        with hierarchical_timer("after"):
            pass
        tree = profiler.get_timer_tree()
    finally:
        memory.stop_sampling()
        events.stop_recording()
    del planted
    counters = tree.get("timeline", {}).get("processes", [{}])[0].get("counters", [])
    allocated = [value for name, _, value, *_ in counters if name == "GPU cuda:0 allocated (MiB)"]
    reserved = [value for name, _, value, *_ in counters if name == "GPU cuda:0 reserved (MiB)"]
    rise = (max(allocated) - min(allocated)) if allocated else 0.0
    check.set(rise >= planted_mib * 0.99 and bool(reserved),
              f"{len(allocated)} allocated samples, rise {rise:.1f} MiB (planted {planted_mib} MiB); "
              f"{len(reserved)} reserved samples")


def check_block_memory(torch: Any, check: Check, state: dict[str, Any]) -> None:
    from profiler.gpu import block_device_memory

    fresh()
    torch.zeros(1, device="cuda")
    block_device_memory.track_block_memory("cuda")
    try:
        with hierarchical_timer("step"):
            with hierarchical_timer("transient"):
                scratch = torch.empty(512 * 1024 * 1024, dtype=torch.uint8, device="cuda")
                del scratch
            with hierarchical_timer("kept"):
                kept = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device="cuda")
        entries = {tuple(entry["path"]): entry for entry in profiler.get_timer_tree().get("device_memory", [])}
    finally:
        block_device_memory.stop_tracking_block_memory()
    del kept
    mib = 1024 * 1024
    step, transient, kept_entry = (entries.get(path, {}) for path in
                                   (("step",), ("step", "transient"), ("step", "kept")))
    check.set(transient.get("peak_bytes", 0) >= 512 * mib and abs(transient.get("net_bytes", -1)) < mib
              and kept_entry.get("net_bytes", 0) >= 128 * mib and step.get("peak_bytes", 0) >= 512 * mib,
              f"transient: peak {transient.get('peak_bytes', 0) / mib:.0f} MiB, net {transient.get('net_bytes', 0) / mib:.0f} MiB; "
              f"kept: net {kept_entry.get('net_bytes', 0) / mib:.0f} MiB; step: peak {step.get('peak_bytes', 0) / mib:.0f} MiB "
              "(want >= 512, ~0, >= 128, >= 512)")


class CudaEnv(gymnasium.Env):
    """A gymnasium env whose step multiplies matrices on the GPU inside a device block."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), dtype=numpy.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self) -> None:
        self._matrix: Any = None

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        import torch

        self._matrix = torch.randn(2048, 2048, device="cuda")
        return numpy.zeros(4, dtype=numpy.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        with hierarchical_timer("env.gpu_step", device="cuda"):
            for _ in range(3):
                self._matrix @ self._matrix
        return numpy.zeros(4, dtype=numpy.float32), 0.0, False, False, {}

    def close(self) -> None:
        pass


def check_worker_device_time(torch: Any, check: Check, state: dict[str, Any]) -> None:
    from envmanager.subprocess_env_manager import SubprocessEnvManager

    fresh()
    manager = SubprocessEnvManager([CudaEnv], context="spawn")
    try:
        manager.reset(seed=0)
        for _ in range(10):
            manager.step(numpy.zeros(1, dtype=numpy.int64))
    finally:
        manager.close()
    tree = profiler.get_timer_tree()
    entries = [entry for entry in tree.get("device_time", []) if entry.get("process", "trainer") != "trainer"]
    entry = next((entry for entry in entries if entry["path"][-1] == "env.gpu_step"), None)
    check.set(entry is not None and entry["count"] >= 10 and entry["total"] > 0,
              f"worker device entries {len(entries)}; env.gpu_step: "
              + (f"{entry['process']}, count {entry['count']}, device {milliseconds(entry['total'])}"
                 if entry else "missing"))


CHECKS: list[tuple[str, Callable[[Any, Check, dict[str, Any]], None]]] = [
    ("device time per block vs kernels", check_device_time_vs_kernels),
    ("device time per operator", check_operator_device_time),
    ("GPU track in the Chrome trace", check_gpu_track),
    ("launch_only verdict", check_launch_only),
    ("gpu_idle verdict", check_gpu_idle),
    ("tree read inside a block keeps its operators", check_tree_read_inside_block),
    ("Profiler(profile_device) default", check_profile_device_session),
    ("Profiler(enable_cupti=True)", check_enable_cupti_session),
    ("GPU memory counter tracks", check_memory_counters),
    ("GPU memory per block", check_block_memory),
    ("worker device time (SubprocessEnvManager)", check_worker_device_time),
]


def markdown(checks: list[Check], header: str) -> str:
    rows = ["| check | result | figures |", "| --- | --- | --- |"]
    rows += [f"| {check.name} | {'PASS' if check.passed else 'FAIL'} | {check.figures.replace('|', '/')} |"
             for check in checks]
    return f"{header}\n\n" + "\n".join(rows) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", type=Path, help="also write the table as markdown to this file")
    arguments = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("gpu_check: torch is not installed: nothing to check")
        return 2
    if not torch.cuda.is_available():
        print(f"gpu_check: torch {torch.__version__} sees no CUDA GPU: nothing to check")
        return 2
    started = time.perf_counter()
    state: dict[str, Any] = {}
    checks = []
    for name, run in CHECKS:
        check = Check(name)
        try:
            run(torch, check, state)
        except Exception as error:  # a check that breaks is a FAIL with its reason, the others go on
            check.set(False, f"raised {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
            traceback.print_exc(limit=3, file=sys.stderr)
        fresh()
        checks.append(check)
        print(f"{'PASS' if check.passed else 'FAIL'}  {name}: {check.figures}", flush=True)
    elapsed = time.perf_counter() - started
    header = (f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, Python "
              f"{sys.version.split()[0]}; {elapsed:.1f} s")
    print()
    print(markdown(checks, header))
    if arguments.markdown is not None:
        arguments.markdown.write_text(markdown(checks, header))
    failed = [check.name for check in checks if not check.passed]
    print(f"{len(checks) - len(failed)} of {len(checks)} checks passed" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
