"""Specification: each exporter is imported when its format is first written, so ``rlprof run``'s
exit, which writes the trace and the report, imports no other format's module."""

from __future__ import annotations

import subprocess
import sys
import textwrap

OTHER_FORMATS = ("profiler.export.speedscope", "profiler.export.collapsed")


def modules_after(code: str) -> set[str]:
    probe = textwrap.dedent(code) + "\nimport sys\nprint(' '.join(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(done.stdout.split())


def test_writing_the_trace_and_the_report_imports_no_other_formats_exporter(tmp_path):
    modules = modules_after(f"""
        from profiler import get_timer_tree, hierarchical_timer
        from profiler.export import write_export
        with hierarchical_timer("step"):
            pass
        tree = get_timer_tree()
        write_export(tree, "chrome", {str(tmp_path / "trace.json.gz")!r})
        write_export(tree, "html", {str(tmp_path / "report.html")!r})
    """)
    assert "profiler.export.html_report" in modules
    assert sorted(modules.intersection(OTHER_FORMATS)) == []


def test_every_format_is_there_when_asked_for():
    modules = modules_after("""
        from profiler import get_timer_tree, hierarchical_timer
        from profiler.export import EXPORT_FORMATS, render
        with hierarchical_timer("step"):
            pass
        assert all(render(get_timer_tree(), name) for name in EXPORT_FORMATS)
    """)
    assert set(OTHER_FORMATS) <= modules
