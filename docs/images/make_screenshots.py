"""Regenerate the pictures of docs/outputs.md with headless Chromium.

    python docs/images/make_screenshots.py

The run in the pictures is simulated (a trainer stepping four environment workers, worker 3 slow),
so the pictures are the same on every machine and show every part of the outputs: a recorded
timeline, worker trees, counters. It writes ``report.png``, ``flame_graph.png`` and ``trace.png``
next to this file. Perfetto itself is a web app that cannot be driven offline, so ``trace.png``
shows the exported trace drawn the way Perfetto lays it out: a group per process, a track per
thread, nested slices, counter tracks and instant markers.
"""

from __future__ import annotations

import html
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY))

from profiler.export import render  # noqa: E402
from profiler.export.chrome_trace import to_chrome_trace  # noqa: E402
from profiler.tree.timer_json import normalize_timing_tree  # noqa: E402

IMAGES = Path(__file__).resolve().parent
WORKERS, STEPS, STRAGGLER = 4, 12, 3
TRAINER_PID, FIRST_WORKER_PID = 31000, 31001


# --- the simulated run --------------------------------------------------------------------------

def simulate_run() -> dict[str, Any]:
    """Spans of a trainer and its workers, and the timer tree they add up to."""
    trainer: list[list[Any]] = []
    workers: list[list[list[Any]]] = [[] for _ in range(WORKERS)]
    cpu: list[list[Any]] = []
    start = now = 100.0
    for step in range(STEPS):
        trainer.append(["policy.act", now, now + 0.0021])
        now += 0.0021
        step_start = now
        trainer.append(["send", now, now + 0.0002])
        now += 0.0002
        replies = []
        for worker in range(WORKERS):
            begin = now + 0.00005 * (worker + 1)
            seconds = 0.004 * (1 + ((step * 7 + worker * 3) % 5) / 25) * (2.2 if worker == STRAGGLER else 1)
            workers[worker] += [["env.step", begin, begin + seconds], ["send", begin + seconds, begin + seconds + 0.0003]]
            replies.append(begin + seconds + 0.0003)
        trainer.append(["wait", now, max(replies)])
        now = max(replies)
        trainer.append(["recv", now, now + 0.0004])
        now += 0.0004
        trainer.append(["vector.step", step_start, now])
        cpu.append(["cpu_percent", now, 35.0 + 50.0 * (step % 4 == 3) + 3 * (step % 3)])
        if step % 4 == 3:
            trainer.append(["policy.update", now, now + 0.015])
            now += 0.015
    trainer.append(["train", start, now])

    tree = aggregate(trainer, "root", now - start)
    vector_step = next(child for child in tree["children"][0]["children"] if child["name"] == "vector.step")
    worker_trees = [aggregate(spans, f"worker {index}") for index, spans in enumerate(workers)]
    vector_step["children"].append(merged_workers(worker_trees))
    tree["gauges"] = {"episode_return": {"value": 187.0, "min": 12.0, "max": 200.0, "count": 40}}
    tree["metadata"] = {
        "run_id": "cartpole-ppo (simulated)",
        "timer_format_version": "0.1.0",
        "python_version": "3.11.7",
        "command_line_arguments": "train.py --num-envs 4",
        "pid": str(TRAINER_PID),
    }
    tree["workers"] = [
        dict(worker_tree, worker_id=index, pid=FIRST_WORKER_PID + index, payloads=STEPS)
        for index, worker_tree in enumerate(worker_trees)
    ]
    tree["timeline"] = {
        "clock": "perf_counter",
        "dropped": 0,
        "processes": [
            process(TRAINER_PID, "trainer", trainer, cpu, [["checkpoint saved", start + 0.06]]),
            *(
                process(FIRST_WORKER_PID + index, f"worker {index}", spans, [], [])
                for index, spans in enumerate(workers)
            ),
        ],
    }
    return normalize_timing_tree(tree) | {"timeline": tree["timeline"]}


def process(pid: int, name: str, spans, counters, instants) -> dict[str, Any]:
    thread = {"tid": 1, "name": "MainThread", "spans": spans, "instants": instants}
    return {"pid": pid, "name": name, "clock_offset": 0.0, "threads": [thread], "counters": counters}


def aggregate(spans: list[list[Any]], name: str, total: float | None = None) -> dict[str, Any]:
    """The timer tree that a thread's nested spans add up to."""
    root: dict[str, Any] = {"name": name, "total": 0.0, "count": 1, "children": []}
    open_spans: list[tuple[float, dict[str, Any]]] = []
    for block, begin, end in sorted(spans, key=lambda span: (span[1], -span[2])):
        while open_spans and open_spans[-1][0] <= begin:
            open_spans.pop()
        parent = open_spans[-1][1] if open_spans else root
        node = next((child for child in parent["children"] if child["name"] == block), None)
        if node is None:
            node = {"name": block, "total": 0.0, "count": 0, "children": []}
            parent["children"].append(node)
        node["total"] += end - begin
        node["count"] += 1
        open_spans.append((end, node))
    root["total"] = total if total is not None else sum(child["total"] for child in root["children"])
    return root


def merged_workers(worker_trees: list[dict[str, Any]]) -> dict[str, Any]:
    """The workers' blocks summed under one parallel ``worker_root``, as the merger does."""
    merged: dict[str, Any] = {"name": "worker_root", "total": 0.0, "count": STEPS, "is_parallel": True, "children": []}
    for worker_tree in worker_trees:
        merged["total"] += worker_tree["total"]
        for block in worker_tree["children"]:
            into = next((child for child in merged["children"] if child["name"] == block["name"]), None)
            if into is None:
                into = {"name": block["name"], "total": 0.0, "count": 0, "is_parallel": True, "children": []}
                merged["children"].append(into)
            into["total"] += block["total"]
            into["count"] += block["count"]
    return merged


