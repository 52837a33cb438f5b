"""Specification: the trace, the report and the analysis that ``rlprof run`` makes at the exit are
those of the timers file it wrote — the trace's plain spans, formatted as text for speed, read as
the trace document built event by event from that file would."""

from __future__ import annotations

import gzip
import subprocess
import sys
import textwrap
from pathlib import Path

from profiler import load_timing_tree
from profiler.analysis.analyze import AnalyzeOptions, analyze_run, render_analysis
from profiler.export import write_export
from profiler.export.chrome_trace import to_chrome_trace
from profiler.tree.strict_json import dumps

FINISHES_WITHIN = 120  # seconds: generous, for a loaded machine; no test checks a duration

MANY_SPANS_SCRIPT = """
    import profiler
    from profiler import hierarchical_timer

    rl = profiler.Domain("rl")
    for step in range(1500):
        with hierarchical_timer("env.step"):
            with hierarchical_timer("policy"):
                pass
        if step % 100 == 0:
            with rl.new_task("update"):  # a span with details: its category
                profiler.set_gauge("loss", 1.0 / (step + 1))
            profiler.mark("checkpoint")
"""


def test_the_exit_s_trace_report_and_analysis_are_those_of_the_timers_file(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(MANY_SPANS_SCRIPT))
    result = subprocess.run([sys.executable, "-m", "profiler", "run", "--no-stack-sampler", "--summaries-dir", "out",
                             "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=FINISHES_WITHIN)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    tree = load_timing_tree(out / "train_timers.json")
    assert sum(len(thread["spans"]) for thread in tree["timeline"]["processes"][0]["threads"]) > 3000

    trace = gzip.decompress((out / "train_trace.json.gz").read_bytes()).decode()
    assert trace == dumps(to_chrome_trace(tree), separators=(",", ":"))
    write_export(tree, "html", tmp_path / "again.html")
    assert (out / "train_report.html").read_bytes() == (tmp_path / "again.html").read_bytes()
    assert render_analysis(analyze_run(tree, AnalyzeOptions(top=10)), title="train.py") in result.stderr
