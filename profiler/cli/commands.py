"""The ``rlprof`` command line: analyse, compare, convert and report dumped runs.

Sub-commands built in (each reads timer JSON — rlprof's or Unity ML-Agents' — never pickle):

* ``rlprof analyze RUN.json`` — the verdicts (what limits the run, what it costs, what to
  change), slowest blocks, where the vector step's time went, per worker;
* ``rlprof diff BASE.json NEW.json`` — blocks that got slower or faster (exit 1 on regression
  with ``--fail-on-regression``, for CI);
* ``rlprof convert RUN.json --to FORMAT -o OUT`` and ``rlprof report RUN.json -o report.html`` —
  through the exporters of :mod:`profiler.export`;
* ``rlprof run [options] script.py [args...]`` (or ``-m module``) — run a program under rlprof,
  unedited (:mod:`profiler.cli.run_program`);
* ``rlprof watch RUN_timers.json`` — the live view of a run writing continuous dumps
  (:mod:`profiler.cli.watch`).

Bad input (a missing or foreign file, a bad option or pattern) ends with one line on stderr,
``rlprof: error: ...``, and exit code 2: never a traceback, never a partial output file.

**Plugins.** Other packages add sub-commands through the entry-point group ``rlprof.commands``
(this is how the env-manager package adds ``rlprof demo`` without ``profiler`` importing it). An
entry point names a callable ``register(subparsers) -> None`` that adds its parser and sets its
handler, a function from the parsed arguments to an exit code::

    # pyproject.toml of the plugin's package
    [project.entry-points."rlprof.commands"]
    hello = "mypackage.cli:register"

    # mypackage/cli.py
    def register(subparsers):
        parser = subparsers.add_parser("hello", help="say hello")
        parser.set_defaults(run=lambda arguments: print("hello") or 0)

Plugins are loaded only when the command line asks for something that is not built in (or for
help), so ``rlprof analyze`` stays fast and a broken plugin cannot break it; a plugin that fails
to load is reported as a one-line warning and skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

from profiler.version import __version__
from profiler.cli.argument_types import (
    envs_per_worker, order_key, pattern, positive_count, positive_seconds, seconds, seconds_or_percent, top_count,
)
from profiler.cli.run_program import Program, RunError, exit_like, run_program, split_run_arguments
from profiler.recording.events import DEFAULT_CAPACITY
from profiler.tree.atomic_file import is_standard_output
from profiler.tree.timer_json import TimerFileError, load_timing_tree

if TYPE_CHECKING:
    from profiler.analysis.analyze import AnalyzeOptions
    from profiler.analysis.profile_analyze_views import ProfileAnalyzeView

# Each sub-command imports the analysis, the diff or the live view it needs as it is built or run,
# and the command line builds only the sub-command it names (:func:`build_parser`'s ``only``):
# ``rlprof run`` would otherwise import all of them, 50 ms and more, before the program's first
# line, though only the exit reads the analysis and only ``--live`` shows the live view.

__all__ = [
    "BUILTIN_COMMANDS",
    "PLUGIN_GROUP",
    "CommandError",
    "build_parser",
    "load_plugin_commands",
    "main",
    "report_path_beside",
]

PLUGIN_GROUP = "rlprof.commands"
BUILTIN_COMMANDS = ("analyze", "diff", "convert", "report", "run", "watch")
USAGE_ERROR = 2


class CommandError(Exception):
    """Bad input from the user: printed as ``rlprof: error: <message>``, exit code 2."""


class _OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose errors are exceptions, so ``main`` prints them as one line.

    argparse's default prints the usage block and exits; scripts and CI logs want one line.
    Abbreviated options are refused (``allow_abbrev=False``, for every sub-command too, since
    argparse makes them of this class): with them ``--aggregate sum`` was read as an abbreviation
    of ``--aggregate-by`` and failed, and a new option could silently change what an old
    abbreviation means.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise CommandError(message)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``rlprof`` command line; returns the exit code (0 ok, 1 regression, 2 bad input)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        arguments, program_arguments = _set_program_arguments_apart(arguments)
        parser = build_parser(with_plugins=_asks_for_a_plugin(arguments), only=_built_in_command(arguments))
        parsed = parser.parse_args(arguments)
        parsed.program_arguments = program_arguments
        return int(parsed.run(parsed))
    except (CommandError, TimerFileError) as error:
        one_line = " ".join(str(error).split())  # a message quoting the input could hold newlines
        print(f"rlprof: error: {one_line}", file=sys.stderr)
        return USAGE_ERROR
    except SystemExit as exit_request:  # --help and --version end through argparse's exit()
        code = exit_request.code
        return 0 if code is None else code if isinstance(code, int) else USAGE_ERROR
    except MemoryError:
        # A file larger than the memory check foresaw; a traceback would add nothing to this.
        print("rlprof: error: out of memory while reading or converting the run; the file is too "
              "large for the memory this machine has free", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:
        # The reader (``| head``) went away: stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _asks_for_a_plugin(arguments: list[str]) -> bool:
    """Whether the command line names something other than a built-in command, or asks for help.

    Plugins import their own packages (the demo imports Gymnasium), so the built-in commands and
    ``--version`` skip them: faster, and a broken plugin cannot get in their way.
    """
    command = next((argument for argument in arguments if not argument.startswith("-")), None)
    if command is None:
        return "-h" in arguments or "--help" in arguments
    return command not in BUILTIN_COMMANDS


def _built_in_command(arguments: list[str]) -> str | None:
    """The built-in command the command line names, unless help is asked for before it (the
    help lists every command)."""
    for argument in arguments:
        if argument in ("-h", "--help"):
            return None
        if not argument.startswith("-"):
            return argument if argument in BUILTIN_COMMANDS else None
    return None


def _set_program_arguments_apart(arguments: list[str]) -> tuple[list[str], list[str]]:
    """For ``rlprof run``: rlprof's arguments, and the program's (everything after its name)."""
    command_at = next((index for index, argument in enumerate(arguments)
                       if not argument.startswith("-")), None)
    if command_at is None or arguments[command_at] != "run":
        return arguments, []
    own, program = split_run_arguments(arguments[command_at + 1:])
    return [*arguments[: command_at + 1], *own], program


def build_parser(*, with_plugins: bool = True, only: str | None = None) -> argparse.ArgumentParser:
    """The full ``rlprof`` parser: built-in sub-commands, plus plugins when ``with_plugins``.

    ``only``, a built-in command's name, builds that sub-command alone (what a command line that
    names it needs): each sub-command imports what its options name as it is built.
    """
    parser = _OneLineErrorParser(
        prog="rlprof",
        description="Analyse, compare and convert rlprof timer files (and ML-Agents' timers.json).",
    )
    parser.add_argument("--version", action="version", version=f"rlprof {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    builders = {"analyze": _add_analyze, "diff": _add_diff, "convert": _add_convert, "report": _add_report,
                "run": _add_run, "watch": _add_watch}
    for name, add_command in builders.items():
        if only is None or name == only:
            add_command(subparsers)
    if with_plugins:
        load_plugin_commands(subparsers)
    return parser


def load_plugin_commands(
    subparsers: Any, plugins: Iterable[Any] | None = None, *, warn: Callable[[str], None] | None = None
) -> list[str]:
    """Let each entry point of ``rlprof.commands`` add its sub-command; returns the names loaded.

    ``plugins`` defaults to the installed entry points; anything with ``name`` and ``load()``
    works (tests pass their own). A plugin that raises while loading or registering is skipped
    with a one-line warning, so one broken package cannot take the whole command line down.
    """
    warn = warn or (lambda message: print(message, file=sys.stderr))
    loaded = []
    for plugin in entry_points(group=PLUGIN_GROUP) if plugins is None else plugins:
        try:
            register = plugin.load()
            register(subparsers)
        except Exception as error:  # noqa: BLE001 - third-party code; report it, keep going
            warn(f"rlprof: warning: plugin {plugin.name!r} skipped: {type(error).__name__}: {error}")
            continue
        loaded.append(plugin.name)
    return loaded


# --- analyze ------------------------------------------------------------------------------------


def _add_analyze(subparsers: Any) -> None:
    from profiler.analysis.analyze import ANALYZE_FORMATS, ANALYZE_ORDER_KEYS
    from profiler.analysis.block_groups import AGGREGATE_KEYS, AGGREGATE_OPERATIONS

    parser = subparsers.add_parser(
        "analyze",
        help="verdicts, slowest blocks, where the step time went, per-worker step times",
        description="Report what limits a run (the verdicts: straggler, CPU oversubscription, "
        "transport, trainer, env, untimed time; each with its cost, evidence and advice), its "
        "slowest blocks, the vector step split into env compute, waiting and transport, and "
        "each worker's figures. The block options are those of MegEngine's profile_analyze.",
    )
    parser.add_argument("run_path", metavar="RUN.json", help="a timer JSON file (rlprof or ML-Agents)")
    parser.add_argument("-t", "--top", type=top_count, default=20, metavar="N",
                        help="show the N first blocks (default 20; 0 for all)")
    parser.add_argument("--order-by", type=order_key, default=None, metavar="KEY",
                        help=f"order blocks by this figure, largest first; +KEY for smallest first "
                        f"({', '.join(ANALYZE_ORDER_KEYS)}; default total); min and max are the "
                        "shortest and longest single call")
    parser.add_argument("--ascending", action="store_true",
                        help="smallest first (the same as --order-by +KEY)")
    parser.add_argument("--aggregate-by", choices=AGGREGATE_KEYS, default=None,
                        help="one row per block name, per worker, per process or per domain")
    parser.add_argument("--aggregate", choices=AGGREGATE_OPERATIONS, default=None,
                        help="how a row's figures are made from its blocks' (default sum); "
                        "without --aggregate-by, over every block")
    parser.add_argument("--min-time", type=seconds, default=0.0, metavar="S",
                        help="hide blocks whose total is under S seconds")
    parser.add_argument("--max-time", type=seconds, default=None, metavar="S",
                        help="hide blocks whose total is over S seconds")
    parser.add_argument("--type", action="append", dest="types", default=[], metavar="TYPE",
                        help="keep blocks of this type: trainer, worker, domain (tasks and frames "
                        "of a profiler.Domain), or a block kind (the name up to its first dot: env "
                        "for env.step); repeat for several")
    parser.add_argument("--filter", "--opr-name", type=pattern, default=None, metavar="REGEX",
                        help="keep blocks and operators whose name or path matches REGEX (Python "
                        "syntax; --opr-name is MegEngine's name for it)")
    parser.add_argument("--domain", default=None, metavar="NAME",
                        help="keep the blocks of this domain: the tasks and frames of "
                        "profiler.Domain(NAME)")
    parser.add_argument("--format", choices=ANALYZE_FORMATS, default="table",
                        help="table (default), json (everything, verdicts included) or csv "
                        "(block rows only)")
    _add_profile_analyze_options(parser)
    parser.set_defaults(run=_run_analyze)


def _add_profile_analyze_options(parser: argparse.ArgumentParser) -> None:
    """MegEngine's profile_analyze options for operators (profiler.analysis.profile_analyze_views)."""
    from profiler.analysis.profile_analyze_views import PRINT_ONLY_PARTS

    parser.add_argument("--input-dtype", default=None, metavar="DTYPE",
                        help="keep the operators that had an input of this dtype (float32, int64, ...)")
    parser.add_argument("--print-only", choices=PRINT_ONLY_PARTS, default=None,
                        help="print only the operators' summary, or the operators by device or "
                        "host self time (profile_analyze's layout)")
    parser.add_argument("--show-host", action="store_true",
                        help="profile_analyze's layout, with the operators by host self time too")
    parser.add_argument("--copy-time", action="store_true",
                        help="profile_analyze's layout, with the time spent copying tensors")
    parser.add_argument("--dump-only-opr", action="store_true",
                        help="profile_analyze's layout, one operator a line (for a diff)")
    parser.add_argument("--confluence", "--wiki", action="store_true",
                        help="profile_analyze's layout as Markdown pipe tables")


