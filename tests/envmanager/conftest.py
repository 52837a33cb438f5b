"""Fixtures for the envmanager tests: every test must leave no worker process behind."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

# Spawned workers unpickle the test envs by module name, so this folder must be importable.
sys.path.insert(0, str(Path(__file__).parent))

from envmanager_testenvs import kill_all, worker_children  # noqa: E402


@pytest.fixture(autouse=True)
def no_child_process_left() -> Iterator[None]:
    """The test fails if a process it started outlives it; that process is killed first, so that
    the tests after it are not failed by it too, and the message names what it ran."""
    yield
    left = worker_children()
    if not left:
        return
    described = [_describe(process) for process in left]
    kill_all(left)
    psutil.wait_procs(left, timeout=5)
    pytest.fail(f"child processes outlived the test (killed now): {described}")


def _describe(process: psutil.Process) -> str:
    try:
        return f"{process.pid} {' '.join(process.cmdline())[:200]}"
    except psutil.Error:
        return f"{process.pid} (ended)"
