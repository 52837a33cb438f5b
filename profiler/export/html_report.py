"""A self-contained HTML report of a run: one file a user opens in a browser, no server needed.

It shows, top to bottom: the verdicts (what limits the run, what it costs, the evidence and what
to change — the same ones ``rlprof analyze`` prints, from :mod:`profiler.analysis.verdicts`), a
summary, an icicle flame graph of the merged tree (hover for the numbers, click to zoom),
per-worker bars for the block workers spend their time in (a worker the verdicts name a straggler
in red), gauges and recorded counters over time, each process's memory over time (when sampled),
the top blocks, and the run's metadata.

Everything is inline (style, script, SVG) and a Content-Security-Policy forbids fetching anything,
so the report works offline and leaks nothing. Block names are user strings: every one goes
through :func:`profiler.tree.strict_json.escape_markup` (``html.escape``) here, and the script
writes names only as text.
"""

from __future__ import annotations

import math
import os
from typing import Any, Iterable

from profiler.analysis.device_report import device_blocks
from profiler.analysis.frames import FrameStat, frame_stats
from profiler.analysis.memory_advice import RUN_METADATA, made_by_rlprof_run, sampling_advice
from profiler.analysis.run_measurements import RunMeasurements, read_measurements
from profiler.analysis.text_format import format_bytes
from profiler.analysis.worker_groups import compared_workers
from profiler.analysis.verdict_text import format_evidence_value
from profiler.analysis.verdicts import STRAGGLER, RunVerdicts, judge_run
from profiler.export.counter_names import counter_explanation, format_counter
from profiler.export.flame_graph import FlameBox, lay_out_flame_graph, untimed_note
from profiler.export.html_report_assets import REPORT_CSS, REPORT_SCRIPT
from profiler.export.process_trees import split_into_process_trees
from profiler.export.worker_blocks import main_worker_block, worker_block_times
from profiler.tree.strict_json import escape_markup, named_reading

__all__ = ["TOP_BLOCKS", "to_html_report"]

TOP_BLOCKS = 30
"""Rows in the top-blocks table; the rest of the blocks are in the flame graph."""

FRAME_HEIGHT_PX = 18
WORKER_BAR_HEADROOM = 1.25
"""The worker bars' scale: the largest mean time per call, plus a quarter."""
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
)


def to_html_report(tree: dict[str, Any]) -> str:
    """The whole report page for a normalized timer tree, as one HTML string."""
    metadata = tree.get("metadata") or {}
    run_name = _run_name(metadata)
    measurements = read_measurements(tree)
    verdicts = judge_run(tree, measurements)
    sections = [
        _verdicts_section(verdicts),
        _summary_section(tree),
        _flame_graph_section(tree),
        _workers_section(compared_workers(tree), verdicts, measurements),
        _gauges_section(tree),
        _memory_section(tree),
        _device_section(tree),
        _top_blocks_section(tree),
        _frames_section(frame_stats(tree)),
        _metadata_section(metadata),
    ]
    return "".join(
        [
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
            f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">\n',
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f"<title>rlprof report: {_text(run_name)}</title>\n",
            f"<style>{REPORT_CSS}</style>\n</head>\n<body>\n",
            f"<h1>rlprof report: {_text(run_name)}</h1>\n",
            *sections,
            '<div id="tooltip" role="tooltip"></div>\n',
            f"<script>{REPORT_SCRIPT}</script>\n</body>\n</html>\n",
        ]
    )


def _run_name(metadata: dict[str, Any]) -> str:
    """The run's name: its ``run_id``, else the program ``rlprof run`` ran, else the script of its
    command line; every report then says which run it is."""
    if metadata.get("run_id"):
        return str(metadata["run_id"])
    program = metadata.get(RUN_METADATA) or next(
        (word for word in str(metadata.get("command_line_arguments", "")).split() if word.endswith(".py")),
        None)
    return os.path.basename(str(program)) if program else "rlprof run"


def _text(value: Any) -> str:
    """Escape for element text and quoted attribute values alike."""
    return escape_markup(str(value))


