"""The live view: where a run's time goes, per worker, with the verdicts as they form, while it trains.

Three ways in, one view:

* ``rlprof run --live script.py`` shows it for the program it runs (:func:`shown`);
* :func:`start` / :func:`stop` (or ``set_config(live_view=True)``, or an env manager's
  ``live_view=True``) show it inside any trainer;
* ``rlprof watch RUN_timers.json`` shows it for a run that writes continuous dumps, from another
  terminal, read-only (:func:`file_reader`).

Every ``interval`` seconds a thread of the view's own takes a dump of the run — the live timers
(:func:`profiler.tree.timer_tree.get_timer_tree`, without the timeline, which grows with the run)
or the file — keeps it, and makes the window of the last ``window`` seconds of run time from it and
the dump kept that long ago (:func:`profiler.analysis.window.window_tree`). The figures and the
verdicts of that window (:mod:`profiler.analysis.live_figures`) are drawn on stderr.

**Never in the trainer's way.** The view runs on a daemon thread and reads the timers as the
continuous dump does: the hot path takes no lock, and the mergers' locks are held only while the
workers' entries are copied. A refresh that fails (a full disk under ``watch``, a file of another
shape) shows its reason in the view and the next refresh tries again: the trainer never sees it.
What a refresh costs is measured side by side in ``benchmarks/live_view_cost.py``.

**Where it is drawn.** On a terminal, with ``rich`` installed (``pip install 'rlprof[live]'``), a
panel redrawn in place; the program's own prints to the terminal appear above it. Elsewhere —
stderr is a pipe or a file (CI logs, ``nohup``), ``TERM=dumb``, or rich is missing — one plain line
per refresh (:func:`profiler.integrations.live_render.plain_line`); on a terminal without rich, the
first line says what to install.

**The terminal is left as found.** The panel hides the cursor while it is up and draws no
alternate screen; :meth:`LiveView.stop` shows the cursor again and leaves the last panel in the
scrollback. ``rlprof run`` stops the view on every way a program ends (return, exception, Ctrl-C,
SIGTERM); :func:`start` registers the stop at exit and in front of SIGTERM.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import psutil

from profiler.analysis.live_figures import LiveFigures, live_figures
from profiler.analysis.window import window_tree
from profiler.integrations.live_render import plain_line, rich_panel
from profiler.timing import timers
from profiler.timing.timers import TimerStack
from profiler.tree.timer_json import TimerFileError, load_timing_tree, normalize_timing_tree
from profiler.tree.timer_tree import get_timer_tree

__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_WINDOW",
    "INSTALL_HINT",
    "LiveView",
    "TreeReader",
    "WindowedRun",
    "file_reader",
    "in_process_reader",
    "is_showing",
    "shown",
    "start",
    "stop",
]

DEFAULT_INTERVAL = 1.0
"""Seconds between refreshes: often enough to follow a run, rare enough to cost nothing visible."""

DEFAULT_WINDOW = 5.0
"""Seconds of run time the windowed figures cover: a few refreshes, so one slow step is not a
trend, and short enough that a slowdown shows within seconds."""

INSTALL_HINT = ("rlprof: the live view draws a panel with rich: pip install 'rlprof[live]' "
                "(printing one line per refresh meanwhile)")

TreeReader = Callable[[], "tuple[dict[str, Any] | None, str]"]
"""A source of dumps: returns ``(normalized tree, "")``, or ``(None, why there is none yet)``."""


def in_process_reader(timer_stack: TimerStack | None = None) -> TreeReader:
    """Dumps of this process's timers: ``timer_stack``, by default the calling thread's, with its
    threads and merged workers, without the timeline."""
    stack = timer_stack if timer_stack is not None else timers.get_timer_stack_for_thread(threading.current_thread())

    def read() -> tuple[dict[str, Any] | None, str]:
        return normalize_timing_tree(get_timer_tree(stack, include_threads=True, timeline=False)), ""

    return read


def file_reader(path: str | os.PathLike[str]) -> TreeReader:
    """Dumps read from a timers file that a run keeps replacing (``continuous_dump``).

    Replacing is an atomic rename, so a read sees a whole file, the old or the new. A file that is
    not there yet, or that cannot be read as a timer tree, gives no dump and says why.
    """
    source = Path(path)

    def read() -> tuple[dict[str, Any] | None, str]:
        if not source.exists():
            return None, (f"waiting for {source} to appear (a run writes it with "
                          "set_config(continuous_dump=True))")
        try:
            return load_timing_tree(source), ""
        except TimerFileError as error:
            return None, f"cannot read {source}: {error}; trying again"

    return read


class WindowedRun:
    """The dumps of the last ``window`` seconds of run time, and the window they make.

    Dumps are told apart by their wall time (``total``): a dump no later than the newest kept is a
    file not rewritten since, and adds nothing. A dump earlier than the newest (a reset, another
    run) starts the history afresh.
    """

    def __init__(self, window: float = DEFAULT_WINDOW) -> None:
        if not window > 0:
            raise ValueError(f"the live view's window must be a number of seconds > 0, got {window!r}")
        self.window = window
        self._dumps: collections.deque[dict[str, Any]] = collections.deque()

    def add(self, tree: dict[str, Any]) -> bool:
        """Keep ``tree``; False when it is no newer than the newest dump kept."""
        if self._dumps and tree["total"] <= self._dumps[-1]["total"]:
            if tree["total"] == self._dumps[-1]["total"]:
                return False
            self._dumps.clear()
        self._dumps.append(tree)
        # Keep the newest dump at least ``window`` old: the window's start.
        while len(self._dumps) > 2 and tree["total"] - self._dumps[1]["total"] >= self.window:
            self._dumps.popleft()
        return True

    def figures(self) -> LiveFigures | None:
        """The figures since the start and over the window; None before the first dump."""
        if not self._dumps:
            return None
        newest = self._dumps[-1]
        earliest = self._dumps[0] if len(self._dumps) > 1 else None
        return live_figures(newest, window_tree(newest, earliest))


class LiveView:
    """Draws the figures of ``read``'s dumps on ``stream`` every ``interval`` seconds.

    ``mode`` is ``"auto"`` (a panel when ``stream`` is a terminal and rich is installed, else
    plain lines), ``"panel"`` or ``"lines"``. With ``measure_memory`` (workers on this machine: the
    in-process view), a worker whose dump holds no memory figure has its resident memory read by
    its pid. :meth:`refresh` does one refresh on the calling
    thread; :meth:`start` runs them on a thread of the view's own until :meth:`stop`.
    """

    def __init__(
        self,
        read: TreeReader,
        *,
        interval: float = DEFAULT_INTERVAL,
        window: float = DEFAULT_WINDOW,
        stream: TextIO | None = None,
        mode: str = "auto",
        title: str = "rlprof live",
        measure_memory: bool = False,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"the live view's interval must be a number of seconds > 0, got {interval!r}")
        if mode not in ("auto", "panel", "lines"):
            raise ValueError(f"the live view's mode must be 'auto', 'panel' or 'lines', got {mode!r}")
        self.read = read
        self.interval = interval
        self.run = WindowedRun(window)
        self.stream = stream if stream is not None else sys.stderr
        self.title = title
        self.measure_memory = measure_memory
        self.mode = self._chosen_mode(mode)
        self.latest: LiveFigures | None = None
        self._live: Any = None
        self._status_shown = ""
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _chosen_mode(self, mode: str) -> str:
        if mode != "auto":
            return mode
        is_terminal = hasattr(self.stream, "isatty") and self.stream.isatty()
        if not is_terminal or os.environ.get("TERM") == "dumb":
            return "lines"
        try:
            import rich  # noqa: F401 - only asked whether it is installed
        except ImportError:
            print(INSTALL_HINT, file=self.stream, flush=True)
            return "lines"
        return "panel"

    def start(self) -> LiveView:
        """Put the view up and refresh it on a daemon thread until :meth:`stop`."""
        if self.mode == "panel":
            self._live = _start_panel(self.stream, rich_panel(None, self.title))
        self._thread = threading.Thread(target=self._refresh_until_stopped, name="rlprof live view",
                                        daemon=True)
        self._thread.start()
        return self

    def _refresh_until_stopped(self) -> None:
        while not self._stopping.wait(self.interval):
            self.refresh()

    def refresh(self) -> LiveFigures | None:
        """Read a dump and draw the figures; a failure is drawn as a status, never raised."""
        with self._lock:
            try:
                tree, status = self.read()
                if tree is not None and not self.run.add(tree):
                    status = "no new dump since the last refresh"
                if tree is not None:
                    self.latest = self.run.figures()
                    if self.measure_memory and self.latest is not None:
                        self.latest = _with_measured_memory(self.latest)
            except Exception as error:  # noqa: BLE001 - the view must never take the trainer down
                status = f"live view: {type(error).__name__}: {error}"
            self._draw(status)
            return self.latest

    def _draw(self, status: str) -> None:
        try:
            if self.mode == "panel" and self._live is not None:
                self._live.update(rich_panel(self.latest, self.title, status), refresh=True)
            elif self.latest is not None:
                print(plain_line(self.latest, status), file=self.stream, flush=True)
            elif status and status != self._status_shown:
                # Before the first figures, a line per change of status, not one per refresh.
                print(f"rlprof live: {status}", file=self.stream, flush=True)
            self._status_shown = status
        except (OSError, ValueError):
            pass  # stderr closed or gone: nothing to draw on, and nothing the trainer must hear of

    def stop(self) -> None:
        """Stop refreshing and take the panel down, the cursor shown again (safe to call twice).

        Returns within ``10 * interval + 6`` seconds even when a refresh is stuck writing to its
        stream; the stuck refresh's thread is a daemon and ends with the process."""
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10 * self.interval + 5.0)
        # A refresh stuck writing to a stream nobody reads (a full pipe, a terminal on hold) holds
        # the lock for as long: the view is then left as it is, rather than holding up the
        # program's exit behind it.
        if not self._lock.acquire(timeout=1.0):
            return
        try:
            live, self._live = self._live, None
            if live is not None:
                try:
                    live.stop()
                except (OSError, ValueError):
                    pass
        finally:
            self._lock.release()

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopping.is_set()


