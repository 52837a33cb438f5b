"""An Nsight Systems capture, exported as SQLite, read as an rlprof timer tree.

``nsys export --type sqlite run.nsys-rep`` writes ``run.sqlite``; ``rlprof analyze run.sqlite``
(and ``report``, ``convert``, ``diff``) read it like a timer file. This is the role of PyTorch's
``torch.autograd.profiler.load_nvprof`` for Nsight Systems, whose exports nvprof's reader
cannot open.

What is read (tables as Nsight Systems names them):

* ``NVTX_EVENTS``: push/pop ranges (``eventType`` 59) and start/end ranges (60) become blocks,
  nested by time on their thread (``globalTid``); the threads of a process are added up by path,
  as rlprof adds up a block's calls. A range's text is ``text`` or, when Nsight registered it,
  ``StringIds.value`` of ``textId``. The numbers PyTorch and rlprof append to a message
  (``aten::addmm, seq = 12, sizes = [...]``, ``update, seq = 3, rlprof trainer (pid 42)``) are
  cut off, so that every call of an op is one block; ranges that carried PyTorch's ``seq`` /
  ``stashed seq`` (``emit_nvtx``'s autograd ranges) are labelled operators.
* ``CUPTI_ACTIVITY_KIND_KERNEL`` (and ``_MEMCPY``, ``_MEMSET``) with
  ``CUPTI_ACTIVITY_KIND_RUNTIME``: each piece of GPU work is joined to the CUDA runtime call that
  launched it by ``correlationId``; the innermost range open on that call's thread when it was
  made launched the work, and gets its device time. Device time goes to the ``device_time``
  section (``mode: "nsys"``: per range, the GPU time of the work launched inside it and its
  nested ranges), and per operator to the ``operators`` section (``device_self``: the work
  launched by the operator itself, its device *self* time).
* Processes (``globalTid >> 24``): the process whose rlprof ranges name it ``trainer`` (their
  NVTX category), else the one whose ranges took longest, is the tree; the others become
  ``workers`` (``worker N`` from their category, else numbered in pid order).

A file that is not SQLite, or SQLite without ``NVTX_EVENTS``, is refused with one line.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler.tree.timer_text import TimerFileError

if TYPE_CHECKING:
    import sqlite3

__all__ = ["read_nsys_sqlite"]

PUSH_POP_RANGE = 59
START_END_RANGE = 60
CATEGORY_NAME = 33
DOMAIN_CREATE = 75

_THREAD_BITS = 24  # globalTid: the process id is above the low 24 bits (Nsight's serialisation)

# What PyTorch (torch.autograd.profiler.emit_nvtx, torch.cuda.nvtx) and rlprof's torch backend
# append to a range's name: cut at the first of these.
_APPENDED = re.compile(r", (?:seq|stashed seq|sizes|dtypes|op_id|input_op_ids) ?=|, rlprof ")
_TORCH_SEQUENCE = re.compile(r", (?:stashed )?seq ?=")
_WORKER_CATEGORY = re.compile(r"^worker (\d+) \(pid \d+\)$")

_NO_RANGES: list = []  # one shared list, so that its start times are cached once (by its id)

_GPU_WORK_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


# Working records, never compared nor printed: without __eq__ and __repr__ to compile as each class
# is made, importing this module (which every run's timers reader does) costs less.
@dataclass(eq=False, repr=False)
class _Range:
    """One NVTX range of a thread: its span, what it is, and the ranges that ran inside it."""

    name: str
    start: int
    end: int
    thread: int
    operator: bool
    category: str
    device_ns: int = 0  # GPU work launched while this range was the innermost open one
    devices: set[int] = field(default_factory=set)
    children: list[_Range] = field(default_factory=list)  # in order of start


@dataclass(eq=False, repr=False)
class _Block:
    """A node of the tree being built: the runs of one path."""

    total_ns: int = 0
    count: int = 0
    min_ns: int | None = None
    max_ns: int = 0
    operator: bool = False
    device_runs: list[int] = field(default_factory=list)  # per run: device time, nested included
    device_self_ns: int = 0
    devices: set[int] = field(default_factory=set)
    children: dict[str, _Block] = field(default_factory=dict)


def read_nsys_sqlite(path: str | Path) -> dict[str, Any]:
    """The timer document (not yet normalized) of the Nsight Systems export at ``path``;
    :class:`TimerFileError` with a one-line reason if it is not one."""
    import sqlite3  # here, not at the top: every reader of timer files imports this module

    source = Path(path)
    try:
        connection = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise TimerFileError(f"{source}: cannot open as SQLite: {error}") from None
    try:
        return _read(connection, source)
    except sqlite3.DatabaseError as error:
        raise TimerFileError(f"{source}: not a readable Nsight Systems export: {error}") from None
    except (TypeError, ValueError) as error:  # a time that is not a number, a name that is not text
        raise TimerFileError(f"{source}: a damaged Nsight Systems export: a value of the wrong kind ({error})") from None
    finally:
        connection.close()


def _read(connection: sqlite3.Connection, source: Path) -> dict[str, Any]:
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "NVTX_EVENTS" not in tables:
        raise TimerFileError(
            f"{source}: not an Nsight Systems export with NVTX ranges: it has no NVTX_EVENTS table "
            "(export with `nsys export --type sqlite`, from a capture made with --trace=nvtx,...)")
    strings = dict(connection.execute("SELECT id, value FROM StringIds")) if "StringIds" in tables else {}
    columns = _columns(connection, "NVTX_EVENTS")
    for needed in ("start", "end", "eventType", "globalTid"):
        if needed not in columns:
            raise TimerFileError(f"{source}: NVTX_EVENTS has no '{needed}' column: not an Nsight Systems export")
    text = "text" if "text" in columns else "NULL"
    text_id = "textId" if "textId" in columns else "NULL"
    domain = "domainId" if "domainId" in columns else "0"
    category = "category" if "category" in columns else "0"
    rows = connection.execute(
        f'SELECT start, "end", eventType, globalTid, {text}, {text_id}, {domain}, {category} FROM NVTX_EVENTS')
    domains: dict[int, str] = {}
    categories: dict[tuple[int, int], str] = {}
    raw_ranges = []
    for start, end, event_type, thread, message, message_id, domain_id, category_id in rows:
        message = message if message is not None else strings.get(message_id)
        if event_type == DOMAIN_CREATE and message is not None:
            domains[domain_id or 0] = message
        elif event_type == CATEGORY_NAME and message is not None:
            categories[(domain_id or 0, category_id or 0)] = message
        elif event_type in (PUSH_POP_RANGE, START_END_RANGE) and end is not None and thread is not None:
            raw_ranges.append((start, end, thread, message or "(unnamed range)", domain_id or 0, category_id or 0))
    ranges = []
    for start, end, thread, message, domain_id, category_id in raw_ranges:
        name = _APPENDED.split(message, 1)[0] or message
        is_torch = domains.get(domain_id) != "rlprof" and bool(_TORCH_SEQUENCE.search(message))
        ranges.append(_Range(name, start, max(start, end), thread, is_torch,
                             categories.get((domain_id, category_id), "")))
    roots = _nest(ranges)
    unattributed_ns, work_count = _attribute_gpu_work(connection, tables, roots)
    return _document(roots, source, unattributed_ns, work_count)


def _columns(connection: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}


def _nest(ranges: list[_Range]) -> dict[int, list[_Range]]:
    """The outermost ranges of each thread, each holding the ranges open within it."""
    by_thread: dict[int, list[_Range]] = {}
    for item in sorted(ranges, key=lambda item: (item.thread, item.start, -item.end)):
        by_thread.setdefault(item.thread, []).append(item)
    roots: dict[int, list[_Range]] = {}
    for thread, items in by_thread.items():
        stack: list[_Range] = []
        outermost = roots.setdefault(thread, [])
        for item in items:
            # Ranges that ended by this one's start are closed; one that overlaps this one
            # without holding it whole (start/end ranges need not nest) is not its parent.
            while stack and (stack[-1].end <= item.start or item.end > stack[-1].end):
                stack.pop()
            (stack[-1].children if stack else outermost).append(item)
            stack.append(item)
    return roots


def _attribute_gpu_work(connection: sqlite3.Connection, tables: set[str],
                        roots: dict[int, list[_Range]]) -> tuple[int, int]:
    """Give each range the GPU work launched while it was the innermost open one on its thread;
    returns the GPU time launched outside every range and the number of pieces of work."""
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables:
        return 0, 0
    unattributed = 0
    work_count = 0
    starts: dict[int, list[int]] = {}
    for table in _GPU_WORK_TABLES:
        if table not in tables:
            continue
        device = "work.deviceId" if "deviceId" in _columns(connection, table) else "0"
        query = (f'SELECT runtime.globalTid, runtime.start, work."end" - work.start, {device} '
                 f"FROM {table} AS work JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS runtime "
                 "ON work.correlationId = runtime.correlationId")
        for thread, launched, duration, device_id in connection.execute(query):
            work_count += 1
            duration = max(0, duration or 0)
            innermost = _innermost(roots.get(thread, _NO_RANGES), launched, starts)
            if innermost is None:
                unattributed += duration
            else:
                innermost.device_ns += duration
                innermost.devices.add(device_id or 0)
    return unattributed, work_count


def _innermost(ranges: list[_Range], moment: int, starts: dict[int, list[int]]) -> _Range | None:
    """The innermost range open at ``moment`` among ``ranges`` (siblings in order of start) and
    their nested ranges: a binary search per level. ``starts`` keeps each list's start times."""
    found = None
    while ranges:
        times = starts.get(id(ranges))
        if times is None:
            times = starts[id(ranges)] = [item.start for item in ranges]
        index = bisect.bisect_right(times, moment) - 1
        if index < 0 or not ranges[index].start <= moment < ranges[index].end:
            break
        found = ranges[index]
        ranges = found.children
    return found