def _seconds(seconds: float) -> str:
    """A duration in the unit that keeps it readable: 1.23 s, 45.6 ms, 789 µs."""
    if seconds >= 1:
        return f"{seconds:.3g} s" if seconds < 100 else f"{seconds:,.0f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e9:.3g} ns" if seconds > 0 else "0 s"


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.1f} %"


def _summary_section(tree: dict[str, Any]) -> str:
    timeline = tree.get("timeline")
    block_count = sum(1 for _ in _walk(tree)) - 1
    facts = [
        (_seconds(tree["total"]), "wall time (root total)"),
        (f"{block_count}", "blocks"),
        (f"{len(tree.get('workers') or [])}", "worker trees"),
        ("recorded" if timeline else "none", "timeline"),
    ]
    if timeline and timeline.get("dropped"):
        facts.append((f"{timeline['dropped']}", "spans dropped (buffer full)"))
    cards = "".join(f"<div><b>{_text(value)}</b><span>{_text(label)}</span></div>" for value, label in facts)
    return f'<section id="summary"><div class="summary">{cards}</div></section>\n'


def _flame_graph_section(tree: dict[str, Any]) -> str:
    boxes = lay_out_flame_graph(tree)
    depth = max(box.depth for box in boxes) + 1
    frames = "".join(_flame_frame(box) for box in boxes)
    return (
        '<section id="flame-graph"><h2>Flame graph of the merged tree</h2>\n'
        '<p class="note">Each bar is a block, as wide as its total time, below the block it ran in. '
        "Hover for the numbers; click a bar to zoom in on it.</p>\n"
        '<div class="flame-tools"><button id="flame-reset" type="button">Reset zoom</button>'
        '<span><span class="legend-swatch" style="background:hsl(28,80%,66%)"></span>trainer</span>'
        '<span><span class="legend-swatch" style="background:hsl(205,60%,70%)"></span>'
        "ran in parallel (workers, threads), drawn inside the block it ran beside</span></div>\n"
        f'<div id="flame" style="height:{depth * FRAME_HEIGHT_PX}px">{frames}</div>{_untimed_line(tree)}'
        "</section>\n"
    )


def _untimed_line(tree: dict[str, Any]) -> str:
    note = untimed_note(tree)
    return f'<p class="note" id="flame-untimed">{_text(note[0].upper() + note[1:])}.</p>' if note else ""


def _flame_frame(box: FlameBox) -> str:
    attributes = {
        "data-name": box.name,
        "data-x": repr(box.start),
        "data-w": repr(box.width),
        "data-depth": str(box.depth),
        "data-total": _seconds(box.total),
        "data-self": _seconds(box.self_time),
        "data-count": f"{box.count:,}" if box.count else "",
        "data-note": box.note,
        "data-share": _percent(box.share),
        "data-parallel": "true" if box.is_parallel else "false",
    }
    hidden = " hidden" if box.width <= 0 else ""
    style = (
        f"left:{box.start * 100:.6f}%;width:{box.width * 100:.6f}%;"
        f"top:{box.depth * FRAME_HEIGHT_PX}px;background:{_frame_color(box)}"
    )
    attribute_text = " ".join(f'{key}="{_text(value)}"' for key, value in attributes.items())
    return f'<div class="frame{hidden}" style="{style}" {attribute_text}>{_text(box.name)}</div>'


def _frame_color(box: FlameBox) -> str:
    """Warm for the trainer, cool for parallel blocks; the name picks a stable shade."""
    shade = sum(box.name.encode("utf-8", "backslashreplace")) % 30
    if box.is_parallel:
        return f"hsl({190 + shade},58%,{68 + shade % 8}%)"
    return f"hsl({12 + shade},78%,{62 + shade % 8}%)"


