"""Operators' outputs, from PyTorch's execution trace: ``out_shapes`` and the tensor bytes behind
``bandwidth`` (MegEngine's ``profile_analyze`` columns), when operators are recorded with
``record_outputs`` (:func:`profiler.gpu.torch_ops.start_operators`).

PyTorch's profiler events carry their operator's *input* shapes only. Its execution trace
(``torch.profiler.ExecutionTraceObserver``, run beside the profiler through
``torch.profiler.profile(execution_trace_observer=...)``) records, for every operator call, its
inputs *and outputs*: shapes, types, and for each tensor its element count and element size. It
writes them to a JSON file as a tree of calls: each node names the call it ran inside
(``ctrl_deps``), rlprof's block annotations (``rlprof:<key> <name>``) included.

That tree is the one :func:`profiler.gpu.torch_ops.fold_events` builds from the profiler's events
(an operator under the innermost annotation or operator open when it started, else under the
root): both come from the same ``RecordFunction`` calls on the same thread. So no identifier has to
be matched (the events' ``correlation_id`` and the trace's ``rf_id`` are different counters in
torch 2.13): each traced call's path, its block then its operator callers, names the operator
block the profiler's event was folded into. A traced call whose path names no such block (a
call the profiler did not report) is counted in ``unmatched`` and left out.

**What the bytes are.** The sizes of the tensors a call took and returned (elements times element
size, inputs and outputs), summed over its calls: what an operator would read and write if it
touched each tensor once. Not the memory traffic it caused: a view or a broadcast moves less than
its size says, a kernel that reads its input twice or misses the cache moves more. ``bandwidth`` is
these bytes per second of the operator's time, as ``FLOPS`` is.

**One per process.** PyTorch runs one execution trace per process, and a second registration
only logs that one is registered: a program that runs its own ``ExecutionTraceObserver`` must not
ask rlprof for ``record_outputs`` too (its trace would receive rlprof's sessions).

**Cost.** The execution trace serializes every call to its file, and the file is read back at each
fold: on a loaded 2-core machine a few times the profiler's own cost per operator (see
``benchmarks/operator_overhead.py``). PyTorch also prints one line to stderr each time a trace
starts and stops (its C++ log), which rlprof cannot silence.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from profiler.gpu.operator_figures import OperatorFigures, figures_of
from profiler.timing.timers import TimerNode

__all__ = ["ExecutionTrace", "fold_execution_trace", "outputs_sayings", "tensor_bytes"]

_STRUCTURE_PREFIX = "[pytorch|profiler|execution_trace|"
"""The names of the trace's own nodes (the process, each thread): not calls."""


class ExecutionTrace:
    """One execution trace, to a temporary file, for one session of PyTorch's profiler."""

    def __init__(self, torch_module: Any) -> None:
        handle, self.path = tempfile.mkstemp(prefix="rlprof-execution-trace-", suffix=".json")
        os.close(handle)
        self.observer = torch_module.profiler.ExecutionTraceObserver().register_callback(self.path)
        if not self.observer.is_registered:
            os.unlink(self.path)
            raise RuntimeError("PyTorch's execution trace could not be started (it could not open "
                               f"{self.path}): output shapes and tensor bytes are not recorded")

    def abandon_in_forked_child(self) -> None:
        """In a process forked while tracing: stop tracing without finishing the file, which the
        child shares with its parent (its calls would land in the parent's trace, and finishing
        it there would cut the parent's short). The observer is told it is no longer
        registered, so that collecting it does not finish the file either."""
        self.observer.stop()
        self.observer._registered = False  # torch's own flag: unregister_callback() then does nothing

    def read_nodes(self) -> list[dict[str, Any]]:
        """End the trace and return its nodes; the file is removed. Raises ``ValueError`` saying
        why when the file cannot be read as a trace (a process forked while tracing that exited
        through C++'s exit handlers finished it in the middle of its parent's)."""
        try:
            self.observer.unregister_callback()
            with open(self.path, encoding="utf-8") as file:
                document = json.load(file)
        except (OSError, ValueError) as error:
            raise ValueError(f"PyTorch's execution trace could not be read ({str(error)[:80]})") from error
        finally:
            try:
                os.unlink(self.path)
            except OSError:
                pass
        nodes = document.get("nodes") if isinstance(document, dict) else None
        if not isinstance(nodes, list):
            raise ValueError("PyTorch's execution trace has no list of nodes")
        return nodes