def _process_of(thread: int) -> int:
    return (thread >> _THREAD_BITS) & 0xFFFFFF


def _document(roots: dict[int, list[_Range]], source: Path, unattributed_ns: int, work_count: int) -> dict[str, Any]:
    processes: dict[int, list[_Range]] = {}
    for thread, items in roots.items():
        processes.setdefault(_process_of(thread), []).extend(items)
    if not processes:
        raise TimerFileError(f"{source}: the capture holds no NVTX range (was it made with --trace=nvtx?)")
    main_pid = _main_process(processes)
    tree = _tree_of(processes[main_pid])
    document = _node_document("root", tree)
    document["total"] = sum(child["total"] for child in document["children"])
    document["count"] = 1
    device_ns = _device_total(tree)
    document["metadata"] = {
        "source": f"Nsight Systems export {source.name}",
        "pid": str(main_pid),
        "gpu_work": (f"{work_count} kernels and copies; {device_ns / 1e9:.6f} s launched in ranges, "
                     f"{unattributed_ns / 1e9:.6f} s outside every range") if work_count else "no GPU work in the capture",
    }
    device_entries = list(_device_entries(tree, ()))
    if device_entries:
        document["device_time"] = device_entries
    operator_entries = list(_operator_entries(tree, ()))
    if operator_entries:
        document["operators"] = {"source": "nsys", "device_time": bool(work_count), "record_shapes": False,
                                 "with_flops": False, "profile_memory": False, "operators": operator_entries}
    workers = []
    others = sorted(pid for pid in processes if pid != main_pid)
    for index, pid in enumerate(others):
        worker = _node_document(f"worker {pid}", _tree_of(processes[pid]))
        worker["total"] = sum(child["total"] for child in worker["children"])
        worker["count"] = 1
        worker["worker_id"] = _worker_number(processes[pid], index)
        worker["pid"] = pid
        workers.append(worker)
    if workers:
        document["workers"] = workers
    return document