def _run_analyze(arguments: argparse.Namespace) -> int:
    from profiler.analysis.analyze import AnalyzeOptions, analyze_run, render_analysis
    from profiler.analysis.profile_analyze_views import ProfileAnalyzeView
    from profiler.analysis.text_format import terminal_width

    tree = load_timing_tree(arguments.run_path)
    order_by, ascending = arguments.order_by or (None, False)
    options = AnalyzeOptions(
        top=arguments.top or None,
        order_by=order_by,
        ascending=ascending or arguments.ascending,
        aggregate_by=arguments.aggregate_by,
        aggregate=arguments.aggregate,
        min_time=arguments.min_time,
        max_time=arguments.max_time,
        pattern=arguments.filter,
        types=tuple(arguments.types),
        domain=arguments.domain,
        input_dtype=arguments.input_dtype,
    )
    if options.max_time is not None and options.max_time < options.min_time:
        raise CommandError(f"--max-time {options.max_time:g} is below --min-time {options.min_time:g}: "
                           "no block can match")
    view = ProfileAnalyzeView(print_only=arguments.print_only, show_host=arguments.show_host,
                              copy_time=arguments.copy_time, dump_only_operators=arguments.dump_only_opr,
                              confluence=arguments.confluence)
    if view.asked:
        return _print_profile_analyze_view(tree, options, view, arguments)
    try:
        analysis = analyze_run(tree, options)
    except ValueError as error:  # e.g. --order-by max on a file that records no per-call max
        raise CommandError(f"{arguments.run_path}: {error}") from None
    text = render_analysis(analysis, arguments.format, title=arguments.run_path, width=terminal_width())
    print(text, end="" if text.endswith("\n") else "\n")
    return 0


