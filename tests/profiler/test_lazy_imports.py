"""Specification: ``import profiler`` imports what its names need when they are first used, not all
of rlprof up front (``rlprof run``'s trainer and each env worker would pay for it at start-up)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

HEAVY_MODULES = ("profiler.analysis.analyze", "profiler.analysis.verdicts", "profiler.control.controls",
                 "profiler.control.session", "profiler.integrations.live_view", "profiler.export")


def imported_after(code: str) -> set[str]:
    """The modules of rlprof a new interpreter holds after running ``code``."""
    probe = textwrap.dedent(code) + "\nimport sys\nprint(' '.join(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(done.stdout.split())


def test_import_profiler_imports_neither_the_analysis_nor_the_control_surfaces():
    modules = imported_after("import profiler")
    assert modules.isdisjoint(HEAVY_MODULES)


def test_timing_a_block_imports_neither_the_analysis_nor_the_control_surfaces():
    modules = imported_after("""
        import profiler
        with profiler.hierarchical_timer("step"):
            pass
    """)
    assert modules.isdisjoint(HEAVY_MODULES)


def test_every_name_of_profiler_is_there_when_asked_for():
    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import profiler
        missing = [name for name in profiler.__all__ if getattr(profiler, name, None) is None]
        print(missing, sorted(set(profiler.__all__) - set(dir(profiler))))
    """)], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout == "[] []\n"


def test_the_analysis_package_imports_the_analysis_when_a_name_is_asked_for():
    modules = imported_after("from profiler.analysis import analyze_run")
    assert "profiler.analysis.analyze" in modules


def test_import_profiler_still_records_gpu_memory_at_each_memory_sample():
    assert "profiler.gpu.device_memory" in imported_after("import profiler")


OPERATOR_RECORDING = ("profiler.gpu.torch_ops", "profiler.gpu.operator_figures", "profiler.gpu.execution_trace")


def test_a_worker_sending_payloads_without_operators_imports_no_operator_recording():
    # Every env worker of `rlprof run` sends payloads; few record PyTorch's operators.
    modules = imported_after("""
        import profiler
        from profiler.multiprocess.payload import snapshot_and_flush
        with profiler.hierarchical_timer("step"):
            pass
        assert snapshot_and_flush()[-1] is None  # no operators field
    """)
    assert modules.isdisjoint(OPERATOR_RECORDING)


def test_a_dump_without_operators_imports_no_operator_recording():
    modules = imported_after("""
        import profiler
        from profiler.tree.timer_tree import get_timer_tree
        with profiler.hierarchical_timer("step"):
            pass
        assert "operators" not in get_timer_tree()
    """)
    assert modules.isdisjoint(OPERATOR_RECORDING)


def test_timing_blocks_and_sending_payloads_import_no_psutil():
    # what an env worker of `rlprof run` does; psutil's import was a quarter of its start-up cost
    modules = imported_after("""
        import profiler
        from profiler.multiprocess.payload import snapshot_and_flush
        from profiler.recording import scheduling
        with profiler.hierarchical_timer("step"):
            pass
        snapshot_and_flush()
        assert scheduling.seconds_lived() >= 0
    """)
    assert "psutil" not in modules


def test_a_process_sampling_its_memory_reads_its_uss_through_psutil():
    modules = imported_after("""
        from profiler.recording.memory import _MemoryReader
        reader = _MemoryReader()
        assert reader.rss() > 0 and (reader.uss() or 0) >= 0
    """)
    assert "psutil" in modules
