"""The run's memory over time as one SVG picture, ``memory_flow.svg``: time across, memory up, one
line per process, the trainer's blocks shaded behind the lines.

It reads the dump's ``memory`` section (samples every process took of itself, see
:mod:`profiler.recording.memory`) and, for the shading, the trainer's outermost recorded spans (the
``timeline`` section; without one, nothing is shaded and a note says so). The same chart is the
memory section of the HTML report (:func:`memory_chart`), so both show the run on one time axis:
seconds from the run's first sample or span.

A run that sampled no memory still gets a picture, saying so, since ``Profiler(formats=[...])``
writes every format asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from profiler.analysis.memory_advice import made_by_rlprof_run, sampling_advice
from profiler.tree.strict_json import escape_markup, printable_text

__all__ = ["PROCESS_COLORS", "memory_chart", "to_memory_svg"]

PROCESS_COLORS = ("#1f5f8b", "#c0262d", "#2e8b57", "#b8430f", "#6a3d9a", "#8c6d1f", "#0e7c86", "#d6337a")
"""Line colours, one per process in the order of the memory section (then repeated)."""
BLOCK_COLORS = ("#f2c14e", "#9cc3de", "#b5d99c", "#f4a6a6", "#cdb4db", "#ffd6a5")
"""Shading colours of the trainer's outermost blocks, one per block name (then repeated)."""
MAX_SHADED_NAMES = len(BLOCK_COLORS)
"""Block names shaded, those with the most time first; the rest are left unshaded."""
MEBIBYTE = 1024 * 1024

_WIDTH, _HEIGHT = 980, 440
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 230, 36, 44


@dataclass(frozen=True)
class _Frame:
    """Where seconds and bytes land on the picture."""

    start: float
    end: float
    top_bytes: float

    def x(self, seconds: float) -> float:
        span = (self.end - self.start) or 1.0
        return _LEFT + (seconds - self.start) / span * (_WIDTH - _LEFT - _RIGHT)

    def y(self, byte_count: float) -> float:
        return _HEIGHT - _BOTTOM - byte_count / self.top_bytes * (_HEIGHT - _TOP - _BOTTOM)


def to_memory_svg(tree: dict[str, Any]) -> str:
    """The standalone SVG document (``rlprof convert --to memory-svg``)."""
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + memory_chart(tree) + "\n"


def memory_chart(tree: dict[str, Any]) -> str:
    """The chart as an ``<svg>`` element, for a file or for inlining in HTML."""
    processes = [process for process in (tree.get("memory") or {}).get("processes", []) if process["samples"]]
    spans = _outermost_trainer_spans(tree)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH} {_HEIGHT}" width="{_WIDTH}" '
        f'height="{_HEIGHT}" font-family="sans-serif" font-size="12" role="img">',
        "<title>Memory over time, one line per process</title>",
        f'<rect width="{_WIDTH}" height="{_HEIGHT}" fill="#ffffff"/>',
    ]
    if not processes:
        parts.append(
            f'<text x="{_WIDTH / 2}" y="{_HEIGHT / 2}" text-anchor="middle" fill="#5c6670">No memory '
            f"samples in this run: {_text(sampling_advice(made_by_rlprof_run(tree)))}</text>"
        )
        return "".join(parts) + "</svg>"
    moments = [sample[0] for process in processes for sample in process["samples"]]
    moments += [moment for _, start, end in spans for moment in (start, end)]
    highest = max(sample[1] for process in processes for sample in process["samples"])
    frame = _Frame(min(moments), max(moments), _nice_ceiling(highest))
    with_unique = any(sample[2] is not None for process in processes for sample in process["samples"])
    parts.append(
        f'<text x="{_LEFT}" y="20" font-size="14" font-weight="bold">Memory over time, one line per '
        f'process (resident set{"; dashed: unique set" if with_unique else ""})</text>'
    )
    parts.extend(_shading(spans, frame))
    parts.extend(_axes(frame))
    for index, process in enumerate(processes):
        parts.extend(_process_lines(process, PROCESS_COLORS[index % len(PROCESS_COLORS)], frame))
    parts.extend(_legend(processes, _shaded_names(spans), bool(tree.get("timeline"))))
    return "".join(parts) + "</svg>"


def _text(value: Any) -> str:
    """Escaped for SVG text and attributes; a lone surrogate (which no UTF-8 file can hold) as
    its escape."""
    return escape_markup(printable_text(str(value)))


def _nice_ceiling(byte_count: float) -> float:
    """A round top for the memory axis, a little above ``byte_count`` (1, 2 or 5 x 10^n MiB)."""
    mebibytes = max(byte_count / MEBIBYTE, 1.0) * 1.05
    power = 10 ** math.floor(math.log10(mebibytes))
    for step in (1, 2, 5, 10):
        if mebibytes <= step * power:
            return step * power * MEBIBYTE
    return 10 * power * MEBIBYTE


