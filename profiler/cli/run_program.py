"""``rlprof run``: profile a Python program as it is, without editing it.

``rlprof run [options] script.py [args...]`` (or ``-m module``) runs the program in this process
the way ``python`` would — ``__name__ == "__main__"``, ``sys.argv`` as the program expects, its
folder first on ``sys.path`` — with rlprof's timers on and the timeline recording. The program's
own blocks (``hierarchical_timer``, ``@timed``), if it has any, are timed; so are the
environments it builds, where they run (``envmanager.instrumentation``, through the
``rlprof.environments`` entry point), the phases of PyTorch and Stable-Baselines3 when it imports
them, and a sampler names where the time outside any block went (:mod:`profiler.automatic`);
every Ray worker process it starts is timed too (:mod:`profiler.integrations.ray_workers`); with
``--vector-env``, Gymnasium's vector envs it builds are ``SubprocessEnvManager``\\ s instead.

However the program ends — returning, ``sys.exit``, an uncaught exception, Ctrl-C (SIGINT),
SIGTERM (:mod:`.program_signals`) or ``os._exit`` (:mod:`.immediate_exit`) — the timers, the trace
and the report are written under the summaries folder and the analysis is printed (on stderr: the
program's stdout stays its own). Then rlprof ends the way the program did: the same exit code, or
killed by the same signal.
"""

from __future__ import annotations

import gc
import os
import runpy
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from importlib.metadata import PackageNotFoundError, distribution, entry_points
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType, TracebackType
from dataclasses import field
from typing import Any, NamedTuple, TextIO

from profiler.analysis.memory_advice import RUN_METADATA
from profiler.automatic import SAMPLER_OFF_METADATA, AutomaticPhases
from profiler.automatic.stack_sampler import forget_samples
from profiler.cli import program_frame
from profiler.cli.immediate_exit import RunEnding, os_exit_ends_the_run
from profiler.cli.program_signals import Terminated, signals_held, sigterm_raises_in_the_program
from profiler.integrations.ray_workers import RayWorkers
from profiler.recording import events, machine_load, memory
from profiler.records import Record
from profiler.timing import timers
from profiler.tree.timer_json import check_run_id, timers_json_path, write_and_read_timing_tree

__all__ = [
    "VECTOR_ENV_GROUP",
    "Program",
    "ProgramEnd",
    "RunError",
    "RunFiles",
    "default_summaries_dir",
    "entry_points_of",
    "exit_like",
    "run_program",
    "split_run_arguments",
]

VECTOR_ENV_GROUP = "rlprof.vector_env"
"""Entry-point group of the ``--vector-env`` substitution (``envmanager`` provides it)."""
ENVIRONMENTS_GROUP = "rlprof.environments"
"""Entry-point group of what times the program's environments where they run (``envmanager``)."""

_DISTRIBUTION = "rlprof"
"""The distribution whose entry points connect ``profiler`` to ``envmanager``."""
_OPTIONS_WITH_A_VALUE = ("--summaries-dir", "--run-id", "--envs-per-worker", "--timeline-spans")
_ANALYSIS_TOP = 10


class RunError(Exception):
    """The program cannot be run as asked (no such script or module, ``--vector-env`` missing)."""


class Program(NamedTuple):
    """What to run: a script's path or a module's name, and the arguments it is given (a named
    tuple: it costs less to make than a frozen dataclass, whose methods are compiled as it is made)."""

    target: str
    is_module: bool = False
    arguments: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """How runs of it are named by default: the script's stem or the module's last part."""
        return self.target.rsplit(".", 1)[-1] if self.is_module else Path(self.target).stem

    def check(self) -> None:
        """Refuse, before anything runs, a script that is not a file or a module not found."""
        if self.is_module:
            try:
                found = find_spec(self.target)
            except (ImportError, ValueError) as error:
                raise RunError(f"no module named {self.target!r} ({error})") from None
            if found is None:
                raise RunError(f"no module named {self.target!r}")
        elif not Path(self.target).is_file():
            raise RunError(f"can't open file {self.target!r}: no such file")


