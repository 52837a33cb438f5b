"""Reading dumped runs: block statistics, where a step's time went, verdicts, diffs and tables.

Everything here reads the JSON-ready tree a dump holds (ours or ML-Agents'), never live timer
stacks, so it works the same on a file from yesterday's run as on the tree just taken.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for type checkers and readers: what each name is
    from profiler.analysis.analyze import AnalyzeOptions, RunAnalysis, analyze_run, render_analysis
    from profiler.analysis.diff import RunDiff, diff_runs, render_diff
    from profiler.analysis.stats import dumps
    from profiler.analysis.verdicts import RunVerdicts, Verdict, judge_run

# Imported when first asked for (PEP 562): the analysis and its verdicts are a tenth of a second of
# imports that a trainer under ``rlprof run`` (and each of its env workers) would otherwise pay at
# start-up, though only the end of the run reads them; ``import profiler`` reaches this package
# through ``dumps``, which needs none of them.
_HOMES = {
    "AnalyzeOptions": "profiler.analysis.analyze",
    "RunAnalysis": "profiler.analysis.analyze",
    "analyze_run": "profiler.analysis.analyze",
    "render_analysis": "profiler.analysis.analyze",
    "RunDiff": "profiler.analysis.diff",
    "diff_runs": "profiler.analysis.diff",
    "render_diff": "profiler.analysis.diff",
    "dumps": "profiler.analysis.stats",
    "RunVerdicts": "profiler.analysis.verdicts",
    "Verdict": "profiler.analysis.verdicts",
    "judge_run": "profiler.analysis.verdicts",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # asked once: later lookups find it without coming here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


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
