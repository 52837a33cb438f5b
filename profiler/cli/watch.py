"""``rlprof watch PATH``: the live view of a run that writes continuous dumps, from another terminal.

The run rewrites its timers file every ``dump_period`` seconds (``set_config(continuous_dump=True)``);
``watch`` reads it every ``--interval`` seconds and draws the
same view as ``rlprof run --live`` (:mod:`profiler.integrations.live_view`). It only reads: the
file is replaced by atomic renames, so each read sees a whole dump, and a file that does not exist
yet is waited for, with one line saying so. Watching ends with Ctrl-C or SIGTERM (exit code 0),
the terminal as it was found.
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path
from typing import Any

from profiler.cli.argument_types import positive_seconds
from profiler.integrations.live_view import DEFAULT_INTERVAL, DEFAULT_WINDOW, LiveView, file_reader

__all__ = ["add_watch_command", "watch"]


def add_watch_command(subparsers: Any) -> None:
    """Add ``watch`` to the ``rlprof`` command line."""
    parser = subparsers.add_parser(
        "watch",
        help="the live view of a run that writes continuous dumps, read-only",
        description="Show where a running program's time goes — env steps per second over the "
        "last window and since the start, the share of each phase, each worker's step time, how "
        "often it was last and its memory, and the verdicts over the window — from its timers "
        "file, which the run rewrites (set_config(continuous_dump=True)). Read-only; waits for "
        "the file to appear; Ctrl-C ends watching. See docs/live.md.",
    )
    parser.add_argument("path", type=Path, help="the run's timers file (RUN_timers.json)")
    parser.add_argument("--interval", type=positive_seconds, default=DEFAULT_INTERVAL, metavar="SECONDS",
                        help=f"seconds between refreshes (default {DEFAULT_INTERVAL:g})")
    parser.add_argument("--window", type=positive_seconds, default=DEFAULT_WINDOW, metavar="SECONDS",
                        help=f"seconds of run time the windowed figures cover (default {DEFAULT_WINDOW:g})")
    parser.add_argument("--plain", action="store_true",
                        help="one plain line per refresh, even on a terminal")
    parser.set_defaults(run=watch)


def watch(arguments: argparse.Namespace) -> int:
    """Draw the view of ``arguments.path`` until Ctrl-C or SIGTERM; returns the exit code 0."""
    view = LiveView(file_reader(arguments.path), interval=arguments.interval, window=arguments.window,
                    mode="lines" if arguments.plain else "auto", title=f"rlprof watch {arguments.path}")
    stopped = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda number, frame: stopped.set())
    view.start()
    view.refresh()  # the first figures (or the line saying what is awaited) at once
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        view.stop()
        signal.signal(signal.SIGTERM, previous)
    return 0