class ProgramEnd(Record):
    """How the program ended: its exit code, or the signal that stopped it."""

    exit_code: int = 0
    signal_number: int | None = None
    error: BaseException | None = None
    immediate_exit: bool = False
    """Whether the program ended with ``os._exit`` (:mod:`profiler.cli.immediate_exit`)."""

    def describe(self) -> str:
        if self.signal_number is not None:
            return f"stopped by {signal.Signals(self.signal_number).name}"
        if self.error is not None:
            return f"ended with {type(self.error).__name__} (exit code {self.exit_code})"
        if self.immediate_exit:
            return f"ended with os._exit({self.exit_code})"
        return f"exited with code {self.exit_code}"


class RunFiles(Record):
    """The files a run wrote."""

    timers: Path
    trace: Path | None = None
    report: Path | None = None
    problems: list[str] = field(default_factory=list)

    def shown_from(self, folder: Path) -> RunFiles:
        """The same files, named relative to ``folder`` where they are inside it."""

        def shown(path: Path | None) -> Path | None:
            if path is None or not path.is_relative_to(folder):
                return path
            return path.relative_to(folder)

        return RunFiles(timers=shown(self.timers) or self.timers, trace=shown(self.trace),
                        report=shown(self.report), problems=self.problems)


def split_run_arguments(arguments: list[str]) -> tuple[list[str], list[str]]:
    """Split ``rlprof run``'s arguments into rlprof's own and the program's.

    As with ``python``, rlprof's options end at the program: everything after the script's path
    (or ``-m``'s module) belongs to the program, even what looks like an rlprof option. rlprof's
    part comes back with the program's name first, so that an option with an optional value
    (``--vector-env[=all]``) cannot take the script's path for its value.
    """
    index = 0
    while index < len(arguments):
        token = arguments[index]
        if token == "-m":
            return [*arguments[index: index + 2], *arguments[:index]], arguments[index + 2:]
        if token.startswith("-m") and not token.startswith("--"):
            return ["-m", token[2:], *arguments[:index]], arguments[index + 1:]
        if token in _OPTIONS_WITH_A_VALUE:
            index += 2
        elif token.startswith("-") and token != "-":
            index += 1
        else:
            return [token, *arguments[:index]], arguments[index + 1:]
    return list(arguments), []


def default_summaries_dir(name: str, *, under: Path = Path("runs")) -> Path:
    """``runs/<name>-<date>-<time>``, with ``-2``, ``-3``... for runs started in the same second."""
    base = under / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    candidate, number = base, 1
    while candidate.exists():
        number += 1
        candidate = base.with_name(f"{base.name}-{number}")
    return candidate


