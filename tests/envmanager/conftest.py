"""Fixtures for the envmanager tests: every test must leave no worker process behind."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Spawned workers unpickle the test envs by module name, so this folder must be importable.
sys.path.insert(0, str(Path(__file__).parent))

from envmanager_testenvs import worker_children  # noqa: E402


@pytest.fixture(autouse=True)
def no_child_process_left() -> Iterator[None]:
    yield
    left = worker_children()
    assert not left, f"child processes outlived the test: {left}"