def _main_process(processes: dict[int, list[_Range]]) -> int:
    for pid, items in processes.items():
        if any(item.category.startswith("trainer") for item in items):
            return pid
    return max(processes, key=lambda pid: (sum(item.end - item.start for item in processes[pid]), -pid))


def _worker_number(items: list[_Range], index: int) -> int:
    for item in items:
        match = _WORKER_CATEGORY.match(item.category)
        if match:
            return int(match.group(1))
    return index


def _tree_of(items: list[_Range]) -> _Block:
    root = _Block()
    for item in items:
        _add(root, item)
    return root


def _add(parent: _Block, item: _Range) -> int:
    """Add the range's run under ``parent``; returns its device time, nested ranges included."""
    block = parent.children.setdefault(item.name, _Block())
    duration = item.end - item.start
    block.total_ns += duration
    block.count += 1
    block.min_ns = duration if block.min_ns is None else min(block.min_ns, duration)
    block.max_ns = max(block.max_ns, duration)
    block.operator = block.operator or item.operator
    block.device_self_ns += item.device_ns
    block.devices |= item.devices
    device = item.device_ns + sum(_add(block, child) for child in item.children)
    block.device_runs.append(device)
    return device


def _node_document(name: str, block: _Block) -> dict[str, Any]:
    node: dict[str, Any] = {"name": name, "total": block.total_ns / 1e9, "count": block.count}
    if block.min_ns is not None:
        node["min"] = block.min_ns / 1e9
        node["max"] = block.max_ns / 1e9
    if block.operator:
        node["object_type"] = "operator"
    node["children"] = [_node_document(child_name, child) for child_name, child in block.children.items()]
    return node


def _device_total(root: _Block) -> int:
    return sum(sum(child.device_runs) for child in root.children.values())


def _device_entries(block: _Block, path: tuple[str, ...]):
    for name, child in block.children.items():
        child_path = (*path, name)
        total = sum(child.device_runs)
        if total:
            devices = sorted(child.devices) or [0]
            yield {"path": list(child_path), "device": f"cuda:{devices[0]}", "mode": "nsys",
                   "total": total / 1e9, "min": min(child.device_runs) / 1e9,
                   "max": max(child.device_runs) / 1e9, "count": child.count}
        yield from _device_entries(child, child_path)


def _operator_entries(block: _Block, path: tuple[str, ...]):
    for name, child in block.children.items():
        child_path = (*path, name)
        if child.operator:
            yield {"path": list(child_path), "flops": 0, "cpu_memory_bytes": 0,
                   "device_self": child.device_self_ns / 1e9}
        yield from _operator_entries(child, child_path)