def _print_profile_analyze_view(tree: dict[str, Any], options: AnalyzeOptions, view: ProfileAnalyzeView,
                                arguments: argparse.Namespace) -> int:
    from profiler.analysis.profile_analyze_views import profile_analyze_text
    from profiler.analysis.text_format import terminal_width

    if arguments.format != "table":
        raise CommandError("--print-only, --show-host, --copy-time, --dump-only-opr and --confluence print "
                           f"profile_analyze's text: leave out --format {arguments.format}")
    try:
        text = profile_analyze_text(
            tree, view, width=terminal_width(), by_type=options.aggregate_by == "type", types=options.types,
            pattern=options.pattern, input_dtype=options.input_dtype, order_by=options.order_by,
            ascending=options.ascending, min_time=options.min_time, max_time=options.max_time, top=options.top)
    except ValueError as error:
        raise CommandError(f"{arguments.run_path}: {error}") from None
    print(text)
    return 0


# --- diff ---------------------------------------------------------------------------------------


def _add_diff(subparsers: Any) -> None:
    from profiler.analysis.diff import DIFF_FORMATS

    parser = subparsers.add_parser(
        "diff",
        help="blocks that got slower or faster between two runs",
        description="Compare two runs block by block, per call and in total, biggest change "
        "first. With --fail-on-regression, exit 1 when a block is slower per call than the "
        "threshold allows (for CI).",
    )
    parser.add_argument("base", metavar="BASE.json", help="the reference run")
    parser.add_argument("new", metavar="NEW.json", help="the run to judge")
    parser.add_argument("--threshold", type=seconds_or_percent("percent"), default=10.0,
                        metavar="PCT", help="per-call change that counts, in percent (default 10)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit 1 when any block got slower per call beyond the threshold")
    parser.add_argument("--min-time", type=seconds, default=0.0, metavar="S",
                        help="ignore blocks under S seconds in both runs (noise floor)")
    parser.add_argument("--top", type=top_count, default=0, metavar="N",
                        help="show the N biggest changes only (default all)")
    parser.add_argument("--all", action="store_true", dest="show_same",
                        help="list unchanged blocks too")
    parser.add_argument("--format", choices=DIFF_FORMATS, default="table",
                        help="table (default), json or csv")
    parser.set_defaults(run=_run_diff)