def _verdicts_section(run_verdicts: RunVerdicts) -> str:
    """The verdicts, costliest first, each with its cost, evidence and suggestion."""
    items = []
    for verdict in run_verdicts.verdicts:
        cost = (f'<span class="cost">costs {_text(_seconds(verdict.cost_seconds))} '
                f"({_text(_percent(verdict.share or 0.0))} of the wall time)</span>"
                if verdict.cost_seconds > 0 else '<span class="cost">a finding, no cost</span>')
        evidence = "".join(
            f"<tr><th>{_text(key)}</th><td>{_text(format_evidence_value(key, value))}</td></tr>"
            for key, value in verdict.evidence.items())
        finding = " finding" if verdict.cost_seconds <= 0 else ""
        items.append(
            f'<li class="verdict{finding}" data-kind="{_text(verdict.kind)}">'
            f'<div><span class="tag">{_text(verdict.kind)}</span> {_text(verdict.title)}</div>'
            f"<div>{cost}</div><p class=\"suggestion\">{_text(verdict.suggestion)}</p>"
            f"<details><summary>evidence</summary><table>{evidence}</table></details></li>\n")
    if not items:
        items.append('<li class="verdict finding">Nothing stands out: no part of the run crosses '
                     "a verdict's threshold.</li>\n")
    unknown = "".join(f"<li>{_text(line)}</li>" for line in run_verdicts.cannot_tell)
    cannot_tell = (f'<p class="note">Cannot tell from this file:</p><ul class="note">{unknown}</ul>\n'
                   if unknown else "")
    return (
        '<section id="verdicts"><h2>Verdicts</h2>\n'
        '<p class="note">What limits this run, costliest first: the same verdicts '
        "<code>rlprof analyze</code> prints.</p>\n"
        f'<ol class="verdicts">{"".join(items)}</ol>\n{cannot_tell}</section>\n'
    )


def _workers_section(
    workers: list[dict[str, Any]], run_verdicts: RunVerdicts, measurements: RunMeasurements
) -> str:
    heading = '<section id="workers"><h2>Workers</h2>\n'
    block_name = main_worker_block(workers)
    rows = worker_block_times(workers, block_name) if block_name is not None else []
    if not rows:
        return heading + '<p class="note">This run has no per-worker trees.</p></section>\n'
    stragglers = {verdict.evidence.get("worker_id") for verdict in run_verdicts.of_kind(STRAGGLER)}
    last_shares = {worker.worker_id: worker.critical_path.last_share
                   for worker in measurements.workers if worker.critical_path is not None}
    # Where each worker ran, when the run recorded it (workers on other machines: Ray actors).
    hosts = {worker.get("worker_id"): worker["host"] for worker in workers if isinstance(worker.get("host"), str)}
    # Scaled to the largest mean, with headroom: one slow call (a reset, a first step) must not
    # shrink every mean to nothing. A longest call beyond the scale is drawn at its end.
    longest = max(row.mean for row in rows) * WORKER_BAR_HEADROOM or 1.0
    lines = []
    for row in rows:
        detail = f"mean {_seconds(row.mean)} × {row.count:,}"
        if row.max is not None:
            detail += f", max {_seconds(row.max)}" + (" (off the scale)" if row.max > longest else "")
        if row.worker_id in last_shares:
            detail += f", last in {_percent(last_shares[row.worker_id])} of steps"
        is_straggler = row.worker_id in stragglers
        if is_straggler:
            detail += " · straggler (see the verdicts)"
        max_marker = (
            f'<div class="max" style="left:{min(row.max / longest, 1.0) * 100:.3f}%"></div>'
            if row.max is not None else ""
        )
        lines.append(
            f'<div class="worker-row{" straggler" if is_straggler else ""}">'
            f'<span class="worker-name">{_text(row.worker)}{_host_label(hosts.get(row.worker_id))}</span>'
            f'<div class="worker-bar"><div class="mean" style="width:{row.mean / longest * 100:.3f}%"></div>'
            f"{max_marker}</div><span>{_text(detail)}</span></div>\n"
        )
    return (
        heading
        + f'<p class="note">Mean time per call of <code>{_text(block_name)}</code>, the block the '
        "workers spend the most time in, on a scale to the largest mean (the grey tick is the longest "
        "call, where recorded, at the end of the bar when it is off the scale). A vector "
        "step waits for its slowest worker; a worker is marked a straggler only when the verdicts "
        "name it.</p>\n"
        + "".join(lines)
        + "</section>\n"
    )