# --- the trace, drawn the way Perfetto lays it out ----------------------------------------------

ROW = 20


def trace_page(trace: dict[str, Any]) -> str:
    events = trace["traceEvents"]
    names = {(event["pid"], event["tid"], event["name"]): event["args"] for event in events if event["ph"] == "M"}
    end = max(event["ts"] + event.get("dur", 0) for event in events)
    pids = sorted({event["pid"] for event in events}, key=lambda pid: names[(pid, 0, "process_sort_index")]["sort_index"])
    parts = []
    for pid in pids:
        parts.append(f'<div class="process">{html.escape(names[(pid, 0, "process_name")]["name"])} {pid}</div>')
        counters = [event for event in events if event["pid"] == pid and event["ph"] == "C"]
        for counter_name in sorted({event["name"] for event in counters}):
            parts.append(counter_track(counter_name, [e for e in counters if e["name"] == counter_name], end))
        for tid in sorted({event["tid"] for event in events if event["pid"] == pid and event["ph"] == "X"}):
            parts.append(thread_track(names[(pid, tid, "thread_name")]["name"], pid, tid, events, end))
    ticks = "".join(
        f'<span class="tick" style="left:{fraction * 100}%">{fraction * end / 1000:.0f} ms</span>'
        for fraction in (0, 0.2, 0.4, 0.6, 0.8)
    )
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; font: 12px system-ui, sans-serif; background: #fff; color: #222; }}
.axis, .track, .process {{ display: grid; grid-template-columns: 190px 1fr; }}
.axis {{ height: 22px; border-bottom: 1px solid #ccc; background: #f6f7f9; }}
.axis .lane, .track .lane {{ position: relative; }}
.tick {{ position: absolute; top: 4px; padding-left: 3px; border-left: 1px solid #bbb; color: #555; }}
.process {{ display: block; background: #eef1f5; padding: 4px 8px; font-weight: 600; border-top: 1px solid #ccd; }}
.label {{ padding: 3px 8px 3px 18px; color: #444; border-right: 1px solid #ddd; overflow: hidden; white-space: nowrap; }}
.track {{ border-bottom: 1px solid #eee; }}
.slice {{ position: absolute; height: {ROW - 2}px; line-height: {ROW - 2}px; font-size: 11px; padding: 0 3px;
          overflow: hidden; white-space: nowrap; color: #fff; border-radius: 1px; }}
.instant {{ position: absolute; top: 0; width: 0; height: 0; border-left: 5px solid transparent;
            border-right: 5px solid transparent; border-top: 9px solid #d32f2f; margin-left: -5px; }}
svg {{ width: 100%; height: 28px; display: block; }}
</style></head><body><div class="axis"><div></div><div class="lane">{ticks}</div></div>{"".join(parts)}</body></html>"""


def thread_track(name: str, pid: int, tid: int, events, end: float) -> str:
    slices = [event for event in events if event["pid"] == pid and event["tid"] == tid and event["ph"] == "X"]
    depth_of, open_ends, blocks = [], [], []
    for event in slices:  # already parents first, in time order
        while open_ends and open_ends[-1] <= event["ts"]:
            open_ends.pop()
        depth_of.append(len(open_ends))
        open_ends.append(event["ts"] + event["dur"])
    for event, depth in zip(slices, depth_of):
        hue = sum(event["name"].encode()) * 47 % 360
        blocks.append(
            f'<div class="slice" style="left:{event["ts"] / end * 100}%;width:{event["dur"] / end * 100}%;'
            f'top:{depth * ROW + 1}px;background:hsl({hue},45%,48%)">{html.escape(event["name"])}</div>'
        )
    for event in events:
        if event["pid"] == pid and event["tid"] == tid and event["ph"] == "i":
            blocks.append(f'<div class="instant" style="left:{event["ts"] / end * 100}%" title="{html.escape(event["name"])}"></div>')
    height = (max(depth_of, default=0) + 1) * ROW + 2
    return f'<div class="track"><div class="label">{html.escape(name)} {tid}</div><div class="lane" style="height:{height}px">{"".join(blocks)}</div></div>'


def counter_track(name: str, samples, end: float) -> str:
    high = max(sample["args"]["value"] for sample in samples) or 1.0
    points, previous = ["0,28"], 28.0
    for sample in samples:
        x = sample["ts"] / end * 1000
        y = 28 - sample["args"]["value"] / high * 26
        points += [f"{x:.1f},{previous:.1f}", f"{x:.1f},{y:.1f}"]
        previous = y
    points += [f"1000,{previous:.1f}", "1000,28"]
    return (
        f'<div class="track"><div class="label">{html.escape(name)}</div><div class="lane">'
        f'<svg viewBox="0 0 1000 28" preserveAspectRatio="none"><polygon fill="#6c8ebf" '
        f'points="{" ".join(points)}"/></svg></div></div>'
    )


# --- screenshots ------------------------------------------------------------------------------

def screenshot(page: Path, picture: Path, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                shutil.which("chromium") or sys.exit("needs chromium on PATH (apt-get install chromium)"),
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={width},{height}",
                f"--screenshot={picture}", page.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    print(picture)


def main() -> None:
    run = simulate_run()
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.html"
        report.write_text(render(run, "html"), encoding="utf-8")
        trace = Path(folder) / "trace.html"
        trace.write_text(trace_page(to_chrome_trace(run)), encoding="utf-8")
        screenshot(report, IMAGES / "report.png", 1200, 1750)
        screenshot(report, IMAGES / "flame_graph.png", 1200, 400)
        screenshot(trace, IMAGES / "trace.png", 1400, 520)


if __name__ == "__main__":
    main()