def run_program(
    program: Program,
    *,
    summaries_dir: str | os.PathLike[str] | None = None,
    run_id: str | None = None,
    vector_env: str | None = None,
    envs_per_worker: int | str | None = None,
    timeline: bool = True,
    timeline_spans: int | None = None,
    framework_phases: bool = True,
    stack_sampler: bool = True,
    report_to: TextIO | None = None,
    live: bool = False,
    operators: bool = False,
    memory_interval: float | None = None,
    track_allocations: bool = False,
    process_ends_after: bool = False,
) -> ProgramEnd:
    """Run ``program`` under rlprof, write its files and print the analysis; return how it ended.

    The caller ends the process accordingly (:func:`exit_like`): the ``rlprof run`` command does.
    ``envs_per_worker`` (a whole number or ``"auto"``) is what the vector envs built under
    ``vector_env`` run with; None leaves the manager's default. ``timeline_spans`` is how many
    spans (and instants, counter samples) each of the trainer's threads keeps, the latest; None
    keeps :data:`~profiler.recording.events.DEFAULT_CAPACITY`. ``framework_phases`` times
    PyTorch's and Stable-Baselines3's phases as blocks and ``stack_sampler`` names where the
    untimed time went (see :mod:`profiler.automatic`). ``live`` shows the live view
    (:mod:`profiler.integrations.live_view`) on stderr while the program runs. ``operators``
    records PyTorch's operators under the blocks that ran them (:mod:`profiler.gpu.torch_ops`).
    ``memory_interval`` samples the memory of the trainer and of every env worker rlprof times
    every so many seconds, and ``track_allocations`` measures each block's Python allocations
    (:mod:`profiler.recording.memory`): the dump's ``memory`` section, which is otherwise absent.
    ``process_ends_after`` tells that the process ends once this returns (the ``rlprof run``
    command): what rlprof's set-up made then stays out of the collector's passes to the end.

    Raises :class:`RunError` before anything runs when the program or ``--vector-env`` cannot be.
    """
    if envs_per_worker is not None and not vector_env:
        raise RunError("--envs-per-worker applies to the vector envs that --vector-env replaces: add --vector-env")
    if timeline_spans is not None and not timeline:
        raise RunError("--timeline-spans sizes the timeline that --no-timeline turns off: give one of them")
    program.check()
    # What only an option needs is imported when it is given, and the analysis and the exporters
    # at the exit: before the program's first line, rlprof imports only what the run needs.
    torch_ops = _operators_module() if operators else None
    run_id = run_id or program.name
    try:
        check_run_id(run_id)
    except ValueError as error:
        raise RunError(str(error)) from None
    run_dir = Path(summaries_dir) if summaries_dir is not None else default_summaries_dir(run_id)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)  # a bad folder is refused before the run, not after
    except OSError as error:
        raise RunError(f"cannot create the summaries folder {str(run_dir)!r}: {error.strerror or error}") from None
    shown_from = Path.cwd()
    run_dir = run_dir.absolute()  # the program may change the working folder
    substitution = _substitute_vector_envs(vector_env, envs_per_worker) if vector_env else None
    report_to = report_to or sys.stderr
    timers.reset_timers()
    timers.add_metadata(RUN_METADATA, program.target)
    timers.add_metadata("run_id", run_id)  # the report's title
    if not stack_sampler:
        timers.add_metadata(SAMPLER_OFF_METADATA, "off")
    machine_load.follow_run()  # the program's waits for a core and the machine's load from here
    if timeline:
        events.start_recording(timeline_spans or events.DEFAULT_CAPACITY)
    instrumentation = _load_plugin(ENVIRONMENTS_GROUP, report_to, missing=(
        "the environments are not timed: rlprof's entry points are not installed (a checkout on "
        "PYTHONPATH has none: `pip install -e .` there)"))
    automatic = AutomaticPhases(framework_phases=framework_phases, stack_sampler=stack_sampler).start()
    ray_workers = RayWorkers(record_timeline=timeline, framework_phases=framework_phases).follow()
    if torch_ops is not None:
        torch_ops.start_operators()
    memory_sampled = _start_memory_sampling(memory_interval, track_allocations)

    def finish(end: ProgramEnd) -> ProgramEnd:
        """Once the program has ended: its last timers, the files and the analysis. Where another
        thread's ``os._exit`` ends it, the main thread may still be using the vector envs: they are
        left as they are, and the blocks still open are timed up to now."""
        if live:
            _take_the_live_view_down()  # an os._exit while it was up; otherwise down already
        main_thread_running = threading.current_thread() is not threading.main_thread()
        if end.immediate_exit:
            for stack in timers.all_timer_stacks():
                stack.close_open_blocks()
        automatic.stop()
        if torch_ops is not None:
            torch_ops.stop_operators()
        with signals_held() as signals_meanwhile:
            told = _finish_instrumentation(instrumentation, program_still_running=main_thread_running)
            if memory_sampled:  # after the workers' last timers, which carry their last samples
                memory.sample_now()
                memory.stop_sampling()
            told += ray_workers.finish()
            if ray_workers.environments_timed:  # the envs were built in Ray's workers, not here
                told = [line for line in told if not line.startswith("no environment was instrumented")]
            if main_thread_running:
                told.append(f"the thread {threading.current_thread().name!r} called os._exit while the main thread "
                            "still ran: its vector envs were left as they were, and its blocks still open are "
                            "timed up to that moment")
            if substitution is not None:
                if not main_thread_running:
                    _close_managers(substitution, report_to)
                substitution.restore()
                told += substitution.summary()
            with _collector_paused():
                files, tree = _write_files(run_dir, run_id)
        if signals_meanwhile and end.signal_number is None:
            end = ProgramEnd(signal_number=signals_meanwhile[0])
        with _collector_paused():
            _report(program, end, files.shown_from(shown_from), tree, report_to)
        for line in told:
            print(f"rlprof: {line}", file=report_to)
        report_to.flush()
        return end

    ending = RunEnding(finish)

    def finish_before_os_exit(code: int) -> None:
        """The process ends next, with the program's code: what goes wrong here can only be told."""
        try:
            ending(ProgramEnd(exit_code=code, immediate_exit=True))
        except RunError as error:
            print(f"rlprof: error: run: {error}", file=report_to)
        except Exception as error:  # noqa: BLE001 - a traceback would be cut short by the exit
            print(f"rlprof: error: run: ending the run at os._exit failed: {type(error).__name__}: {error}",
                  file=report_to)

    try:
        with (sigterm_raises_in_the_program(), _set_up_frozen(until_the_exit=process_ends_after),
              os_exit_ends_the_run(finish_before_os_exit)):
            with _live_view_shown(live):
                end = _execute(program)
            return ending(end)
    finally:
        automatic.stop()
        ray_workers.restore()
        forget_samples()
        if memory_sampled:
            memory.stop_sampling()
            memory.clear_memory()
        if timeline:
            events.stop_recording()
        if torch_ops is not None:
            torch_ops.stop_operators()  # does nothing once stopped