def _host_label(host: str | None) -> str:
    return "" if host is None else f' <span class="note">@ {_text(host)}</span>'


def _gauges_section(tree: dict[str, Any]) -> str:
    rows = []
    for process_tree in split_into_process_trees(tree):
        for name, gauge in (process_tree.gauges or {}).items():
            explanation = counter_explanation(name)
            about = f'<br><span class="note">{_text(explanation)}</span>' if explanation else ""
            readings = [_figure(name, gauge[key]) for key in ("value", "min", "max")]
            rows.append(
                f'<tr><td class="name">{_text(process_tree.name)}</td>'
                f'<td class="name">{_text(name)}{about}</td>'
                + "".join(f'<td class="number">{_text(reading)}</td>' for reading in readings)
                + f'<td class="number">{gauge["count"]:,}</td></tr>\n'
            )
    table = (
        "<table><thead><tr><th>process</th><th>gauge</th><th class=\"number\">last</th>"
        '<th class="number">min</th><th class="number">max</th><th class="number">count</th></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table>\n"
        if rows
        else '<p class="note">No gauges were set in this run.</p>\n'
    )
    charts = _counter_charts(tree.get("timeline"))
    return f'<section id="gauges"><h2>Gauges and counters</h2>\n{table}{charts}</section>\n'


def _counter_charts(timeline: dict[str, Any] | None) -> str:
    """One line chart per recorded counter series, time from the run's first sample."""
    if not timeline:
        return ""
    series: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for process in timeline.get("processes", []):
        for name, moment, value, *_details in process.get("counters", []):
            key = (str(process.get("name") or process.get("pid")), name)
            series.setdefault(key, []).append((moment, value))
    if not series:
        return ""
    origin = min(moment for points in series.values() for moment, _ in points)
    end = max(moment for points in series.values() for moment, _ in points)
    charts = [_counter_chart(process, name, sorted(points), origin, end) for (process, name), points in series.items()]
    return "<h3>Counters over time</h3>\n" + "".join(charts)


def _figure(name: str, number: float) -> str:
    """A counter's or gauge's figure in its unit (see :mod:`profiler.export.counter_names`);
    NaN and the infinities spelled as in the JSON file."""
    return format_counter(name, number) if math.isfinite(number) else str(named_reading(number))


def _counter_chart(
    process: str, name: str, points: list[tuple[float, float]], origin: float, end: float
) -> str:
    width, height, margin = 1000.0, 80.0, 6.0
    # NaN and infinite samples have no place on the line; the caption counts them instead.
    last = points[-1][1]
    drawn = [(moment, value) for moment, value in points if math.isfinite(value)]
    not_drawn = len(points) - len(drawn)
    if not drawn:
        caption = f"{process}: {name} (every one of {len(points)} samples is NaN or infinite)"
        return f'<div class="counter-chart"><div>{_text(caption)}</div></div>\n'
    points = drawn
    low = min(value for _, value in points)
    high = max(value for _, value in points)
    span = (end - origin) or 1.0
    value_span = (high - low) or 1.0
    coordinates = " ".join(
        f"{(moment - origin) / span * width:.1f},"
        f"{height - margin - (value - low) / value_span * (height - 2 * margin):.1f}"
        for moment, value in points
    )
    caption = (f"{process}: {name} (min {_figure(name, low)}, max {_figure(name, high)}, "
               f"last {_figure(name, last)}; {_seconds(end - origin)} shown)")
    explanation = counter_explanation(name)
    if explanation:
        caption += f": {explanation}"
    if not_drawn:
        caption += f"; {not_drawn} NaN or infinite samples not drawn"
    return (
        f'<div class="counter-chart"><div>{_text(caption)}</div>'
        f'<svg viewBox="0 0 {width:.0f} {height:.0f}" preserveAspectRatio="none" role="img" '
        f'aria-label="{_text(name)}"><polyline fill="none" stroke="#b8430f" stroke-width="2" '
        f'vector-effect="non-scaling-stroke" points="{coordinates}"/></svg></div>\n'
    )


