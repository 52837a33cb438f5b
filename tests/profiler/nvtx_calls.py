"""An NVTX backend that writes down the calls it gets, for the tests of profiler.gpu.

Nsight Systems, which would show the ranges, does not run here; this stands in for it. It writes
to a file, so that env workers in other processes can use it too (it pickles by its path).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


def skip_without_nvtx_package() -> None:
    """Skip the calling test where the real ``nvtx`` package (an optional extra) is missing."""
    pytest.importorskip(
        "nvtx", reason="needs the nvtx package: pip install 'rlprof[nvtx]' (the README's test command does)"
    )


class RecordedCalls:
    """Appends one JSON line per call to ``path``: ``["push", message, seq, category, pid]`` or
    ``["pop", pid]``."""

    name = "recorded"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)

    def push_range(self, message: str, sequence: int, category: str) -> None:
        self._write(["push", message, sequence, category, os.getpid()])

    def pop_range(self) -> None:
        self._write(["pop", os.getpid()])

    def _write(self, call: list) -> None:
        with open(self.path, "a") as file:
            file.write(json.dumps(call) + "\n")

    def calls(self) -> list[list]:
        path = Path(self.path)
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]
