"""Reading the dump's ``operators`` section (see docs/formats.md): what PyTorch's profiler gave of
each operator block beyond its time (:mod:`profiler.gpu.torch_ops` writes it).

Kept apart from :mod:`profiler.tree.timer_json`, which calls :func:`read_operators` and turns its
``ValueError`` into a ``TimerFileError`` naming the file.
"""

from __future__ import annotations

from typing import Any

__all__ = ["read_operators"]

_FLAGS = ("device_time", "record_shapes", "with_flops", "profile_memory", "with_stack", "record_outputs")
_COUNTED = (("input_shapes", "other_shapes"), ("input_dtypes", "other_dtypes"), ("backtraces", "other_backtraces"),
            ("output_shapes", "other_output_shapes"))
"""Calls counted by their shapes, dtypes, call stack, output shapes (as text), and the calls past
the ones kept."""
_SAYINGS = ("device_time_unavailable", "record_outputs_unavailable", "outputs_lost")
"""Sentences the recording wrote about itself: why a figure is missing."""
_MAX_WHOLE = 2**63 - 1


def read_operators(section: Any) -> dict[str, Any]:
    """The section checked and normalized; raises ``ValueError`` saying what is wrong where."""
    if not isinstance(section, dict) or not isinstance(section.get("operators"), list):
        raise ValueError("'operators' must be an object with a list 'operators'")
    normalized: dict[str, Any] = {"source": _text(section.get("source", "torch.profiler"), "operators.source")}
    for flag in _FLAGS:
        value = section.get(flag, False)
        if not isinstance(value, bool):
            raise ValueError(f"operators.{flag}: must be true or false")
        normalized[flag] = value
    for saying in _SAYINGS:
        if section.get(saying) is not None:
            normalized[saying] = _text(section[saying], f"operators.{saying}")
    if "outputs_unmatched" in section:
        normalized["outputs_unmatched"] = _whole(section["outputs_unmatched"], "operators.outputs_unmatched",
                                                 signed=False)
    normalized["operators"] = [
        _operator(entry, f"operators.operators[{index}]") for index, entry in enumerate(section["operators"])
    ]
    return normalized


def _operator(entry: Any, where: str) -> dict[str, Any]:
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), list) or not entry["path"]:
        raise ValueError(f"{where}: must be an object with a 'path', a list of block names")
    operator: dict[str, Any] = {
        "path": [_text(name, f"{where}.path") for name in entry["path"]],
        "flops": _whole(entry.get("flops", 0), f"{where}.flops", signed=False),
        "cpu_memory_bytes": _whole(entry.get("cpu_memory_bytes", 0), f"{where}.cpu_memory_bytes", signed=True),
    }
    for counts_key, others_key in _COUNTED:
        counts = entry.get(counts_key, {})
        if not isinstance(counts, dict):
            raise ValueError(f"{where}.{counts_key}: must be an object of call counts by text")
        operator[counts_key] = {
            _text(key, f"{where}.{counts_key}"): _whole(count, f"{where}.{counts_key}", signed=False)
            for key, count in counts.items()
        }
        operator[others_key] = _whole(entry.get(others_key, 0), f"{where}.{others_key}", signed=False)
    if "tensor_bytes" in entry:
        operator["tensor_bytes"] = _whole(entry["tensor_bytes"], f"{where}.tensor_bytes", signed=False)
    for key in ("device_self", "device_total"):
        if key in entry:
            operator[key] = _seconds(entry[key], f"{where}.{key}")
    return operator


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        raise ValueError(f"{where}: must be a number of seconds >= 0, got {str(value)[:40]}")
    return float(value)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: must be a string, got {type(value).__name__}")
    return value


def _whole(value: Any, where: str, *, signed: bool) -> int:
    low = -_MAX_WHOLE if signed else 0
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= _MAX_WHOLE:
        kind = "a whole number" if signed else "a whole number >= 0"
        raise ValueError(f"{where}: must be {kind}, got {str(value)[:40]}")
    return value