def _memory_section(tree: dict[str, Any]) -> str:
    """One line per process on the run's time axis (the picture ``memory_flow.svg`` holds), and
    each process's peak and growth."""
    heading = '<section id="memory"><h2>Memory over time</h2>\n'
    report = None
    if tree.get("memory"):  # the memory modules are imported only for the runs that sampled it
        from profiler.analysis.memory_report import memory_report
        from profiler.export.memory_flow import memory_chart

        report = memory_report(tree)
    if report is None or not report.processes:
        return (heading + '<p class="note">This run did not sample its memory: '
                f"{_text(sampling_advice(made_by_rlprof_run(tree)))} to see each process's memory over time."
                "</p></section>\n")
    rows = "".join(
        f'<tr><td class="name">{_text(process.name)}</td>'
        f'<td class="number">{_text(format_bytes(process.peak_bytes))}</td>'
        f'<td class="number">{_text(format_bytes(process.start_bytes))}</td>'
        f'<td class="number">{_text(format_bytes(process.end_bytes))}</td>'
        f'<td class="number">{_text(format_bytes(process.growth_bytes))}</td>'
        f'<td class="number">{process.samples:,}</td></tr>\n'
        for process in report.processes
    )
    return (
        heading
        + '<p class="note">Each process sampled its own resident memory; the trainer\'s outermost '
        "blocks are shaded behind the lines. A process whose memory grows steadily through the training "
        "loop (the whole run, where the timeline does not tell the loop) is named in the verdicts.</p>\n"
        + f'<div class="memory-chart">{memory_chart(tree)}</div>\n'
        + '<table><thead><tr><th>process</th><th class="number">peak</th><th class="number">start'
        '</th><th class="number">end</th><th class="number">growth</th><th class="number">samples'
        f"</th></tr></thead><tbody>{rows}</tbody></table></section>\n"
    )


def _top_blocks_section(tree: dict[str, Any]) -> str:
    """Blocks summed by name over the whole merged tree, most self time first.

    A trainer block and a parallel block of the same name (``send`` on both ends of a pipe) stay
    apart: they ran in different processes.
    """
    by_name: dict[tuple[str, bool], dict[str, Any]] = {}
    for node in list(_walk(tree))[1:]:
        key = (node["name"], bool(node.get("is_parallel")))
        entry = by_name.setdefault(key, {"total": 0.0, "self": 0.0, "count": 0, "min": None, "max": None})
        entry["total"] += node["total"]
        entry["self"] += node["self"]
        entry["count"] += node["count"]
        if "min" in node and node["count"]:
            entry["min"] = node["min"] if entry["min"] is None else min(entry["min"], node["min"])
            entry["max"] = node["max"] if entry["max"] is None else max(entry["max"], node["max"])
    wall = tree["total"] or 1.0
    ranked = sorted(by_name.items(), key=lambda item: item[1]["self"], reverse=True)[:TOP_BLOCKS]
    rows = []
    for (name, is_parallel), entry in ranked:
        mean = entry["total"] / entry["count"] if entry["count"] else 0.0
        tag = '<span class="tag">parallel</span>' if is_parallel else ""
        cells = [
            (entry["self"], _seconds(entry["self"])),
            (entry["total"], _seconds(entry["total"])),
            (entry["count"], f"{entry['count']:,}"),
            (mean, _seconds(mean)),
            _extreme_cell(entry["min"]),
            _extreme_cell(entry["max"]),
            (entry["total"] / wall, _percent(entry["total"] / wall)),
        ]
        rows.append(
            f'<tr><td class="name" data-value="{_text(name)}">{_text(name)}{tag}</td>'
            + "".join(f'<td class="number" data-value="{value!r}">{_text(shown)}</td>' for value, shown in cells)
            + "</tr>\n"
        )
    headers = ["self", "total", "calls", "mean per call", "shortest call", "longest call",
               "share of wall time"]
    header_cells = "".join(f'<th class="number sortable">{_text(header)}</th>' for header in headers)
    return (
        '<section id="top-blocks"><h2>Top blocks</h2>\n'
        f'<p class="note">The {TOP_BLOCKS} blocks with the most self time, each name summed over '
        "every place it appears, with its shortest and longest single call (– where the file does "
        "not record them). Click a heading to sort. Parallel blocks ran beside the trainer, so "
        "their share can exceed 100 %.</p>\n"
        '<table class="sortable"><thead><tr><th class="sortable">block</th>'
        f"{header_cells}</tr></thead><tbody>{''.join(rows)}</tbody></table></section>\n"
    )


