"""The export example runs as documented and writes one file per format."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from example_runner import REPOSITORY, run_example

MLAGENTS_FILE = REPOSITORY / "tests" / "data" / "mlagents_timers.json"


def written_paths(*arguments: str) -> list[Path]:
    completed = run_example("export_outputs.py", *arguments)
    return [Path(line) for line in completed.stdout.splitlines()]


def test_the_example_times_a_loop_and_writes_every_format(tmp_path):
    written = written_paths("--out", str(tmp_path))
    assert sorted(path.name for path in written) == [
        "profile.speedscope.json",
        "report.html",
        "stacks.collapsed.txt",
        "trace.json.gz",
    ]
    trace = json.loads(gzip.decompress((tmp_path / "trace.json.gz").read_bytes()))
    names = {event["name"] for event in trace["traceEvents"]}
    assert {"env.step", "policy.update", "logger.flush"} <= names


def test_the_example_exports_an_mlagents_run(tmp_path):
    written_paths("--out", str(tmp_path), str(MLAGENTS_FILE))
    assert "root;TrainerController.start_learning;env_step" in (tmp_path / "stacks.collapsed.txt").read_text()
