"""Real builds of the C helpers from other sources than this checkout's, for the tests of what
rlprof does with a stale build: a copy of the packages without their built modules, and a module
compiled into it the way ``python setup.py build_ext --inplace`` compiles one.

A stale build is made for real: the checkout's own C file compiled with its interface version set
to 0 (``-D<macro>=0``), or a tiny module of the right name from before versions existed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]

_BUILD = """
import sys
from setuptools import Extension, setup
name, source, macros = sys.argv[1], sys.argv[2], sys.argv[3:]
setup(script_args=["-q", "build_ext", "--inplace"],
      ext_modules=[Extension(name, sources=[source], include_dirs=["profiler/timing"],
                             define_macros=[tuple(macro.split("=", 1)) for macro in macros])])
"""

needs_compiler = pytest.mark.skipif(
    shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) is None, reason="no C compiler here"
)
"""On tests that build a module: where no compiler is found there is nothing stale to load."""


def copy_packages(destination: Path) -> None:
    """The checkout's ``profiler`` and ``envmanager`` in ``destination``, sources only: no built
    module, so what is built there next is the only one."""
    for package in ("profiler", "envmanager"):
        shutil.copytree(REPOSITORY / package, destination / package,
                        ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))


def build_module(root: Path, module_name: str, source: str, *macros: str) -> Path:
    """Compile ``source`` (relative to ``root``) as the module ``module_name`` in place under
    ``root``, with ``macros`` (``NAME=VALUE``) defined; the built file."""
    result = subprocess.run([sys.executable, "-c", _BUILD, module_name, source, *macros], cwd=root,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    package, _, name = module_name.rpartition(".")
    built = root / package.replace(".", "/") / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    assert built.is_file(), built
    return built


def run_in(root: Path, script: str) -> subprocess.CompletedProcess:
    """``script`` run by Python with ``root`` first on its path (its packages, not the checkout's),
    the C helpers not forced off."""
    environment = {**os.environ, "PYTHONPATH": str(root), "RLPROF_PURE_PYTHON": ""}
    result = subprocess.run([sys.executable, "-c", script], cwd=root, env=environment,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def assert_refused_as_stale(result: subprocess.CompletedProcess, stale: Path, what: str) -> None:
    """A report printing ``{"compiled": ...}`` says the module is not in use, and the one line on
    stderr is the warning naming ``what`` and the stale file."""
    assert json.loads(result.stdout) == {"compiled": False}
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{stale}:0: RuntimeWarning: {what} {stale} is a stale build")


def assert_loaded_quietly(result: subprocess.CompletedProcess) -> None:
    """A report printing ``{"compiled": ...}`` says the module is in use, and nothing was warned."""
    assert json.loads(result.stdout) == {"compiled": True}
    assert result.stderr == ""
