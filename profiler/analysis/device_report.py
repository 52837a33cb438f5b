"""Device (GPU) time in the analysis: each device-timed block beside its host time, and the two
verdicts device time supports.

Read from the dump only: its ``device_time`` section (``hierarchical_timer(name, device=...)``,
``set_config(device=...)``, ``Profiler(profile_device=True)``; env workers' entries are merged
into it with their worker's label) and, where PyTorch's operators were recorded with CUDA
activity, the kernels' device self time of the ``operators`` section.

The rules, each with its thresholds:

``gpu_idle``
    The GPU was busy for less than :data:`GPU_MAX_BUSY_SHARE` of the run's wall time. Busy time is
    the sum of the kernels' times where PyTorch's operators were recorded with device time (what
    the GPU ran), else the device time of the outermost device-timed blocks: an upper bound, since
    a block's pair of events also spans the time its stream sat waiting for the host. Told only
    for a run that used a GPU (some device time), and only when the idle time reaches
    :data:`GPU_MIN_IDLE_SECONDS`. The cost is the idle time.
``launch_only``
    A block timed on a device in event mode whose device time is at least
    :data:`LAUNCH_MIN_RATIO` times its host time, the difference reaching
    :data:`LAUNCH_MIN_SHARE` of the wall time: its host time measured the launches of its kernels,
    not their work (CUDA runs them asynchronously). Blocks timed with ``cuda_sync=True`` are
    never told: their host time waited for the device. The cost is the device time the host
    figure missed.
"""

from __future__ import annotations

from typing import Any, Protocol

from profiler.analysis.text_format import format_percent, format_seconds
from profiler.records import Record

__all__ = [
    "GPU_IDLE",
    "GPU_MAX_BUSY_SHARE",
    "GPU_MIN_IDLE_SECONDS",
    "LAUNCH_MIN_RATIO",
    "LAUNCH_MIN_SHARE",
    "LAUNCH_ONLY",
    "DeviceBlock",
    "device_blocks",
    "device_document",
    "device_text",
    "device_verdicts",
    "kernel_seconds",
]

GPU_IDLE = "gpu_idle"
LAUNCH_ONLY = "launch_only"

GPU_MAX_BUSY_SHARE = 0.5
"""The GPU idle verdict is told when the GPU was busy for less than half of the wall time."""

GPU_MIN_IDLE_SECONDS = 0.01
"""... and it sat idle at least this long: a run of a few milliseconds tells nothing."""

LAUNCH_MIN_RATIO = 3.0
"""A block measured only its launches when its device time is at least three times its host time."""

LAUNCH_MIN_SHARE = 0.01
"""... and the device time its host time missed is at least 1% of the wall time."""


class JudgedRun(Protocol):
    """What the rules read of the run being judged (profiler.analysis.verdicts' ``_Run``)."""

    tree: dict[str, Any]

    @property
    def wall(self) -> float: ...

    def verdict(self, kind: str, title: str, cost: float, evidence: dict[str, Any],
                suggestion: str) -> Any: ...


class DeviceBlock(Record):
    """One block timed on a device: its device figures beside its host total."""

    path: tuple[str, ...]
    device: str
    mode: str
    device_seconds: float
    count: int
    host_seconds: float | None
    process: str = "trainer"

    @property
    def name(self) -> str:
        return "/".join(self.path)

    def as_dict(self) -> dict[str, Any]:
        return {"path": list(self.path), "process": self.process, "device": self.device, "mode": self.mode,
                "device_total": self.device_seconds, "count": self.count, "host_total": self.host_seconds}


def device_blocks(tree: dict[str, Any]) -> list[DeviceBlock]:
    """The dump's device-timed blocks, the trainer's then each worker's; malformed entries are
    skipped (the section is checked here, where it is read)."""
    blocks = []
    for entry in tree.get("device_time") or []:
        block = _block(entry, tree)
        if block is not None:
            blocks.append(block)
    return blocks


def _block(entry: Any, tree: dict[str, Any]) -> DeviceBlock | None:
    if not isinstance(entry, dict):
        return None
    path, total, count = entry.get("path"), entry.get("total"), entry.get("count")
    if (not isinstance(path, list) or not path or not all(isinstance(name, str) for name in path)
            or isinstance(total, bool) or not isinstance(total, (int, float)) or not total >= 0
            or type(count) is not int):
        return None
    process = entry.get("process") if isinstance(entry.get("process"), str) else "trainer"
    node = _node_at(tree, path) if process == "trainer" else None
    host = node.get("total") if node is not None else entry.get("host_total")
    return DeviceBlock(tuple(path), str(entry.get("device", "cuda")), str(entry.get("mode", "events")),
                       float(total), count, float(host) if isinstance(host, (int, float)) else None, process)


def _node_at(tree: dict[str, Any], path: list[str]) -> dict[str, Any] | None:
    node: dict[str, Any] | None = tree
    for name in path:
        node = next((child for child in (node or {}).get("children", []) if child.get("name") == name), None)
        if node is None:
            return None
    return node