def _run_diff(arguments: argparse.Namespace) -> int:
    from profiler.analysis.diff import diff_runs, render_diff

    diff = diff_runs(
        load_timing_tree(arguments.base),
        load_timing_tree(arguments.new),
        threshold_percent=arguments.threshold,
        min_time=arguments.min_time,
    )
    text = render_diff(diff, arguments.format, top=arguments.top or None,
                       show_same=arguments.show_same)
    print(text, end="" if text.endswith("\n") else "\n")
    if arguments.fail_on_regression and diff.regressions:
        names = ", ".join(change.block for change in diff.regressions[:5])
        more = f" and {len(diff.regressions) - 5} more" if len(diff.regressions) > 5 else ""
        print(f"rlprof: {len(diff.regressions)} blocks regressed beyond "
              f"{arguments.threshold:g}% per call: {names}{more}", file=sys.stderr)
        return 1
    return 0


# --- convert and report -------------------------------------------------------------------------


def _add_convert(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="write a run as a Chrome trace, speedscope, collapsed stacks, HTML, ML-Agents' layout "
        "or a memory picture",
        description="Convert a timer JSON file for another viewer: chrome (Perfetto, "
        "chrome://tracing), speedscope, collapsed (flamegraph.pl), html (the report), mlagents "
        "(the timer JSON in ML-Agents' timers.json layout, children keyed by name) or memory-svg "
        "(memory over time, one line per process, as an SVG picture).",
    )
    parser.add_argument("run_path", metavar="RUN.json", help="a timer JSON file (rlprof or ML-Agents)")
    parser.add_argument("--to", required=True, metavar="FORMAT",
                        help="chrome, speedscope, collapsed, html, mlagents or memory-svg")
    parser.add_argument("-o", "--output", required=True, type=Path, metavar="OUT",
                        help="the file to write (replaced atomically; - for standard output)")
    parser.set_defaults(run=_run_convert)


