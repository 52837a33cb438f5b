"""setup.py's optional accelerators: the sdist carries every file their builds need (both C
files and the header they share), they build from it, and without a compiler the build still
succeeds and rlprof runs its pure-Python cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]

CORES_REPORT = """
import json
from profiler.timing import accelerator
from envmanager.transport import timed_calls
print(json.dumps({"timer_core": accelerator.extension is not None, "step_core": timed_calls.compiled(),
                  "from": accelerator.__file__}))
"""


@pytest.fixture(scope="module")
def unpacked_sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist built from this checkout, unpacked: what `pip install rlprof-*.tar.gz` builds from."""
    where = tmp_path_factory.mktemp("sdist")
    run([sys.executable, "setup.py", "-q", "sdist", "-d", str(where)], REPOSITORY)
    (archive,) = where.glob("rlprof-*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(where, filter="data")
    (unpacked,) = [path for path in where.iterdir() if path.is_dir()]
    return unpacked


def run(command: list[str], cwd: Path, **environment: str) -> str:
    result = subprocess.run(
        command, cwd=cwd, env={**os.environ, **environment}, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def build_copy(unpacked_sdist: Path, destination: Path, **environment: str) -> dict:
    """Build the accelerators in a copy of the sdist, in place; which cores the copy then runs."""
    run(["cp", "-a", f"{unpacked_sdist}/.", str(destination)], unpacked_sdist)
    run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], destination, **environment)
    report = run([sys.executable, "-c", CORES_REPORT], destination, PYTHONPATH=str(destination), RLPROF_PURE_PYTHON="")
    return json.loads(report)


def test_the_sdist_carries_both_accelerators_and_the_header_they_share(unpacked_sdist):
    for source in ("profiler/timing/_timer_core.c", "envmanager/transport/_step_core.c", "profiler/timing/_slots_and_clock.h",
                   "profiler/automatic/_block_watch.c", "profiler/automatic/_module_call_core.c",
                   "profiler/timing/_timer_core_api.h",
                   "envmanager/transport/_step_record.h"):
        assert (unpacked_sdist / source).is_file(), source


def test_both_accelerators_build_from_the_sdist(unpacked_sdist, tmp_path):
    report = build_copy(unpacked_sdist, tmp_path)
    assert report["from"].startswith(str(tmp_path))
    assert report["timer_core"] is True and report["step_core"] is True


def test_without_a_compiler_the_sdist_builds_and_runs_its_python_cores(unpacked_sdist, tmp_path):
    report = build_copy(unpacked_sdist, tmp_path, CC="false")  # a compiler that always fails
    assert report["from"].startswith(str(tmp_path))
    assert report["timer_core"] is False and report["step_core"] is False