def _outermost_trainer_spans(tree: dict[str, Any]) -> list[tuple[str, float, float]]:
    """The spans of the trainer's first thread that no other of its spans encloses."""
    timeline = tree.get("timeline") or {}
    processes = timeline.get("processes") or []
    if not processes or not processes[0].get("threads"):
        return []
    spans = sorted(processes[0]["threads"][0].get("spans", []), key=lambda span: (span[1], -span[2]))
    outermost: list[tuple[str, float, float]] = []
    for name, start, end, *_ in spans:
        if outermost and start < outermost[-1][2]:
            continue  # inside the span before it
        outermost.append((name, start, end))
    return outermost


def _shaded_names(spans: list[tuple[str, float, float]]) -> list[str]:
    time_by_name: dict[str, float] = {}
    for name, start, end in spans:
        time_by_name[name] = time_by_name.get(name, 0.0) + end - start
    return sorted(time_by_name, key=lambda name: (-time_by_name[name], name))[:MAX_SHADED_NAMES]


def _shading(spans: list[tuple[str, float, float]], frame: _Frame) -> list[str]:
    """A light band per span, adjacent bands of one name merged where they touch on the picture
    (a long run has many thousands of spans narrower than a pixel)."""
    colors = {name: BLOCK_COLORS[index] for index, name in enumerate(_shaded_names(spans))}
    bands: list[list[Any]] = []
    for name, start, end in spans:
        if name not in colors:
            continue
        left, right = frame.x(start), frame.x(end)
        if bands and bands[-1][0] == name and left - bands[-1][2] < 0.5:
            bands[-1][2] = max(bands[-1][2], right)
        else:
            bands.append([name, left, right])
    height = _HEIGHT - _TOP - _BOTTOM
    return [
        f'<rect x="{left:.2f}" y="{_TOP}" width="{max(right - left, 0.5):.2f}" height="{height}" '
        f'fill="{colors[name]}" fill-opacity="0.35"><title>{_text(name)}</title></rect>'
        for name, left, right in bands
    ]


def _axes(frame: _Frame) -> list[str]:
    bottom, right = _HEIGHT - _BOTTOM, _WIDTH - _RIGHT
    parts = [
        f'<line x1="{_LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#5c6670"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{bottom}" stroke="#5c6670"/>',
    ]
    for tick in range(6):
        byte_count = frame.top_bytes * tick / 5
        y = frame.y(byte_count)
        parts.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#eef0f2"/>')
        parts.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                     f"{byte_count / MEBIBYTE:g} MiB</text>")
    duration = frame.end - frame.start
    for tick in range(6):
        seconds = duration * tick / 5
        x = frame.x(frame.start + seconds)
        parts.append(f'<text x="{x:.1f}" y="{bottom + 18}" text-anchor="middle">{_seconds_label(seconds)}</text>')
    parts.append(f'<text x="{(_LEFT + right) / 2}" y="{_HEIGHT - 6}" text-anchor="middle" '
                 'fill="#5c6670">time since the run\'s first sample or block</text>')
    return parts


def _seconds_label(seconds: float) -> str:
    if seconds >= 1 or seconds == 0:
        return f"{seconds:.3g} s"
    return f"{seconds * 1e3:.3g} ms"


def _process_lines(process: dict[str, Any], color: str, frame: _Frame) -> list[str]:
    samples = sorted(process["samples"], key=lambda sample: sample[0])
    resident = " ".join(f"{frame.x(sample[0]):.1f},{frame.y(sample[1]):.1f}" for sample in samples)
    parts = [f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{resident}">'
             f"<title>{_text(process['name'])}</title></polyline>"]
    unique = [sample for sample in samples if sample[2] is not None]
    if unique:
        points = " ".join(f"{frame.x(sample[0]):.1f},{frame.y(sample[2]):.1f}" for sample in unique)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" stroke-dasharray="5 3" '
                     f'points="{points}"><title>{_text(process["name"])} (unique set)</title></polyline>')
    return parts


def _legend(processes: list[dict[str, Any]], shaded: list[str], recorded: bool) -> list[str]:
    x = _WIDTH - _RIGHT + 16
    y = _TOP + 8
    parts = []
    for index, process in enumerate(processes):
        color = PROCESS_COLORS[index % len(PROCESS_COLORS)]
        peak = max(sample[1] for sample in process["samples"]) / MEBIBYTE
        parts.append(f'<line x1="{x}" y1="{y}" x2="{x + 18}" y2="{y}" stroke="{color}" stroke-width="3"/>')
        parts.append(f'<text x="{x + 24}" y="{y + 4}">{_text(process["name"])} (peak {peak:.1f} MiB)</text>')
        y += 18
    y += 8
    if not recorded:
        parts.append(f'<text x="{x}" y="{y + 4}" fill="#5c6670">no timeline recorded:</text>')
        parts.append(f'<text x="{x}" y="{y + 20}" fill="#5c6670">blocks not shaded</text>')
        return parts
    for index, name in enumerate(shaded):
        parts.append(f'<rect x="{x}" y="{y - 7}" width="18" height="12" fill="{BLOCK_COLORS[index]}" '
                     'fill-opacity="0.6"/>')
        parts.append(f'<text x="{x + 24}" y="{y + 4}">{_text(name)}</text>')
        y += 18
    return parts