def _add_report(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of a run",
        description="Write an HTML report (the verdicts, flame graph, per-worker bars, top "
        "blocks) that opens in a browser with no server and no network.",
    )
    parser.add_argument("run_path", metavar="RUN.json", help="a timer JSON file (rlprof or ML-Agents)")
    parser.add_argument("-o", "--output", type=Path, default=None, metavar="OUT",
                        help="the HTML file to write (replaced atomically); default: next to "
                        "RUN.json, RUN_timers.json giving RUN_report.html")
    parser.set_defaults(run=_run_convert, to="html")  # a report is the html conversion


def report_path_beside(run_path: str | os.PathLike[str]) -> Path:
    """Where ``rlprof report`` writes without ``-o``: beside the run, named as ``rlprof run``
    names its report (``demo_timers.json`` gives ``demo_report.html``)."""
    source = Path(run_path)
    stem = source.name
    for suffix in (".gz", ".json"):
        stem = stem.removesuffix(suffix)
    for suffix in ("_timers", ".timers"):
        if stem.endswith(suffix) and len(stem) > len(suffix):
            stem = stem[: -len(suffix)]
            break
    return source.with_name(f"{stem}_report.html")


def _run_convert(arguments: argparse.Namespace) -> int:
    export = _exporters()
    if arguments.to not in export.EXPORT_FORMATS:
        raise CommandError(
            f"argument --to: unknown format {arguments.to!r} "
            f"(choose from {', '.join(export.EXPORT_FORMATS)})"
        )
    tree = load_timing_tree(arguments.run_path)
    named = arguments.output is not None  # a path rlprof picks is held to stricter rules
    output = arguments.output if named else report_path_beside(arguments.run_path)
    try:
        written = export.write_export(tree, arguments.to, output, named_by_user=named)
    except OSError as error:
        raise CommandError(f"cannot write {output}: {error.strerror or error}") from None
    except export.TraceTooLongError as error:
        raise CommandError(f"{arguments.run_path}: {error}") from None
    if not is_standard_output(written):
        print(written)
    return 0



def _exporters() -> ModuleType:
    """The exporters package, imported only by the commands that write files (it is the heavy part)."""
    import profiler.export as export

    if not hasattr(export, "write_export"):
        raise CommandError(
            "the exporters are missing from this installation (profiler.export.write_export)"
        )
    return export


# --- watch --------------------------------------------------------------------------------------


def _add_watch(subparsers: Any) -> None:
    from profiler.cli.watch import add_watch_command  # it imports the live view

    add_watch_command(subparsers)


# --- run ----------------------------------------------------------------------------------------


MEMORY_INTERVAL_SECONDS = 1.0
"""``rlprof run --memory``'s seconds between two samples of a process's memory: an hour's run
keeps 3,600 per process, and a leak shows once the training loop has run ten seconds (the
``memory_leak`` verdict reads a trend from 8 of the loop's samples)."""


