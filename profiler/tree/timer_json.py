"""The timer-tree JSON file: where a run's goes, writing it atomically, and reading it back.

Reading, ours or ML-Agents' layout, gives every reader one normalized shape, each field checked
(:mod:`profiler.tree.tree_reader`); the bounded read of the bytes themselves, any path and gzip
included, is :mod:`profiler.tree.timer_text`'s. The sections are described in docs/formats.md.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from profiler.tree import strict_json
from profiler.tree.atomic_file import write_atomically
from profiler.tree.strict_json import named_reading
from profiler.tree.timer_text import MAX_FILE_DEPTH, TimerFileError, is_sqlite_file, read_timer_document
from profiler.tree.timer_tree import get_timer_tree
from profiler.tree.tree_reader import normalize_timing_tree
from profiler.timing import accelerator
from profiler.timing.timers import TimerStack

__all__ = [
    "MAX_FILE_DEPTH",
    "TimerFileError",
    "check_run_id",
    "load_timing_tree",
    "normalize_timing_tree",
    "timers_json_path",
    "write_and_read_timing_tree",
    "write_timing_tree",
    "write_tree",
]

TIMELINE_TEXT_VERSION = 1
"""The interface version ``_timeline_text.c`` must say (its ``TIMELINE_TEXT_VERSION``)."""

# A thread's spans' text in C (the JSON encoder's text, which stays the reference): None with
# RLPROF_PURE_PYTHON=1 or where no compiler built it.
_timeline_text, _ = accelerator.load_extension("profiler.tree._timeline_text", TIMELINE_TEXT_VERSION,
                                               "the timers file's C helper")
_COMPACT = (",", ":")


def timers_json_path(summaries_dir: str | os.PathLike[str], run_id: str) -> Path:
    """Where a run's timers go: ``{summaries_dir}/{run_id}_timers.json``.

    Raises ``ValueError`` for a ``run_id`` that is not a plain name (see :func:`check_run_id`).
    """
    return Path(summaries_dir) / f"{check_run_id(run_id)}_timers.json"


def check_run_id(run_id: Any) -> str:
    """``run_id`` when it is a name for files inside the summaries folder; else ``ValueError``.

    A run's files are named ``{run_id}_timers.json`` and so on: a ``run_id`` holding a path
    separator, or ``.``/``..``, would put them outside the folder (``../../x`` two levels up).
    Every writer of run files checks it here: ``set_config``, the env managers, ``rlprof run``.
    """
    if not isinstance(run_id, str) or not run_id or "/" in run_id or "\\" in run_id or run_id in (".", ".."):
        raise ValueError(f"run_id must be a non-empty name without path separators, got {run_id!r}")
    return run_id


def write_timing_tree(
    path: str | os.PathLike[str],
    timer_stack: TimerStack | None = None,
    *,
    include_threads: bool = True,
    layout: str = "rlprof",
    mergers: Sequence[Any] | None = None,
) -> Path:
    """Dump a stack's tree (the calling thread's by default) as JSON at ``path``, atomically.

    Other threads' trees are included under ``thread:<name>`` nodes unless ``include_threads`` is
    false. ``layout="mlagents"`` writes the layout of ML-Agents' ``timers.json`` (children keyed
    by name) for tools that read only that; rlprof reads both. ``mergers`` are those whose workers
    the file lists (default: every merger attached to the stack). The file is strict JSON: NaN and
    infinite readings are written by name (see :mod:`profiler.tree.strict_json`). Returns the path
    written.
    """
    return write_tree(
        path, get_timer_tree(timer_stack, include_threads=include_threads, layout=layout, mergers=mergers)
    )


def write_tree(path: str | os.PathLike[str], tree: dict[str, Any]) -> Path:
    """Write a dump already taken (``get_timer_tree``) at ``path``, atomically, as strict JSON.

    For writers of several outputs from one moment of the run (``profiler.dump``): the timer file
    and the trace then agree to the call.
    """
    return write_atomically(path, _dump_text(_with_named_readings(tree)))


def write_and_read_timing_tree(
    path: str | os.PathLike[str], timer_stack: TimerStack | None = None
) -> tuple[Path, dict[str, Any]]:
    """:func:`write_timing_tree` (other threads' trees included), and the tree :func:`load_timing_tree`
    reads from the file written, without reading the file back.

    ``rlprof run`` makes its trace, report and analysis from the file it writes, so the three
    agree. Reading back a long run's file was the largest stage of its exit: decoding the
    timeline (6 MB after 32,768 CleanRL steps over ``AsyncVectorEnv``) took 80 of its 120 ms.
    Here the sections but the timeline are decoded from their text (a few kB). The timeline's rows
    (lists of names, floats and detail objects) are taken as they are, since their text decodes
    to equal values, unless the text had to name something for strict JSON (a lone surrogate in a
    name, a non-finite detail): that timeline is decoded from its text.
    ``tests/profiler/tree/test_timer_json.py`` compares the two reads.
    """
    dump = _with_named_readings(get_timer_tree(timer_stack, include_threads=True))
    sections_text, timeline_text = _section_texts(dump)
    written = write_atomically(path, _file_text(sections_text, timeline_text))
    document = json.loads(sections_text)
    if timeline_text is not None:
        named = any(token in timeline_text for token in _NAMED_FOR_STRICT_JSON)
        document["timeline"] = json.loads(timeline_text) if named else dump["timeline"]
    return written, normalize_timing_tree(document)


# What strict_json writes in place of a lone surrogate (its escape, the backslash escaped) or of a
# non-finite float; a name that only looks so costs a decode, nothing else.
_NAMED_FOR_STRICT_JSON = ("\\\\u", '"NaN"', '"Infinity"', '"-Infinity"')


def _dump_text(tree: dict[str, Any]) -> str:
    """The file's text (see :func:`_file_text`)."""
    return _file_text(*_section_texts(tree))


def _section_texts(tree: dict[str, Any]) -> tuple[str, str | None]:
    """The text of the tree's sections but the timeline, indented for a reader, and the text of
    its timeline (None without one), compact.

    Indented, each span's three fields took a line each, and ``json`` can only indent with its
    pure-Python encoder: a CleanRL run of 18,000 spans spent 99 ms of ``rlprof run``'s exit
    writing a 2.5 MB file. The timeline compact, through the C encoder, took 28 ms and 1.0 MB
    (``benchmarks/run_breakdown.py`` splits the exit).
    """
    timeline = tree.get("timeline")
    if timeline is None:
        return strict_json.dumps(tree, indent=2), None
    sections = strict_json.dumps({key: value for key, value in tree.items() if key != "timeline"}, indent=2)
    return sections, _compact_timeline(timeline)


def _file_text(sections_text: str, timeline_text: str | None) -> str:
    """The sections, the timeline (if any) as their last key: readers take the sections by name,
    and the timeline's place among them changes nothing."""
    if timeline_text is None:
        return sections_text
    # An indented object ends with "\n}" (an empty one is "{}"): the timeline goes in as its last key.
    opening = "{\n" if sections_text == "{}" else sections_text[:-2] + ",\n"
    return f'{opening}  "timeline": {timeline_text}\n}}'


def _compact_timeline(timeline: dict[str, Any]) -> str:
    """``strict_json.dumps(timeline, separators=(",", ":"))``, each thread's spans written by the C
    helper where it was built (the same text: a time's ``repr``, see ``_timeline_text.c``)."""
    if _timeline_text is None or not _has_text_keys(timeline, "processes"):
        return strict_json.dumps(timeline, separators=_COMPACT)

    def thread_text(thread: Any) -> str:
        spans = thread.get("spans") if isinstance(thread, dict) and _has_text_keys(thread) else None
        written = _timeline_text.spans_text(spans, strict_json.dumps) if type(spans) is list else None
        if written is None:
            return strict_json.dumps(thread, separators=_COMPACT)
        return _object_text(thread, {"spans": lambda _: written})

    def process_text(process: Any) -> str:
        if not isinstance(process, dict) or not _has_text_keys(process) or type(process.get("threads")) is not list:
            return strict_json.dumps(process, separators=_COMPACT)
        return _object_text(process, {"threads": lambda threads: f"[{','.join(map(thread_text, threads))}]"})

    processes = timeline["processes"]
    if type(processes) is not list:
        return strict_json.dumps(timeline, separators=_COMPACT)
    return _object_text(timeline, {"processes": lambda _: f"[{','.join(map(process_text, processes))}]"})


def _has_text_keys(mapping: dict[Any, Any], *required: str) -> bool:
    return all(type(key) is str for key in mapping) and all(key in mapping for key in required)


def _object_text(mapping: dict[str, Any], written: dict[str, Any]) -> str:
    """The compact strict JSON of ``mapping``, the values of ``written``'s keys by its functions."""
    return "{" + ",".join(
        f"{strict_json.dumps(key)}:"
        + (written[key](value) if key in written else strict_json.dumps(value, separators=_COMPACT))
        for key, value in mapping.items()
    ) + "}"


def _with_named_readings(tree: dict[str, Any]) -> dict[str, Any]:
    """The tree with non-finite gauge and counter readings written by name.

    Only the small gauge sections and the counter rows holding such a reading are copied, so a
    diverging loss does not make the dump copy a large timeline.
    """
    named = dict(tree)
    named["gauges"] = _named_gauges(tree.get("gauges", {}))
    if "workers" in tree:
        named["workers"] = [
            dict(worker, gauges=_named_gauges(worker.get("gauges", {}))) for worker in tree["workers"]
        ]
    timeline = tree.get("timeline")
    if timeline is not None:
        processes = []
        for process in timeline["processes"]:
            counters = process.get("counters", [])
            if not all(math.isfinite(counter[2]) for counter in counters):
                counters = [
                    [name, at, named_reading(value), *details] for name, at, value, *details in counters
                ]
                process = dict(process, counters=counters)
            processes.append(process)
        named["timeline"] = dict(timeline, processes=processes)
    return named


def _named_gauges(gauges: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        name: {field: named_reading(value) if field != "count" else value for field, value in gauge.items()}
        for name, gauge in gauges.items()
    }


def load_timing_tree(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a timer JSON file (rlprof's or ML-Agents') into the normalized shape; an Nsight
    Systems SQLite export (``nsys export --type sqlite``) is read as one too.

    Raises :class:`TimerFileError` with a one-line reason for a missing file, text that is not
    JSON, JSON that is not a timer tree (including negative or non-finite times, counts beyond
    64 bits, names that are not valid Unicode, nesting deeper than :data:`MAX_FILE_DEPTH`), and a
    file too large for the memory available (see :mod:`profiler.tree.memory_check`).
    """
    source = Path(path)
    if is_sqlite_file(source):  # an Nsight Systems SQLite export reads as a tree too
        from profiler.tree.nsys_sqlite import read_nsys_sqlite

        document = read_nsys_sqlite(source)
    else:
        document = read_timer_document(source)
    try:
        return normalize_timing_tree(document)
    except TimerFileError as error:
        raise TimerFileError(f"{source}: {error}") from None