def _operators_module() -> ModuleType:
    """:mod:`profiler.gpu.torch_ops`, for ``--operators``; refused without PyTorch."""
    from profiler.gpu import torch_ops

    try:
        torch_ops.check_available()
    except torch_ops.OperatorsUnavailableError as error:
        raise RunError(f"--operators: {error}") from None
    return torch_ops


def _start_memory_sampling(interval: float | None, track_allocations: bool) -> bool:
    """``--memory[=SECONDS]`` and ``--track-allocations``: sample this process's memory, and so
    every env worker's (they sample as the trainer does: :func:`profiler.recording.memory.sampling_settings`),
    from before the program's first line; whether anything was started. The samples of an earlier
    run in this process are dropped, so that the dump holds this run's only."""
    if interval is None and not track_allocations:
        return False
    memory.clear_memory()
    memory.start_sampling(interval=interval, track_allocations=track_allocations)
    return True


def _take_the_live_view_down() -> None:
    from profiler.integrations import live_view

    live_view.stop()


def _live_view_shown(live: bool) -> AbstractContextManager[Any]:
    """``--live``'s view while the program runs (:func:`profiler.integrations.live_view.shown`)."""
    if not live:
        return nullcontext()
    from profiler.integrations import live_view

    return live_view.shown()


def exit_like(end: ProgramEnd) -> int:
    """The exit code to return for ``end``; a program stopped by a signal is stopped again by it,
    so whoever started ``rlprof run`` sees what it would have seen without rlprof."""
    if end.signal_number is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(end.signal_number, signal.SIG_DFL)
        os.kill(os.getpid(), end.signal_number)
    return end.exit_code