def _add_run(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a Python program under rlprof, unedited, and profile it",
        usage="rlprof run [options] (script.py | -m module) [args ...]",
        description="Run a Python program as python would, with rlprof's timers on. However it "
        "ends (exit, exception, Ctrl-C, SIGTERM), its timers, trace and report are written to "
        "the summaries folder and the analysis is printed on stderr; rlprof then exits as the "
        "program did. rlprof's options go before the program: everything after the script (or "
        "the module) is the program's.",
    )
    parser.add_argument("script", nargs="?", help="the program's path")
    parser.add_argument("-m", dest="module", metavar="module", help="run a module, as python -m")
    parser.add_argument("--summaries-dir", type=Path, metavar="DIR",
                        help="where the files go (default runs/<name>-<date>-<time>)")
    parser.add_argument("--run-id", metavar="ID",
                        help="names the files, ID_timers.json... (default the script's name)")
    parser.add_argument("--vector-env", nargs="?", const="async", choices=("async", "all"),
                        help="build Gymnasium's AsyncVectorEnv as SubprocessEnvManager, so its "
                        "workers are profiled; =all replaces SyncVectorEnv too")
    parser.add_argument("--envs-per-worker", type=envs_per_worker, metavar="N|auto",
                        help="with --vector-env: envs per worker process, or auto (one worker per "
                        "core); default one env per worker")
    parser.add_argument("--no-timeline", dest="timeline", action="store_false",
                        help="do not record when each block ran (the trace then shows totals)")
    parser.add_argument("--timeline-spans", type=positive_count, metavar="N",
                        help=f"spans each of the trainer's threads keeps, the latest (default {DEFAULT_CAPACITY:,}: "
                        "about 10 MB); a longer run's analysis reads the ones kept and scales them to "
                        "the whole run")
    parser.add_argument("--no-framework-phases", dest="framework_phases", action="store_false",
                        help="do not time PyTorch's forward/backward/optimizer step or "
                        "Stable-Baselines3's rollout and train as blocks")
    parser.add_argument("--no-stack-sampler", dest="stack_sampler", action="store_false",
                        help="do not sample the trainer's stack to name where untimed time went")
    parser.add_argument("--live", action="store_true",
                        help="show where the time goes, per worker, with the verdicts, on stderr "
                        "while the program runs (docs/live.md)")
    parser.add_argument("--operators", action="store_true",
                        help="record PyTorch's operators under the blocks that ran them, with "
                        "shapes, FLOPs and CPU memory, through torch.profiler (needs torch; slows "
                        "every operator)")
    parser.add_argument("--memory", nargs="?", const=MEMORY_INTERVAL_SECONDS, type=positive_seconds,
                        metavar="SECONDS", help="sample the memory of the trainer and of every env "
                        f"worker each SECONDS (--memory=0.2; default {MEMORY_INTERVAL_SECONDS:g}): "
                        "each process's course, growth and leaks")
    parser.add_argument("--track-allocations", action="store_true",
                        help="measure each block's Python allocations (tracemalloc: slows every "
                        "allocation), to name the block that keeps memory")
    parser.set_defaults(run=_run_program)


def _run_program(arguments: argparse.Namespace) -> int:
    if (arguments.script is None) == (arguments.module is None):
        raise CommandError("run: give the program to run: a script's path, or -m module")
    program = Program(
        target=arguments.module or arguments.script,
        is_module=arguments.module is not None,
        arguments=tuple(arguments.program_arguments),
    )
    try:
        end = run_program(program, summaries_dir=arguments.summaries_dir, run_id=arguments.run_id,
                          vector_env=arguments.vector_env, envs_per_worker=arguments.envs_per_worker,
                          timeline=arguments.timeline, timeline_spans=arguments.timeline_spans,
                          framework_phases=arguments.framework_phases, stack_sampler=arguments.stack_sampler,
                          live=arguments.live, operators=arguments.operators, memory_interval=arguments.memory,
                          track_allocations=arguments.track_allocations, process_ends_after=True)
    except RunError as error:
        raise CommandError(f"run: {error}") from None
    return exit_like(end)