def _with_measured_memory(figures: LiveFigures) -> LiveFigures:
    """``figures`` with each worker's missing memory read from its process (RSS), where it runs."""
    workers = []
    for worker in figures.workers:
        if worker.memory_bytes is None and worker.pid is not None:
            try:
                worker = dataclasses.replace(worker, memory_bytes=float(psutil.Process(worker.pid).memory_info().rss))
            except (psutil.Error, OSError):
                pass  # the worker has ended or is not ours to read: its memory stays unknown
        workers.append(worker)
    return dataclasses.replace(figures, workers=workers)


def _start_panel(stream: TextIO, first: Any) -> Any:
    """A rich ``Live`` panel on ``stream``, redrawn only when told to (the view's thread does).

    The program's prints go above the panel while it is up: its stderr (the panel's terminal),
    and its stdout when that is a terminal too. A stdout that goes to a file or a pipe is left
    alone, so the program's output stays where it sent it.
    """
    from rich.console import Console
    from rich.live import Live

    stdout_is_terminal = hasattr(sys.stdout, "isatty") and sys.stdout.isatty()
    live = Live(first, console=Console(file=stream), auto_refresh=False, transient=False,
                redirect_stdout=stdout_is_terminal, redirect_stderr=stream is sys.stderr)
    live.start(refresh=True)
    return live