def _substitute_vector_envs(mode: str, envs_per_worker: int | str | None) -> Any:
    plugins = entry_points_of(VECTOR_ENV_GROUP)
    if not plugins:
        raise RunError(
            "--vector-env needs rlprof's envmanager package (entry point group "
            f"{VECTOR_ENV_GROUP!r} is empty): reinstall rlprof"
        )
    try:
        substitute = plugins[0].load()
    except ImportError as error:
        raise RunError(f"--vector-env: {error}") from None
    if envs_per_worker is None:
        return substitute(mode)
    try:
        return substitute(mode, envs_per_worker=envs_per_worker)
    except (TypeError, ValueError) as error:
        raise RunError(f"--envs-per-worker: {error}") from None


def entry_points_of(group: str) -> list[Any]:
    """The entry points of ``group``: rlprof's own distribution's, or where it has none (a checkout
    whose entry points a distribution of another name provides), every installed distribution's.

    rlprof's own are read from its one ``entry_points.txt``: scanning every distribution reads
    each one's, about three times the instructions with some sixty installed.
    """
    try:
        own = [plugin for plugin in distribution(_DISTRIBUTION).entry_points if plugin.group == group]
    except PackageNotFoundError:
        own = []
    return own or list(entry_points(group=group))


def _load_plugin(group: str, report_to: TextIO, *, missing: str | None = None) -> Any:
    """What the first plugin of ``group`` returns when called (None when there is none, or it fails:
    the program still runs, and one line says what is missing; ``missing`` is that line when the
    group has no plugin at all)."""
    plugins = entry_points_of(group)
    if not plugins:
        if missing is not None:
            print(f"rlprof: {missing}", file=report_to)
        return None
    try:
        return plugins[0].load()()
    except Exception as error:  # noqa: BLE001 - measuring less never stops the program
        print(f"rlprof: {group} unavailable ({type(error).__name__}: {error}); running without it", file=report_to)
        return None


def _finish_instrumentation(instrumentation: Any, *, program_still_running: bool) -> list[str]:
    """The lines the environments' instrumentation has to tell, once it has its last timers."""
    if instrumentation is None:
        return []
    try:
        return list(instrumentation.finish(program_still_running=program_still_running))
    except Exception as error:  # noqa: BLE001 - the timers merged so far are still written
        return [f"finishing the environments' instrumentation failed: {type(error).__name__}: {error}"]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while the files and the report are made.

    They build tens of thousands of lists and strings from the timeline, which start the
    collector's full passes, and a full pass walks every object of the program (torch's alone are
    about 176,000): in a process with torch loaded, half the exits took 130 ms more. What the
    exit makes is freed by reference counting; the collector runs again afterwards.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def _set_up_frozen(*, until_the_exit: bool) -> Iterator[None]:
    """Keep what exists before the program's first line out of the collector's passes while it runs.

    rlprof's set-up (its modules, and the Gymnasium and numpy that the environments' instrumentation
    imports) leaves tens of thousands of objects that live to the exit; left in the collector's
    oldest generation, every full pass of the program walks them, and they shift when those passes
    come: importing torch after them took one full pass more than under ``python``, each 50 to
    80 ms with torch's 170,000 objects. Frozen (:func:`gc.freeze`), they are never walked; the
    program's own objects are collected as without rlprof.

    They are unfrozen when the program ends, so that a process calling :func:`run_program` again
    does not keep its garbage for good; ``until_the_exit`` (the process ends next) leaves them
    frozen instead, for the interpreter's own passes at its exit: with SB3's PPO loaded those
    passes walk about 310,000 objects, and skipping rlprof's 32,000 took 0.1 s of CPU off the
    trainer's teardown. What the program made is still collected at the exit, its cycles'
    finalizers run as under ``python`` (a file's last buffer is written), unless a frozen object
    that the exit never frees holds it (Python does not promise those finalizers either).
    """
    gc.freeze()
    try:
        yield
    finally:
        if not until_the_exit:
            gc.unfreeze()