def fold_execution_trace(nodes: list[dict[str, Any]], blocks: dict[int, TimerNode], root: TimerNode,
                         figures: dict[TimerNode, OperatorFigures], annotation_key: Any,
                         annotation_prefix: str) -> tuple[int, int]:
    """Add each traced call's output shapes and tensor bytes to its operator block's figures;
    return (calls matched, calls whose operator block is not in the tree)."""
    by_id = {node.get("id"): node for node in nodes if isinstance(node, dict)}
    matched = unmatched = 0
    for node in by_id.values():
        name = node.get("name", "")
        if not isinstance(name, str) or name.startswith((_STRUCTURE_PREFIX, annotation_prefix)):
            continue
        operator = _operator_block(node, by_id, blocks, root, annotation_key, annotation_prefix)
        if operator is None:
            unmatched += 1
            continue
        outputs = node.get("outputs") or {}
        inputs = node.get("inputs") or {}
        entry = figures_of(figures, operator)
        entry.add_output_shapes(str(outputs.get("shapes", [])))
        entry.tensor_bytes += tensor_bytes(inputs) + tensor_bytes(outputs)
        matched += 1
    return matched, unmatched


def _operator_block(node: dict[str, Any], by_id: dict[Any, dict[str, Any]], blocks: dict[int, TimerNode],
                    root: TimerNode, annotation_key: Any, annotation_prefix: str) -> TimerNode | None:
    """The tree's operator block of a traced call: its operator callers' names, up to the
    innermost rlprof annotation (its block) or the thread (the root). None if not in the tree."""
    names = [node["name"]]
    parent = by_id.get(node.get("ctrl_deps"))
    block = root
    seen = 0
    while parent is not None and seen < len(by_id):
        parent_name = parent.get("name", "")
        if not isinstance(parent_name, str) or parent_name.startswith(_STRUCTURE_PREFIX):
            break
        if parent_name.startswith(annotation_prefix):
            block = blocks.get(annotation_key(parent_name))
            if block is None:
                return None
            break
        names.append(parent_name)
        parent = by_id.get(parent.get("ctrl_deps"))
        seen += 1
    operator: TimerNode | None = block
    for name in reversed(names):
        operator = operator.children.get(name) if operator is not None else None
    return operator


def tensor_bytes(arguments: dict[str, Any]) -> int:
    """The bytes of the tensors among a call's inputs or outputs (lists of tensors included), as
    the execution trace describes them: each tensor's value is ``[tensor id, storage id, offset,
    element count, element size, device]``."""
    total = 0
    for kind, value in zip(arguments.get("types", []), arguments.get("values", [])):
        if isinstance(kind, str) and "Tensor" in kind:
            total += _bytes_of(value)
    return total


def _bytes_of(value: Any) -> int:
    if not isinstance(value, list):
        return 0
    if (len(value) == 6 and isinstance(value[5], str)
            and all(type(part) is int for part in value[:5])):
        return max(0, value[3]) * max(0, value[4])
    return sum(_bytes_of(part) for part in value)


def outputs_sayings(recordings: list[Any]) -> dict[str, Any]:
    """What the dump's ``operators`` section says of the recordings' traces, where anything went
    wrong (see docs/formats.md): ``record_outputs_unavailable`` (no trace could be started),
    ``outputs_lost`` (a trace could not be read back), ``outputs_unmatched`` (traced calls whose
    operator block was not in the tree)."""
    sayings: dict[str, Any] = {}
    for key, attribute in (("record_outputs_unavailable", "outputs_unavailable"), ("outputs_lost", "outputs_lost")):
        said = next((getattr(recording, attribute) for recording in recordings if getattr(recording, attribute)), None)
        if said is not None:
            sayings[key] = said
    unmatched = sum(recording.outputs_unmatched for recording in recordings)
    if unmatched:
        sayings["outputs_unmatched"] = unmatched
    return sayings