# --- one view per process: start() / stop() --------------------------------------------------------

_view: LiveView | None = None
_view_lock = threading.Lock()
_stop_registered = False
_sigterm_before: Any = None
_started_in_pid = 0


def start(
    *,
    interval: float = DEFAULT_INTERVAL,
    window: float = DEFAULT_WINDOW,
    stream: TextIO | None = None,
    mode: str = "auto",
    timer_stack: TimerStack | None = None,
) -> LiveView:
    """Show the live view of this process's timers (the calling thread's) until :func:`stop`.

    One view per process: a second call returns the view already up. The view is taken down when
    the process exits or gets SIGTERM, the terminal as it was found.
    """
    global _view
    with _view_lock:
        if _view is not None and _view.is_running():
            return _view
        _view = LiveView(in_process_reader(timer_stack), interval=interval, window=window,
                         stream=stream, mode=mode, measure_memory=True).start()
        _stop_at_exit()
        return _view


def stop() -> None:
    """Take the view of :func:`start` down (nothing happens when none is up)."""
    global _view
    with _view_lock:
        view, _view = _view, None
    if view is not None and os.getpid() == _started_in_pid:  # not in a process forked from it
        view.stop()


def is_showing() -> bool:
    """Whether a view of :func:`start` is up."""
    return _view is not None and _view.is_running()


@contextmanager
def shown(enabled: bool = True, **options: Any) -> Iterator[LiveView | None]:
    """The live view of this process's timers while the ``with`` block runs (``rlprof run
    --live``); with ``enabled`` false, nothing. The view is taken down however the block ends.

    While the block runs it is the process's view: :func:`start` (and an env manager's
    ``live_view=True``) use it rather than drawing a second panel over it."""
    global _view
    if not enabled:
        yield None
        return
    view = LiveView(in_process_reader(), measure_memory=True, **options).start()
    with _view_lock:
        if _view is None or not _view.is_running():
            _view = view
    try:
        yield view
    finally:
        with _view_lock:
            if _view is view:
                _view = None
        view.stop()


def _stop_at_exit() -> None:
    """Register :func:`stop` at exit and in front of SIGTERM, once (SIGTERM's default kills the
    process without running exit handlers, which would leave the cursor hidden)."""
    global _stop_registered, _sigterm_before, _started_in_pid
    if _stop_registered:
        return
    _stop_registered = True
    _started_in_pid = os.getpid()
    atexit.register(stop)
    if threading.current_thread() is not threading.main_thread():
        return
    before = signal.getsignal(signal.SIGTERM)
    if before is signal.SIG_IGN or before is None:
        return
    _sigterm_before = before
    signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signal_number: int, frame: Any) -> None:
    stop()
    if callable(_sigterm_before):
        _sigterm_before(signal_number, frame)
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