def _execute(program: Program) -> ProgramEnd:
    """Run the program as ``python`` would, and tell how it ended (never raises)."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [program.target, *program.arguments]
    # python -m puts the current folder's full path first, not "" (which would follow a chdir of the program).
    sys.path[0] = os.getcwd() if program.is_module else str(Path(program.target).resolve().parent)
    try:
        if program.is_module:
            program_frame.run_module(program.target)
        else:
            program_frame.run_script(program.target)
        return ProgramEnd(exit_code=0)
    except SystemExit as exit_request:
        return ProgramEnd(exit_code=_exit_code(exit_request.code))
    except KeyboardInterrupt as interrupt:
        _print_program_traceback(interrupt)
        return ProgramEnd(signal_number=signal.SIGINT, error=interrupt)
    except Terminated as terminated:
        return ProgramEnd(signal_number=terminated.signal_number, error=terminated)
    except BaseException as error:  # noqa: BLE001 - the program's own error: report it, keep the timers
        _print_program_traceback(error)
        return ProgramEnd(exit_code=1, error=error)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def _exit_code(code: Any) -> int:
    """What Python makes of ``sys.exit(code)``: ``None`` is 0; anything but a number is printed
    and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


_OWN_FILES = frozenset({__file__, program_frame.__file__, runpy.__file__, "<frozen runpy>"})


def _print_program_traceback(error: BaseException) -> None:
    """Print the traceback as ``python`` would: from the program's first frame, not rlprof's."""
    trace: TracebackType | None = error.__traceback__
    while trace is not None and trace.tb_frame.f_code.co_filename in _OWN_FILES:
        trace = trace.tb_next
    traceback.print_exception(type(error), error, trace)


def _close_managers(substitution: Any, report_to: TextIO) -> None:
    """Close the vector envs the program left open, so their workers' timers are merged."""
    try:
        substitution.close_managers()
    except Exception as error:  # noqa: BLE001 - the timers merged so far are still written
        print(f"rlprof: closing the program's vector envs failed: {type(error).__name__}: {error}",
              file=report_to)


def _write_files(run_dir: Path, run_id: str) -> tuple[RunFiles, dict[str, Any]]:
    """The timers first, then the trace and the report made from the tree the file holds (so all
    three agree); returns the files and that tree."""
    try:
        # The main thread's tree, whichever thread ends the run (an os._exit may come from another).
        main_stack = timers.get_timer_stack_for_thread(threading.main_thread())
        path, tree = write_and_read_timing_tree(timers_json_path(run_dir, run_id), main_stack)
    except OSError as error:
        raise RunError(f"cannot write the timers in {str(run_dir)!r}: {error.strerror or error}") from None
    files = RunFiles(timers=path)
    from profiler.export import write_export  # the exporters are the heavy part: only when needed

    for attribute, format_name, file_name in (
        ("trace", "chrome", f"{run_id}_trace.json.gz"),
        ("report", "html", f"{run_id}_report.html"),
    ):
        try:
            setattr(files, attribute, write_export(tree, format_name, run_dir / file_name))
        except (OSError, ValueError) as error:
            files.problems.append(f"cannot write the {attribute}: {error}")
    return files, tree


def _report(
    program: Program, end: ProgramEnd, files: RunFiles, tree: dict[str, Any], report_to: TextIO
) -> None:
    from profiler.analysis.analyze import AnalyzeOptions, analyze_run, render_analysis

    analysis = analyze_run(tree, AnalyzeOptions(top=_ANALYSIS_TOP))
    print(f"\nrlprof: {program.target} {end.describe()}", file=report_to)
    print(render_analysis(analysis, title=program.target), file=report_to)
    print(f"\nrlprof: timers  {files.timers}", file=report_to)
    if files.trace is not None:
        print(f"rlprof: trace   {files.trace}  (open in https://ui.perfetto.dev)", file=report_to)
    if files.report is not None:
        print(f"rlprof: report  {files.report}  (open in a browser)", file=report_to)
    for problem in files.problems:
        print(f"rlprof: {problem}", file=report_to)