def kernel_seconds(tree: dict[str, Any]) -> float | None:
    """The kernels' time PyTorch's profiler saw (the operators' device self times), or None where
    operators were not recorded with device time."""
    section = tree.get("operators")
    if not section or not section.get("device_time"):
        return None
    return sum(entry.get("device_self", 0.0) for entry in section.get("operators", []))


def _outermost(blocks: list[DeviceBlock]) -> list[DeviceBlock]:
    paths = {(block.process, block.path) for block in blocks}
    return [block for block in blocks
            if not any((block.process, block.path[:depth]) in paths for depth in range(1, len(block.path)))]


def device_verdicts(run: JudgedRun) -> list[Any]:
    """The ``gpu_idle`` and ``launch_only`` verdicts (see the module docstring)."""
    return [*_gpu_idle(run), *_launch_only(run)]


def _gpu_idle(run: JudgedRun) -> list[Any]:
    wall = run.wall
    blocks = [block for block in device_blocks(run.tree) if block.process == "trainer"]
    kernels = kernel_seconds(run.tree)
    if kernels:
        busy, measured_by = kernels, "the kernels' time (PyTorch's profiler, CUDA activity)"
    elif blocks:
        busy = sum(block.device_seconds for block in _outermost(blocks))
        measured_by = "the device time of the outermost device-timed blocks (an upper bound)"
    else:
        return []
    if wall <= 0 or busy >= GPU_MAX_BUSY_SHARE * wall or wall - busy < GPU_MIN_IDLE_SECONDS:
        return []
    idle = wall - busy
    return [run.verdict(
        GPU_IDLE,
        f"the GPU was idle for {format_percent(idle / wall)} of the run: busy "
        f"{format_seconds(busy)} of {format_seconds(wall)}",
        idle,
        {"busy_seconds": busy, "wall_seconds": wall, "busy_share": busy / wall, "measured_by": measured_by,
         "threshold_busy_share": GPU_MAX_BUSY_SHARE},
        "the trainer's host work (environment steps, data preparation, Python between launches) "
        "leaves the GPU waiting: overlap it with the GPU's work (more envs per step, asynchronous "
        "collection, larger batches), or look at the blocks with the most host self time",
    )]


def _launch_only(run: JudgedRun) -> list[Any]:
    wall = run.wall
    verdicts = []
    for block in device_blocks(run.tree):
        host = block.host_seconds
        if block.mode != "events" or host is None or wall <= 0:
            continue
        missed = block.device_seconds - host
        if block.device_seconds < LAUNCH_MIN_RATIO * host or missed < LAUNCH_MIN_SHARE * wall:
            continue
        where = "" if block.process == "trainer" else f" in {block.process}"
        verdicts.append(run.verdict(
            LAUNCH_ONLY,
            f"{block.name}{where}: its host time ({format_seconds(host)}) measured only kernel "
            f"launches; its GPU work took {format_seconds(block.device_seconds)}",
            missed,
            {"block": list(block.path), "process": block.process, "device": block.device,
             "host_seconds": host, "device_seconds": block.device_seconds,
             "ratio": block.device_seconds / host if host > 0 else None,
             "threshold_ratio": LAUNCH_MIN_RATIO},
            "read this block's device time, not its host time, for what it costs; the host time of "
            "a later block that waits for the GPU (a .item(), a copy to the CPU) holds the rest",
        ))
    return verdicts


def device_text(tree: dict[str, Any]) -> str | None:
    """The analysis's device section: each device-timed block's host and device time; None for a
    run with no device time, and one line saying why where operators were recorded without it."""
    blocks = device_blocks(tree)
    operators = tree.get("operators") or {}
    lines = []
    if blocks:
        lines.append("Device time (blocks timed on a GPU):")
        lines.append(f"  {'block':<40} {'process':<12} {'device':<8} {'host':>10} {'device':>10} {'count':>7}")
        for block in blocks:
            host = "-" if block.host_seconds is None else format_seconds(block.host_seconds)
            lines.append(f"  {block.name[:40]:<40} {block.process[:12]:<12} {block.device[:8]:<8} "
                         f"{host:>10} {format_seconds(block.device_seconds):>10} {block.count:>7}")
    kernels = kernel_seconds(tree)
    if kernels is not None:
        lines.append(f"Kernels recorded by PyTorch's profiler: {format_seconds(kernels)} of GPU time")
    elif operators.get("device_time_unavailable"):
        lines.append(f"Operators: {operators['device_time_unavailable']}")
    return "\n".join(lines) if lines else None


def device_document(tree: dict[str, Any]) -> dict[str, Any]:
    """The analysis's device section as JSON: blocks, kernels' time, and why it is missing."""
    operators = tree.get("operators") or {}
    return {"blocks": [block.as_dict() for block in device_blocks(tree)],
            "kernel_seconds": kernel_seconds(tree),
            "operators_device_time_unavailable": operators.get("device_time_unavailable")}
