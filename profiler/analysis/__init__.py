"""Reading dumped runs: block statistics, where a step's time went, verdicts, diffs and tables.

Everything here reads the JSON-ready tree a dump holds (ours or ML-Agents'), never live timer
stacks, so it works the same on a file from yesterday's run as on the tree just taken.
"""

from profiler.analysis.analyze import AnalyzeOptions, RunAnalysis, analyze_run, render_analysis
from profiler.analysis.diff import RunDiff, diff_runs, render_diff
from profiler.analysis.stats import dumps
from profiler.analysis.verdicts import RunVerdicts, Verdict, judge_run

__all__ = [
    "AnalyzeOptions",
    "RunAnalysis",
    "RunDiff",
    "RunVerdicts",
    "Verdict",
    "analyze_run",
    "diff_runs",
    "dumps",
    "judge_run",
    "render_analysis",
    "render_diff",
]
