"""How the live view looks: a ``rich`` panel on a terminal, one plain line per refresh elsewhere.

Both are made from the same :class:`profiler.analysis.live_figures.LiveFigures`, so a CI log shows
what the terminal showed. The plain line is one line of text, always (``nohup``, CI logs and
``grep`` read it)::

    rlprof live 1m05s: 812 env steps/s (last 5.0 s), 790 since start | envs 62% transport 4% ...
        | slowest worker 3: 18.4 ms a step, last in 100% | verdicts: straggler 68%

``rich`` is imported only by :func:`rich_panel`, which the view calls only once it knows rich is
installed (the ``live`` extra).
"""

from __future__ import annotations

from typing import Any

from profiler.analysis.live_figures import PHASES, LiveFigures, WorkerFigures
from profiler.analysis.text_format import format_bytes, format_percent, format_seconds

__all__ = ["MAX_WORKER_ROWS", "format_elapsed", "plain_line", "rich_panel"]

MAX_WORKER_ROWS = 16
"""Workers shown in the panel's table, slowest first; the rest are counted in one row."""

_BAR_WIDTH = 30


def format_elapsed(seconds: float) -> str:
    """A run's age as a clock reads it: ``42.0s``, ``3m05s``, ``2h07m``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, whole_seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{whole_seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _slowest_first(workers: list[WorkerFigures]) -> list[WorkerFigures]:
    return sorted(workers, key=lambda worker: -(worker.step_seconds or 0.0))


def plain_line(figures: LiveFigures, status: str = "") -> str:
    """The figures as one line of text (see the module docstring)."""
    parts = [f"rlprof live {format_elapsed(figures.elapsed_seconds)}: "
             f"{_rate(figures.env_steps_per_second)} env steps/s "
             f"(last {figures.window_seconds:.1f} s), "
             f"{_rate(figures.env_steps_per_second_since_start)} since start"]
    if figures.phase_shares:
        parts.append(" ".join(f"{phase} {figures.phase_shares[phase] * 100:.0f}%" for phase in PHASES))
    timed = [worker for worker in figures.workers if worker.step_seconds is not None]
    if timed:
        slowest = _slowest_first(timed)[0]
        last = f", last in {format_percent(slowest.last_share)}" if slowest.last_share is not None else ""
        parts.append(f"slowest {slowest.label}: {format_seconds(slowest.step_seconds or 0.0)} a step{last}")
    verdicts = ", ".join(f"{verdict.kind} {format_percent(verdict.share)}" for verdict in figures.verdicts)
    parts.append(f"verdicts: {verdicts or 'none'}")
    if status:
        parts.append(status)
    return " | ".join(parts)


def rich_panel(figures: LiveFigures | None, title: str, status: str = "") -> Any:
    """The view as a ``rich`` renderable: throughput, the phases as bars, the workers, verdicts."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    if figures is None:
        return Panel(Text(status or "waiting for the first figures..."), title=title)
    header = Text.assemble(
        ("env steps/s ", "bold"), (f"{_rate(figures.env_steps_per_second)}", "bold green"),
        f" over the last {figures.window_seconds:.1f} s, "
        f"{_rate(figures.env_steps_per_second_since_start)} since the start "
        f"({format_elapsed(figures.elapsed_seconds)} ago)")
    phases = Table.grid(padding=(0, 1))
    for phase in PHASES:
        share = figures.phase_shares.get(phase)
        if share is None:
            continue
        filled = round(share * _BAR_WIDTH)
        phases.add_row(f"{phase:<9}", Text("█" * filled + "·" * (_BAR_WIDTH - filled), style="cyan"),
                       f"{share * 100:5.1f}%")
    parts: list[Any] = [header, Text("share of the wall time over the window", style="dim"), phases]
    if figures.workers:
        parts.append(_workers_table(figures.workers, Table))
    for verdict in figures.verdicts:
        parts.append(Text.assemble(
            (f"● {verdict.kind} ", "bold red" if verdict.cost_seconds else "bold yellow"),
            f"{format_percent(verdict.share)}: {verdict.title}"))
    if not figures.verdicts:
        parts.append(Text("no verdict over the window", style="green"))
    if status:
        parts.append(Text(status, style="dim"))
    return Panel(Group(*parts), title=title)


def _workers_table(workers: list[WorkerFigures], table_class: Any) -> Any:
    table = table_class(box=None, padding=(0, 1), header_style="bold")
    for column in ("worker", "step (window)", "steps/s", "last", "memory"):
        table.add_column(column, justify="left" if column == "worker" else "right")
    ordered = _slowest_first(workers)
    for worker in ordered[:MAX_WORKER_ROWS]:
        table.add_row(
            worker.label,
            "-" if worker.step_seconds is None else format_seconds(worker.step_seconds),
            _rate(worker.steps_per_second),
            format_percent(worker.last_share),
            "-" if worker.memory_bytes is None else format_bytes(worker.memory_bytes),
        )
    if len(ordered) > MAX_WORKER_ROWS:
        table.add_row(f"... {len(ordered) - MAX_WORKER_ROWS} more", "", "", "", "")
    return table