def _frames_section(frames: list[FrameStat]) -> str:
    """The frames timed by ``profiler.Frame`` objects; nothing for runs that time none."""
    if not frames:
        return ""
    rows = []
    for frame in frames:
        cells = [
            f"{frame.count:,}",
            _seconds(frame.mean),
            _seconds(frame.min_time) if frame.min_time is not None else "–",
            _seconds(frame.max_time) if frame.max_time is not None else "–",
            f"{frame.rate:.1f}" if frame.rate is not None else "–",
        ]
        domain = f' <span class="tag">{_text(frame.domain)}</span>' if frame.domain else ""
        rows.append(f'<tr><td class="name">{_text(frame.label)}{domain}</td>'
                    + "".join(f'<td class="number">{_text(cell)}</td>' for cell in cells) + "</tr>\n")
    headers = "".join(f'<th class="number">{_text(header)}</th>'
                      for header in ("frames", "mean frame time", "shortest", "longest", "frames per second"))
    return (
        '<section id="frames"><h2>Frames</h2>\n'
        '<p class="note">Periods timed by <code>profiler.Frame</code> objects, with their domain. '
        "Frames per second is per second of frame time (1 / mean): the loop's rate when frames "
        "run back to back.</p>\n"
        f'<table><thead><tr><th>frame</th>{headers}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        "</section>\n"
    )


def _device_section(tree: dict[str, Any]) -> str:
    """Each block timed on a GPU, its device time beside its host time; nothing for a run
    without device time (see profiler.analysis.device_report)."""
    blocks = device_blocks(tree)
    if not blocks:
        return ""
    rows = []
    for block in blocks:
        host = _seconds(block.host_seconds) if block.host_seconds is not None else "–"
        ratio = (f"{block.device_seconds / block.host_seconds:.2f}"
                 if block.host_seconds else "–")
        cells = [block.process, block.device, block.mode, f"{block.count:,}", host,
                 _seconds(block.device_seconds), ratio]
        rows.append(f'<tr><td class="name">{_text(block.name)}</td>'
                    + "".join(f'<td class="number">{_text(cell)}</td>' for cell in cells) + "</tr>\n")
    headers = "".join(f'<th class="number">{_text(header)}</th>' for header in
                      ("process", "device", "mode", "calls", "host time", "device time", "device / host"))
    return (
        '<section id="device-time"><h2>Device time</h2>\n'
        '<p class="note">Blocks timed on a GPU. Host time is how long the host took to queue the '
        "block's kernels; device time is how long the device's stream took from the block's start "
        "to its end (mode events), or the host time of a block that synchronised the device "
        "(mode sync). A device / host ratio well above 1: the host time saw the launches only.</p>\n"
        f'<table><thead><tr><th>block</th>{headers}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        "</section>\n"
    )


def _extreme_cell(seconds: float | None) -> tuple[float, str]:
    """A shortest/longest-call cell: sorts below every figure when the file does not record it."""
    return (-1.0, "–") if seconds is None else (seconds, _seconds(seconds))


def _metadata_section(metadata: dict[str, str]) -> str:
    rows = "".join(
        f'<tr><th>{_text(key)}</th><td class="name">{_text(value)}</td></tr>\n' for key, value in metadata.items()
    )
    body = f"<table>{rows}</table>" if rows else '<p class="note">The run recorded no metadata.</p>'
    return f'<section id="metadata"><h2>Run metadata</h2>\n{body}</section>\n'


def _walk(node: dict[str, Any]) -> Iterable[dict[str, Any]]:
    yield node
    for child in node["children"]:
        yield from _walk(child)
