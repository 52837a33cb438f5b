"""The files a ``profiler.dump()`` writes, and where: one moment of the run in every format asked for.

Where each output goes follows the settings (see :class:`profiler.control.profiler_settings.ProfilerSettings`)
so that both habits work: MXNet's (``filename`` is the trace, ``profile.json`` by default) and
ML-Agents' (``{summaries_dir}/{run_id}_timers.json``). With ``stem`` standing for
``{summaries_dir}/{run_id}`` when a summaries folder is set, and otherwise for ``filename``
without its ``.json``:

========== =========================================================================
format     path
========== =========================================================================
timers     ``{summaries_dir}/{run_id}_timers.json``, else ``{stem}_timers.json``
chrome     ``filename`` when given, else ``{stem}_trace.json`` with a summaries folder,
           else ``profile.json``
speedscope ``{stem}.speedscope.json``
collapsed  ``{stem}.collapsed.txt``
html       ``{stem}.html``
========== =========================================================================

Every file is replaced atomically, so a reader (or a crash) never meets half of one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiler.control.profiler_settings import ProfilerSettings
from profiler.tree.timer_json import timers_json_path, write_tree
from profiler.tree.timer_tree import get_timer_tree
from profiler.timing.timers import TimerStack

__all__ = ["output_paths", "write_formats", "write_outputs"]

_SUFFIXES = {"speedscope": ".speedscope.json", "collapsed": ".collapsed.txt", "html": ".html"}


def output_paths(settings: ProfilerSettings) -> dict[str, Path]:
    """Format name -> the file it is written to, for each of ``settings.formats``."""
    if settings.summaries_dir is not None:
        stem = str(settings.summaries_dir / settings.run_id)
    else:
        filename = settings.filename
        stem = filename[: -len(".json")] if filename.endswith(".json") else filename
    paths = {}
    for format_name in settings.formats:
        if format_name == "timers":
            paths[format_name] = (
                timers_json_path(settings.summaries_dir, settings.run_id)
                if settings.summaries_dir is not None
                else Path(f"{stem}_timers.json")
            )
        elif format_name == "chrome":
            use_stem = settings.summaries_dir is not None and not settings.filename_given
            paths[format_name] = Path(f"{stem}_trace.json") if use_stem else Path(settings.filename)
        else:
            paths[format_name] = Path(stem + _SUFFIXES[format_name])
    return paths


def write_outputs(settings: ProfilerSettings, timer_stack: TimerStack) -> list[Path]:
    """Take the stack's tree once (its threads and merged workers included) and write it in every
    format of ``settings``; returns the paths written (see :func:`write_formats`)."""
    return write_formats(get_timer_tree(timer_stack, include_threads=True), output_paths(settings))


def write_formats(tree: dict[str, Any], paths: dict[str, Path]) -> list[Path]:
    """Write one dump (``get_timer_tree``) in each format of ``paths`` (``timers``, or a format of
    ``profiler.export``) at its path; returns the paths written. An ``OSError`` names the file it
    failed on; the files written before it stay whole."""
    written = []
    for format_name, path in paths.items():
        try:
            if format_name == "timers":
                written.append(write_tree(path, tree))
            else:
                # Imported here: the exporters are the heavy part, and many runs write timers only.
                from profiler.export import write_export

                written.append(write_export(tree, format_name, path))
        except OSError as error:
            raise OSError(error.errno, f"cannot write the {format_name} output {str(path)!r}: "
                                       f"{error.strerror or error}") from None
    return written
