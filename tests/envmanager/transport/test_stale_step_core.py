"""A stale build of the step path's C helper (``_step_core``, compiled from other sources than
this code's, or from before it said a version): ``import envmanager`` still works, the Python
reference times the steps, and one warning line names the file and the rebuild."""

from __future__ import annotations

import json
from pathlib import Path

from extension_builds import build_module, copy_packages, needs_compiler, run_in
from envmanager.transport import timed_calls

pytestmark = needs_compiler

REPORT = """
import json, envmanager
from envmanager import SubprocessEnvManager
from envmanager.transport import step_stamps, timed_calls
from profiler.timing.phased_block import PhasedBlock
record = step_stamps.step_record(PhasedBlock("step", ("a", "b", "c")), [None], (1.0,), None)
print(json.dumps({"compiled": timed_calls.compiled(), "reason": timed_calls.unavailable_reason,
                  "python_steps": type(record) is step_stamps.StepRecordInPython,
                  "python_counter": step_stamps.whole_steps_counter().__module__ != "envmanager.transport._step_core"}))
"""

# A _step_core from before the helper said its version: one with none of today's functions, as a
# build from older sources lacks the newer ones (the fault: AttributeError out of import).
UNVERSIONED = """
#include <Python.h>
static struct PyModuleDef definition = {PyModuleDef_HEAD_INIT, "_step_core", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__step_core(void) { return PyModule_Create(&definition); }
"""


def assert_python_reference_runs_and_one_line_names(result, stale: Path, built_version: str) -> None:
    report = json.loads(result.stdout)
    assert report["compiled"] is False and report["python_steps"] and report["python_counter"]
    assert report["reason"].startswith(f"the step path's C helper {stale} is a stale build "
                                       f"(interface version {built_version},")
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{stale}:0: RuntimeWarning: ")
    assert "`python setup.py build_ext --inplace`" in line


def test_the_helper_built_from_these_sources_says_their_interface_version():
    if timed_calls.extension() is not None:
        assert timed_calls.extension().VERSION == timed_calls.STEP_CORE_VERSION


def test_a_helper_of_another_version_falls_back_to_the_python_reference(tmp_path):
    copy_packages(tmp_path)
    stale = build_module(tmp_path, "envmanager.transport._step_core", "envmanager/transport/_step_core.c",
                         "STEP_CORE_VERSION=0")
    assert_python_reference_runs_and_one_line_names(run_in(tmp_path, REPORT), stale, "0")


def test_a_helper_from_before_versions_falls_back_instead_of_failing_the_import(tmp_path):
    copy_packages(tmp_path)
    (tmp_path / "old_step_core.c").write_text(UNVERSIONED)
    stale = build_module(tmp_path, "envmanager.transport._step_core", "old_step_core.c")
    assert_python_reference_runs_and_one_line_names(run_in(tmp_path, REPORT), stale, "None")
