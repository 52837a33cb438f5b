"""Turn a run's timer tree into files other tools (and people) can read.

One module per format; this module picks one by name, so the CLI and users need only two calls:

* :func:`render` returns the output as text,
* :func:`write_export` writes it atomically (a ``.json.gz`` path gzip-compresses a Chrome trace).

Every exporter takes the normalized tree that :func:`profiler.load_timing_tree` and
:func:`profiler.get_timer_tree` return, ours or ML-Agents', with the optional ``workers`` and
``timeline`` sections. See docs/outputs.md for what each format shows and how to open it.
"""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path
from typing import Any, BinaryIO, Callable

from profiler.tree import strict_json
from profiler.tree.atomic_file import open_atomically, write_atomically
from profiler.export.chrome_trace import TraceTooLongError, write_chrome_trace

__all__ = ["EXPORT_FORMATS", "TraceTooLongError", "render", "write_export"]

EXPORT_FORMATS: tuple[str, ...] = ("chrome", "speedscope", "collapsed", "html", "mlagents", "memory-svg")
"""The format names :func:`render` and :func:`write_export` accept."""


def _speedscope(tree: dict[str, Any]) -> str:
    from profiler.export.speedscope import to_speedscope

    return strict_json.dumps(to_speedscope(tree), separators=(",", ":"))


def _collapsed(tree: dict[str, Any]) -> str:
    from profiler.export.collapsed import to_collapsed

    return to_collapsed(tree)


def _html(tree: dict[str, Any]) -> str:
    from profiler.export.html_report import to_html_report

    return to_html_report(tree)


def _mlagents(tree: dict[str, Any]) -> str:
    from profiler.tree.mlagents_layout import to_mlagents_layout

    return strict_json.dumps(to_mlagents_layout(tree), indent=2)


def _memory_svg(tree: dict[str, Any]) -> str:
    from profiler.export.memory_flow import to_memory_svg

    return to_memory_svg(tree)


# Each exporter is imported when its format is first written: ``rlprof run``'s exit writes the
# trace and the report, and the other formats' modules would be imports it pays for nothing.
_RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "chrome": lambda tree: _written_to_memory(write_chrome_trace, tree),
    "speedscope": _speedscope,
    "collapsed": _collapsed,
    "html": _html,
    "mlagents": _mlagents,
    "memory-svg": _memory_svg,
}


def _written_to_memory(writer: Callable[[dict[str, Any], BinaryIO], None], tree: dict[str, Any]) -> str:
    buffer = io.BytesIO()
    writer(tree, buffer)
    return buffer.getvalue().decode("utf-8")


def render(tree: dict[str, Any], format_name: str) -> str:
    """The tree in ``format_name`` (one of :data:`EXPORT_FORMATS`) as text.

    Raises ``ValueError`` naming the valid formats for any other name, so a typo in a CLI option
    gets a useful message.
    """
    renderer = _RENDERERS.get(format_name)
    if renderer is None:
        raise ValueError(
            f"unknown export format {format_name!r}; choose one of: {', '.join(EXPORT_FORMATS)}"
        )
    return renderer(tree)


def write_export(
    tree: dict[str, Any], format_name: str, path: str | os.PathLike[str], *, named_by_user: bool = False
) -> Path:
    """Write the tree in ``format_name`` to ``path`` atomically and return the path.

    The output goes to a temporary file that replaces ``path`` only once complete, so a failure
    never leaves a partial file. A Chrome trace is written in pieces as it is made (a long run's
    trace never exists whole in memory); at a path ending in ``.json.gz`` it is gzip-compressed
    (Perfetto and chrome://tracing open it as is; traces compress about sixfold, at gzip's fastest level). A run whose
    times lie too far apart for a trace raises :class:`TraceTooLongError`. ``named_by_user`` says the user typed ``path``: a link there is then followed, and standard
    output (``-``), a device or a FIFO written into (see :mod:`profiler.tree.atomic_file`).
    """
    target = Path(path)
    if format_name == "chrome":
        with open_atomically(target, named_by_user=named_by_user) as output:
            if target.name.endswith(".json.gz"):
                # mtime=0 and no file name keep the bytes the same for the same trace. Level 1:
                # gzip's default 9 compressed an 18,000-span trace in 72 ms against 6 ms, for a
                # file 22% smaller (196 against 251 kB); ``rlprof run`` writes one at every exit.
                with gzip.GzipFile(filename="", mode="wb", fileobj=output, mtime=0,
                                   compresslevel=1) as compressed:
                    write_chrome_trace(tree, compressed)
            else:
                write_chrome_trace(tree, output)
        return target
    return write_atomically(target, render(tree, format_name), named_by_user=named_by_user)
