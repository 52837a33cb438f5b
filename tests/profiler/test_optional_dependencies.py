"""Specification: ``profiler`` needs neither Gymnasium nor numpy.

A user who only analyses timer files, or times code that has nothing to do with Gymnasium, can
install rlprof beside any Gymnasium (or none). Each test runs a new interpreter in which importing
``gymnasium`` or ``numpy`` fails, as it would where they are not installed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from not_installed import run_without

MLAGENTS_FILE = Path(__file__).resolve().parents[1] / "data" / "mlagents_timers.json"


def run_without_gymnasium_and_numpy(code: str) -> subprocess.CompletedProcess[str]:
    return run_without(("gymnasium", "numpy"), code)


def test_every_profiler_module_imports_without_gymnasium_and_numpy():
    result = run_without_gymnasium_and_numpy("""
        import pkgutil, importlib
        import profiler
        for module in pkgutil.walk_packages(profiler.__path__, "profiler."):
            if module.name != "profiler.__main__":
                importlib.import_module(module.name)
        print(sorted(name for name in sys.modules if name.split(".")[0] in ("gymnasium", "numpy")))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"


def test_timers_and_rlprof_analyze_work_without_gymnasium_and_numpy():
    result = run_without_gymnasium_and_numpy(f"""
        import profiler
        from profiler.cli.commands import main
        with profiler.hierarchical_timer("step"):
            pass
        assert profiler.get_timer_tree()["children"][0]["name"] == "step"
        sys.exit(main(["analyze", {str(MLAGENTS_FILE)!r}]))
    """)
    assert result.returncode == 0, result.stderr
    assert "Where the env_step time went" in result.stdout
