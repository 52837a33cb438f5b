"""setup.py's optional accelerators: the sdist carries every file their builds need (both C
files and the header they share), they build from it, and without a compiler the build still
succeeds and rlprof runs its pure-Python cores."""

from __future__ import annotations

import fcntl
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
    # setup.py lays the sdist's files out in the checkout (rlprof-<version>/) and removes them when
    # done: two pytest-xdist workers building it at once would remove each other's. The lock is
    # beside the workers' own temporary folders, which both see.
    with open(tmp_path_factory.getbasetemp().parent / "sdist.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
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
                   "profiler/timing/_timer_core_api.h", "profiler/timing/_remembered_reads.h",
                   "envmanager/transport/_step_record.h"):
        assert (unpacked_sdist / source).is_file(), source


def test_both_accelerators_build_from_the_sdist(unpacked_sdist, tmp_path):
    report = build_copy(unpacked_sdist, tmp_path)
    assert report["from"].startswith(str(tmp_path))
    assert report["timer_core"] is True and report["step_core"] is True


REFUSING_COMPILER = """#!/bin/sh
echo "$*" >> {log}
case " $* " in *" -mtls-dialect=gnu2 "*) exit 1;; esac
exec gcc "$@"
"""


def test_the_build_adds_each_call_flag_the_compiler_takes_and_leaves_out_one_it_refuses(unpacked_sdist, tmp_path):
    # GCC on Linux, behind a wrapper that logs each command and refuses the TLS dialect flag.
    log = tmp_path / "compiler.log"
    compiler = tmp_path / "cc"
    compiler.write_text(REFUSING_COMPILER.format(log=log))
    compiler.chmod(0o755)
    destination = tmp_path / "copy"
    destination.mkdir()
    report = build_copy(unpacked_sdist, destination, CC=str(compiler))
    compiles = [line for line in log.read_text().splitlines() if "_timer_core.c -o " in line]
    assert compiles, log.read_text()
    assert all("-fno-plt" in line and "-mtls-dialect=gnu2" not in line for line in compiles)
    assert report["timer_core"] is True and report["step_core"] is True


def test_without_a_compiler_the_sdist_builds_and_runs_its_python_cores(unpacked_sdist, tmp_path):
    report = build_copy(unpacked_sdist, tmp_path, CC="false")  # a compiler that always fails
    assert report["from"].startswith(str(tmp_path))
    assert report["timer_core"] is False and report["step_core"] is False
