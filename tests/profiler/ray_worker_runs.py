"""Runs of the plain Ray programs in ``integrations/ray_programs/`` (real subprocesses, on a real Ray:
the test session's, or a local one each program starts), for the tests of
``profiler.integrations.ray_workers``, and readers of the Ray workers' entries in their dumps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parent / "integrations" / "ray_programs"
FINISHES_WITHIN = 300  # seconds: generous, for a loaded machine; no test checks a duration


def run_python(folder: Path, *command: str, ray_address: str = "local") -> subprocess.CompletedProcess[str]:
    """``python *command`` in ``folder``, with the programs' folder importable by Ray's workers too
    (they inherit the driver's environment), joining the Ray at ``ray_address`` (the session's
    saves starting one: seconds on 2 cores), by default a Ray of its own, whatever else runs here."""
    search_path = os.pathsep.join(filter(None, [str(PROGRAMS), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "PYTHONPATH": search_path, "RAY_ADDRESS": ray_address}
    return subprocess.run([sys.executable, *command], cwd=folder, env=environment, capture_output=True,
                          text=True, timeout=FINISHES_WITHIN)


def ray_workers(tree: dict) -> list[dict]:
    """The dump's entries of the Ray worker processes ``rlprof run`` timed."""
    return [entry for entry in tree["workers"] if entry.get("manager") == "ray workers"]


def actors(tree: dict, class_name: str) -> list[dict]:
    return [entry for entry in ray_workers(tree) if entry["ray"].get("class") == class_name]


def child(node: dict, name: str) -> dict:
    return next(entry for entry in node["children"] if entry["name"] == name)


def walk(node: dict):
    """Every block under ``node``, depth first."""
    for entry in node.get("children", ()):
        yield entry
        yield from walk(entry)
